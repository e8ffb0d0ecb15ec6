"""The `svc dispatch` command: the switch over all live dispatch (`domain/dispatch/switch.py`), shown, paused with a
reason and resumed, read and written in the database as `GET/PUT /api/v1/router/dispatch` do."""

from __future__ import annotations

import getpass
import json
from typing import TextIO

import contracts
from domain.clock import Clock, iso
from domain.config import Config
from domain.dispatch import switch

# What `PUT router/dispatch` takes for a reason (`router-dispatch-put.json`).
REASON_LENGTH = contracts.part("router-dispatch-put.json", "/properties/reason")["maxLength"]


def describe(found: switch.Switch) -> str:
    """The switch for people, one line."""
    if found.changed_at is None:
        return "dispatch is running (never paused)"
    state = "PAUSED" if found.paused else "running"
    why = f": {found.reason}" if found.reason else ""
    verb = "paused" if found.paused else "resumed"
    return f"dispatch is {state}{why} ({verb} by {found.changed_by or 'no one recorded'} at {iso(found.changed_at)})"


def show(*, output: str, out: TextIO) -> int:
    found = switch.read()
    if output == "json":
        from api import representations

        out.write(json.dumps(representations.dispatch_switch(found)) + "\n")
    else:
        out.write(describe(found) + "\n")
    return 0


def change(*, paused: bool, reason: str | None, config: Config, clock: Clock, out: TextIO, err: TextIO) -> int:
    """Pause (a reason required) or resume (the held jobs queued, the held forge writes let go): exit 0, or 2 when
    the reason cannot be used (nothing changed)."""
    if reason is not None and not 0 < len(reason.strip()) <= REASON_LENGTH:
        err.write(
            f"svc dispatch: --reason must say why, in 1 to {REASON_LENGTH} characters (it is shown on the board)\n"
        )
        return 2
    if paused and reason is None:
        err.write("svc dispatch pause: --reason TEXT is required (it is shown on every page of the board)\n")
        return 2
    from domain.services import build_services

    found = build_services(config, clock).dispatch.set_switch(paused=paused, reason=reason, actor=actor())
    out.write(f"svc dispatch: {describe(found)}\n")
    return 0


def actor() -> str:
    """Who a change made with `svc dispatch` is attributed to: the account that ran the command."""
    try:
        return f"{getpass.getuser()} via svc dispatch"
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return "svc dispatch"
