"""Would the router have been right? Its decisions held against what the team then actually did (the rows are
in `storage/scorecard.py`).

For a decision about ticket T whose rule matched (role `coder` or `fixer`), the team *took up* that work when,
after the decision and within the window (default a day):

- coder: a slot was claimed for T, or a forge `opened` or `synchronized` event about T arrived;
- fixer: a forge `synchronized` or a CI `pipeline_started` event about T arrived.

A `would_dispatch` decision is then *confirmed* (taken up) or *not taken up* (the window passed without it); a
`blocked` one is *overridden* (the team did it anyway) or *held*; either is *pending* while its window is open
and nothing happened. Agreement = (confirmed + held) / settled, with a Wilson 95 % interval; a gate's counts are
over the blocked decisions it failed.

What it needs is kept as it happens, never found by scanning history per request: each judged decision leaves a
`scorecard_entry` when it is recorded, and a signal marks the entries it takes up (`record_signal`). A whole day
whose every window has closed is counted once per window length and kept (`scorecard_day`); a request reads the
kept days and only the entries of the days still open or cut by its range.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from domain import units
from domain.board import SlotClaimed
from domain.policy.rules import Rule
from domain.router.evaluation import BLOCKED, STUCK, WOULD_DISPATCH
from domain.router.gates import GATE_NAMES
from storage import scorecard as rows

DEFAULT_WINDOW = timedelta(days=1)
# The windows a scorecard may be asked for; signals take up entries no older than the longest.
SHORTEST_WINDOW = timedelta(minutes=1)
LONGEST_WINDOW = timedelta(days=30)
WINDOW_SECONDS = (int(SHORTEST_WINDOW.total_seconds()), int(LONGEST_WINDOW.total_seconds()))
ROLES = ("coder", "fixer")
# A `stuck` decision is a fixer held by its spent retry budget: judged as a blocked one. The service's own (`own`)
# are never judged, and never take anything up.
JUDGED_OUTCOMES = (WOULD_DISPATCH, BLOCKED, STUCK)
HELD_BACK = frozenset({BLOCKED, STUCK})
# The kinds of event that say the team took up a role's work on a ticket.
TAKES_UP: dict[str, tuple[str, ...]] = {
    "opened": ("coder",),
    "synchronized": ("coder", "fixer"),
    "pipeline_started": ("fixer",),
}
CONFIRMED, NOT_TAKEN_UP, HELD, OVERRIDDEN, PENDING = "confirmed", "not_taken_up", "held", "overridden", "pending"
RULE_CLASSES = (CONFIRMED, NOT_TAKEN_UP, HELD, OVERRIDDEN, PENDING)
GATE_CLASSES = (HELD, OVERRIDDEN, PENDING)
Z95 = 1.959963984540054


# -- kept as it happens --------------------------------------------------------------------------------------


def record_decision(
    *,
    decision_id: int,
    subject_id: str | None,
    role: str | None,
    outcome: str,
    gates: list[dict[str, Any]],
    at: datetime,
    rule: Rule | None = None,
) -> None:
    """Keep an entry for a decision the scorecard judges (a matched rule about a ticket, dispatched or blocked),
    with the rule and its version: a rule's evidence is counted under one version of it."""
    if role not in ROLES or outcome not in JUDGED_OUTCOMES or not subject_id:
        return
    failed = ",".join(g["gate"] for g in gates if not g["passed"])
    rows.enter(
        decision_id=decision_id,
        subject_id=subject_id,
        role=role,
        outcome=outcome,
        failed_gates=failed,
        at=at,
        rule=rule.name if rule is not None else None,
        rule_version=rule.version if rule is not None else None,
    )


def record_signal(subject_id: str, roles: Iterable[str], *, at: datetime) -> None:
    """The team took up `roles` work on ticket `subject_id` at `at` (call before recording a decision the same
    event makes, so an event never takes up its own decision)."""
    for role in roles:
        rows.take_up(subject_id, role, at=at, not_before=at - LONGEST_WINDOW)


def slot_claimed(claim: SlotClaimed) -> None:
    """Claim listener (`Board`): a ticket that claims a slot has had a coder's work taken up by the team. A dispatch
    job's own claim is the router acting on its decision, not the team agreeing with it: it is no evidence."""
    if claim.job_id is not None:
        return
    record_signal(claim.ticket_key, ("coder",), at=claim.at)


def roles_taken_up_by(envelope: dict[str, Any]) -> tuple[str, ...]:
    """The roles whose work an accepted event says the team took up (none unless it is about a ticket)."""
    if envelope["subject"]["type"] != "ticket":
        return ()
    return TAKES_UP.get(envelope["transition"]["kind"], ())


# -- judged on request ---------------------------------------------------------------------------------------


def classify(outcome: str, evaluated_at: datetime, taken_up_at: datetime | None, *, window: timedelta, now: datetime):
    if taken_up_at is not None and taken_up_at - evaluated_at <= window:
        return CONFIRMED if outcome == WOULD_DISPATCH else OVERRIDDEN
    if evaluated_at + window <= now:
        return NOT_TAKEN_UP if outcome == WOULD_DISPATCH else HELD
    return PENDING


def _keys(role: str, outcome: str, failed_gates: str, cls: str) -> list[str]:
    keys = [f"rule:{role}:{cls}"]
    if outcome in HELD_BACK and failed_gates:
        keys.extend(f"gate:{gate}:{cls}" for gate in failed_gates.split(","))
    return keys


def wilson(agreeing: int, settled: int) -> dict[str, Any]:
    """The agreement rate with its Wilson 95 % interval (None without any settled decision)."""
    if settled == 0:
        return {"rate": None, "low": None, "high": None, "settled": 0}
    p = agreeing / settled
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * settled)) / (1 + z2 / settled)
    half = Z95 * math.sqrt(p * (1 - p) / settled + z2 / (4 * settled * settled)) / (1 + z2 / settled)
    return {
        "rate": round(p, 4),
        "low": round(max(0.0, centre - half), 4),
        "high": round(min(1.0, centre + half), 4),
        "settled": settled,
    }


@dataclass
class Scorecard:
    window_seconds: int
    since: datetime | None
    until: datetime
    counts: Counter
    weeks: list[tuple[date, Counter]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "window_seconds": self.window_seconds,
            "since": _iso(self.since) if self.since else None,
            "until": _iso(self.until),
            **numbers(self.counts),
            "weeks": [{"week": week.isoformat(), "agreement": _overall(counts)} for week, counts in self.weeks],
        }


def numbers(counts: Counter) -> dict[str, Any]:
    rules = {role: _rule_numbers(counts, role) for role in ROLES}
    gates = {}
    for gate in GATE_NAMES:
        entry = {cls: counts[f"gate:{gate}:{cls}"] for cls in GATE_CLASSES}
        entry["agreement"] = wilson(entry[HELD], entry[HELD] + entry[OVERRIDDEN])
        gates[gate] = entry
    return {"rules": rules, "gates": gates}


def _rule_numbers(counts: Counter, role: str) -> dict[str, Any]:
    entry: dict[str, Any] = {cls: counts[f"rule:{role}:{cls}"] for cls in RULE_CLASSES}
    entry["agreement"] = wilson(
        entry[CONFIRMED] + entry[HELD], entry[CONFIRMED] + entry[NOT_TAKEN_UP] + entry[HELD] + entry[OVERRIDDEN]
    )
    return entry


def _overall(counts: Counter) -> dict[str, Any]:
    agreeing = settled = 0
    for role in ROLES:
        agreeing += counts[f"rule:{role}:{CONFIRMED}"] + counts[f"rule:{role}:{HELD}"]
        settled += sum(counts[f"rule:{role}:{cls}"] for cls in (CONFIRMED, NOT_TAKEN_UP, HELD, OVERRIDDEN))
    return wilson(agreeing, settled)


def scorecard(*, now: datetime, since: datetime | None, until: datetime | None, window: timedelta) -> Scorecard:
    """The scorecard of the decisions evaluated in [since, until) (until defaults to now), judged at `now`."""
    until = min(until or now, now)
    first = rows.first_at() if since is None else None
    # The whole history: from the start of its first day, so that day too is whole and kept once settled.
    start = since if since is not None else (_midnight(first.astimezone(UTC).date()) if first else None)
    total: Counter = Counter()
    by_week: dict[date, Counter] = {}
    seconds = int(window.total_seconds())
    if start is None or start >= until:
        return Scorecard(seconds, since, until, total, [])

    def add(day: date, counts: dict[str, int]) -> None:
        total.update(counts)
        by_week.setdefault(day - timedelta(days=day.weekday()), Counter()).update(counts)

    # Whole days inside the range whose every window has closed: counted once and kept.
    first_day = _day_at_or_after(start)
    settled_end = min(until, now - window)
    last_day = settled_end.date() - timedelta(days=1) if settled_end > _midnight(first_day) else None
    scanned_to = start
    if last_day is not None and last_day >= first_day:
        kept = rows.days(seconds, first_day.isoformat(), last_day.isoformat())
        missing = [d for d in _days(first_day, last_day) if d.isoformat() not in kept]
        if missing:
            counted = _count_days(missing, window=window, now=now)
            units.run(lambda: rows.keep_days(seconds, counted), what="keeping the scorecard's settled days")
            kept.update(counted)
        for day in _days(first_day, last_day):
            add(day, {k: v for k, v in kept.get(day.isoformat(), {}).items() if not k.startswith("day:")})
        # The part of the range before the first whole day, and after the last.
        _scan(start, _midnight(first_day), window=window, now=now, add=add)
        scanned_to = _midnight(last_day + timedelta(days=1))
    _scan(scanned_to, until, window=window, now=now, add=add)
    return Scorecard(seconds, since, until, total, sorted(by_week.items()))


def _scan(since: datetime, until: datetime, *, window: timedelta, now: datetime, add) -> None:
    if since >= until:
        return
    for _id, role, outcome, failed, evaluated, taken in rows.entries(since, until):
        cls = classify(outcome, evaluated, taken, window=window, now=now)
        add(evaluated.date(), dict.fromkeys(_keys(role, outcome, failed, cls), 1))


def _count_days(days: list[date], *, window: timedelta, now: datetime) -> dict[str, dict[str, int]]:
    counted: dict[str, dict[str, int]] = {d.isoformat(): {"day:counted": 0} for d in days}
    # Contiguous runs of missing days are read in one pass each.
    runs: list[tuple[date, date]] = []
    for day in days:
        if runs and runs[-1][1] + timedelta(days=1) == day:
            runs[-1] = (runs[-1][0], day)
        else:
            runs.append((day, day))
    for first, last in runs:
        for _id, role, outcome, failed, evaluated, taken in rows.entries(
            _midnight(first), _midnight(last + timedelta(days=1))
        ):
            cls = classify(outcome, evaluated, taken, window=window, now=now)
            counts = counted[evaluated.date().isoformat()]
            counts["day:counted"] += 1
            for key in _keys(role, outcome, failed, cls):
                counts[key] = counts.get(key, 0) + 1
    return counted


def rule_agreement(rule: Rule, *, since: datetime, now: datetime, window: timedelta = DEFAULT_WINDOW) -> dict[str, Any]:
    """One rule's agreement (`wilson`'s rate, low, high and settled) over its decisions evaluated in [since, now)
    under its present version (`rule.version`: its name, role and conditions), judged at `now` as the scorecard
    judges them: what a rule has earned before it may go live (`policy_versions.judge`)."""
    counts: Counter = Counter()
    if rule.role in ROLES:
        for _id, role, outcome, failed, evaluated, taken in rows.entries(since, now, rule_version=rule.version):
            counts.update(_keys(role, outcome, failed, classify(outcome, evaluated, taken, window=window, now=now)))
        return _rule_numbers(counts, rule.role)["agreement"]
    return wilson(0, 0)


# The most decision ids `decisions_behind` gives (newest first).
BEHIND_LIMIT = 200


def decisions_behind(
    key: str,
    *,
    now: datetime,
    since: datetime | None,
    until: datetime | None,
    window: timedelta,
    limit: int = BEHIND_LIMIT,
) -> list[int]:
    """The ids of the decisions (newest first, at most `limit`) behind one number of the scorecard, e.g.
    `rule:coder:confirmed` or `gate:fleet:overridden`."""
    until = min(until or now, now)
    start = since if since is not None else rows.first_at()
    if start is None:
        return []
    found: list[int] = []
    for decision_id, role, outcome, failed, evaluated, taken in rows.entries(start, until):
        cls = classify(outcome, evaluated, taken, window=window, now=now)
        if key in _keys(role, outcome, failed, cls):
            found.append(decision_id)
    return sorted(found, reverse=True)[:limit]


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _day_at_or_after(moment: datetime) -> date:
    day = moment.astimezone(UTC).date()
    return day if _midnight(day) == moment else day + timedelta(days=1)


def _days(first: date, last: date) -> Iterable[date]:
    day = first
    while day <= last:
        yield day
        day += timedelta(days=1)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
