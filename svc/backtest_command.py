"""The `svc backtest` command: every recorded decision in a range under a candidate policy (the policy in force with
the members of `--policy FILE` and the flags changed, rules included), against the board as it was when each was
taken; a report for people or for CI. It writes nothing.

Exit 0; 1 when `--max-flips N` is given and more than N decisions flip (a policy change checked in CI before it
is deployed); 2 on bad input, with one clear line.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from peewee import InterfaceError, OperationalError, ProgrammingError

import contracts
from domain.clock import BadTimestamp, parse_timestamp
from domain.config import Config
from domain.policy.document import Policy
from domain.policy.in_force import PolicyInForce
from domain.router.backtest import backtest
from storage import db


class BadInput(Exception):
    """One clear line about what is wrong with the command's input."""


def run(
    config: Config,
    *,
    since: str | None,
    until: str | None,
    policy_file: str | None,
    allowlist: str | None,
    retry_budget: str | None,
    fleet_size: str | None,
    max_flips: str | None,
    output: str,
    out: TextIO,
    err: TextIO,
) -> int:
    try:
        knobs = _knobs(
            policy_file,
            allowlist,
            _whole("--retry-budget", retry_budget, low=0),
            _whole("--fleet-size", fleet_size, low=1),
        )
        start, end = _moment("--since", since), _moment("--until", until)
        most = _whole("--max-flips", max_flips, low=0, high=10**12)
    except BadInput as exc:
        err.write(f"svc backtest: {exc}\n")
        return 2
    db.bind(db.open_database(config.database_url, max_connections=2))
    try:
        with db.connection():
            candidate = PolicyInForce(Policy.from_config(config))().changed(**knobs)
            report = backtest(candidate, since=start, until=end, max_age=config.dispatch_max_age_seconds)
    except (OperationalError, ProgrammingError, InterfaceError) as exc:
        err.write(
            f"svc backtest: cannot read the recorded decisions ({type(exc).__name__}: {exc}); start the service once "
            "(or run svc migrate) against this database\n"
        )
        return 2
    if output == "json":
        out.write(json.dumps(report.as_dict()) + "\n")
    else:
        out.write(report.text() + "\n")
    if most is not None and report.flipped > most:
        err.write(f"svc backtest: {report.flipped} decisions flip, more than --max-flips {most}\n")
        return 1
    return 0


def _knobs(policy_file: str | None, allowlist: str | None, retry_budget: int | None, fleet_size: int | None):
    """The candidate's members: the policy file's (whole or partial, rules included), then the flags' (which win)."""
    knobs: dict[str, Any] = {}
    if policy_file:
        try:
            document = json.loads(Path(policy_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BadInput(f"cannot read the policy file {policy_file}: {exc}") from None
        try:
            knobs.update(contracts.check("router-policy.json", document))
        except contracts.ContractViolation as exc:
            first = exc.violations[0]
            raise BadInput(f"{policy_file}: {first.path or '/'}: {first.message}") from None
    if allowlist is not None:
        knobs["allowlist"] = [a.strip() for a in allowlist.split(",") if a.strip()]
    if retry_budget is not None:
        knobs["retry_budget"] = retry_budget
    if fleet_size is not None:
        knobs["fleet_size"] = fleet_size
    return knobs


def _whole(flag: str, raw: str | None, *, low: int, high: int = 1000) -> int | None:
    """A knob's number, within what contracts/router-policy.json allows (a policy file is held to the same)."""
    if raw is None:
        return None
    text = raw.strip()
    if not text.isdigit() or not low <= int(text) <= high:
        raise BadInput(f"{flag}: expected a whole number, {low} or more (at most {high:,}); got {raw!r}")
    return int(text)


def _moment(flag: str, raw: str | None) -> datetime | None:
    if raw is None:
        return None
    try:
        return parse_timestamp(raw)
    except BadTimestamp as exc:
        refusal = {
            BadTimestamp.NOT_ISO: f"expected an ISO 8601 time with its zone, like 2026-11-01T00:00:00Z; got {raw!r}",
            BadTimestamp.NO_ZONE: f"give the zone too, like {raw}Z",
            BadTimestamp.OUT_OF_RANGE: f"out of range; got {raw!r}",
        }[exc.problem]
        raise BadInput(f"{flag}: {refusal}") from None
