"""The wallet's row (id 1, created by the first migration), served by `api/resources/wallet.py`."""

from __future__ import annotations

import math
from datetime import datetime

from storage import statements
from storage.models import Wallet

WALLET_ID = 1
# Past ten thousand times the budget the figure says nothing more; the cap keeps it a finite JSON number
# (a budget of 1e-308 would otherwise make it infinite, which JSON cannot carry).
MAX_PERCENT = 1_000_000.0


def get(*, for_update: bool = False) -> Wallet:
    """The wallet, locked for the rest of the transaction on PostgreSQL when `for_update`."""
    return statements.select_one(Wallet, {"id": WALLET_ID}, for_update=for_update)


def put(*, budget: float, spent: float, locked: bool, at: datetime, by: str | None) -> None:
    changes = {"budget": budget, "spent": spent, "locked": locked, "updated_at": at, "updated_by": by}
    Wallet.update(**changes).where(Wallet.id == WALLET_ID).execute()


def percent_used(row: Wallet) -> float:
    """Spent as a percentage of the budget, at most `MAX_PERCENT`; with no budget set, any spend counts as the
    whole of it."""
    budget, spent = float(row.budget), float(row.spent)
    if budget > 0:
        percent = spent / budget * 100
        return round(percent, 2) if math.isfinite(percent) and percent < MAX_PERCENT else MAX_PERCENT
    return 0.0 if spent == 0 else 100.0
