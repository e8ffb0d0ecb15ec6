"""The wallet: one row (id 1), created by the first migration."""

from __future__ import annotations

from datetime import datetime

from storage import statements
from storage.models import Wallet

WALLET_ID = 1


def get() -> Wallet:
    return statements.select_one(Wallet, {"id": WALLET_ID})


def put(*, budget: float, spent: float, locked: bool, at: datetime) -> None:
    Wallet.update(budget=budget, spent=spent, locked=locked, updated_at=at).where(Wallet.id == WALLET_ID).execute()


def percent_used(row: Wallet) -> float:
    """Spent as a percentage of the budget; with no budget set, any spend counts as the whole of it."""
    budget, spent = float(row.budget), float(row.spent)
    if budget > 0:
        return round(spent / budget * 100, 2)
    return 0.0 if spent == 0 else 100.0
