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
`scorecard_entry` when it is recorded, and a signal marks the entries it takes up (`record_signal`). For the
default window (a day), the jobs process counts each whole day whose every window has closed once and keeps its
counts (`keep_settled_days`: a row per key of each day that has entries, each rule version's keys too, their sums
by week, and a mark, "counted through day D", so that a day up to D without rows is known to be empty). A read
writes nothing: it takes the kept weeks inside its range, the kept days of the weeks it cuts, and only the entries of
the days cut by its range or not counted yet, which the database counts in groups (`_tally`); any other window counts
its range so. A year costs a row a key of each week, however many decisions it holds; a rule's standing
(`rule_agreement`) reads its version's keys the same way. A range is clamped to the first entry, so a century costs
what the history holds. Whatever records entries or signals at a past time (`svc import`) drops the kept days from
the first it touched (`forget_days_from`).

The archivist (`domain/ops/archivist.py`) moves old decisions out and leaves their entries: it first has every
settled day counted (`keep_through`) and moves only decisions of counted days, whose counts stay. A read's range is
clamped to the first kept day as well as the first entry, and the days archived are never dropped nor counted again.
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
from domain.clock import iso
from domain.errors import InvalidQuery
from domain.policy.rules import Rule
from domain.router.evaluation import BLOCKED, OUTCOMES, OWN, REJECTED, STUCK, WOULD_DISPATCH
from domain.router.gates import GATE_NAMES
from storage import archive, decisions
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
# The same, by role: the kinds of event that take up its work.
TAKEN_UP_BY: dict[str, tuple[str, ...]] = {
    role: tuple(kind for kind, roles in TAKES_UP.items() if role in roles) for role in ROLES
}
# The outcomes of the accepted events that may take work up: every one but the service's own (and rejected ones,
# which are not accepted).
EVIDENCE_OUTCOMES = tuple(o for o in OUTCOMES if o not in (OWN, REJECTED))
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
    past: bool = False,
) -> None:
    """Keep an entry for a decision the scorecard judges (a matched rule about a ticket, dispatched or blocked),
    with the rule and its version: a rule's evidence is counted under one version of it. `past`: the decision is
    recorded at a past time (`svc import`), so the events after it that are recorded already may have taken its
    work up (the first of them within the longest window is when)."""
    if role not in ROLES or outcome not in JUDGED_OUTCOMES or not subject_id:
        return
    failed = ",".join(g["gate"] for g in gates if not g["passed"])
    taken = None
    if past:
        taken = decisions.first_of_kinds(
            subject_id,
            TAKEN_UP_BY[role],
            since=at,
            until=at + LONGEST_WINDOW,
            other_than=decision_id,
            outcomes=EVIDENCE_OUTCOMES,
        )
    rows.enter(
        decision_id=decision_id,
        subject_id=subject_id,
        role=role,
        outcome=outcome,
        failed_gates=failed,
        at=at,
        rule=rule.name if rule is not None else None,
        rule_version=rule.version if rule is not None else None,
        taken_up_at=taken,
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
    taken = taken_up_at is not None and taken_up_at - evaluated_at <= window
    return class_of(outcome, taken=taken, closed=evaluated_at + window <= now)


def class_of(outcome: str, *, taken: bool, closed: bool) -> str:
    """A decision's class: taken up within its window, else judged once the window has closed, else pending."""
    if taken:
        return CONFIRMED if outcome == WOULD_DISPATCH else OVERRIDDEN
    if closed:
        return NOT_TAKEN_UP if outcome == WOULD_DISPATCH else HELD
    return PENDING


def _keys(role: str, outcome: str, failed_gates: str, cls: str) -> list[str]:
    keys = [f"rule:{role}:{cls}"]
    if outcome in HELD_BACK and failed_gates:
        keys.extend(f"gate:{gate}:{cls}" for gate in failed_gates.split(","))
    return keys


def _version_key(rule_version: str, cls: str) -> str:
    """A rule version's count of one class, kept beside the role's (what a rule has earned reads them)."""
    return f"{VERSION_PREFIX}{rule_version}:{cls}"


VERSION_PREFIX = "version:"
# The keys the scorecard's numbers are made of (a rule version's are read only for its standing).
NUMBER_PREFIXES = ("rule:", "gate:")


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
            "since": iso(self.since),
            "until": iso(self.until),
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
    """The scorecard of the decisions evaluated in [since, until) (until defaults to now), judged at `now`. Reads
    only: kept days where the jobs process counted them, the entries of the rest of the range. Raises
    `InvalidQuery` for a range that ends before it starts."""
    if since is not None and until is not None and until < since:
        raise InvalidQuery("until", f"the range ends ({iso(until)}) before it starts (since {iso(since)})")
    until = min(until or now, now)
    seconds = int(window.total_seconds())
    total: Counter = Counter()
    by_week: dict[date, Counter] = {}
    first = _first_day(seconds)
    if first is None:
        return Scorecard(seconds, since, until, total, [])
    # Nothing is evaluated before the first entry (or the first kept day, once the oldest entries were archived): a
    # range that starts earlier starts at that day's midnight (so its day is whole, and read from the kept counts),
    # whatever it asked for.
    start = _midnight(first)
    if since is not None and since > start:
        start = since
    if start >= until:
        return Scorecard(seconds, since, until, total, [])

    def add(day: date, counts: dict[str, int]) -> None:
        total.update(counts)
        by_week.setdefault(_week(day), Counter()).update(counts)

    # The whole days of the range whose counts are kept: from the first that starts inside it to the last that ends
    # inside it, up to the mark.
    through = _counted_through(seconds)
    first_day = _day_at_or_after(start)
    last_day = min(until.astimezone(UTC).date() - timedelta(days=1), through) if through is not None else None
    if last_day is not None and last_day >= first_day:
        for week, counts in _kept(seconds, first_day, last_day, prefixes=NUMBER_PREFIXES):
            total.update(counts)
            by_week.setdefault(week, Counter()).update(counts)
        # The part of the range before the first kept day, and after the last.
        _scan(start, _midnight(first_day), window=window, now=now, add=add)
        _scan(_midnight(last_day + timedelta(days=1)), until, window=window, now=now, add=add)
    else:
        _scan(start, until, window=window, now=now, add=add)
    # Every week of the range, those without a settled decision too (the chart keeps their place).
    week, last_week = _week(start.astimezone(UTC).date()), _week(until.astimezone(UTC).date())
    while week <= last_week:
        by_week.setdefault(week, Counter())
        week += timedelta(days=7)
    return Scorecard(seconds, since, until, total, sorted(by_week.items()))


def _kept(seconds: int, first: date, last: date, *, prefixes: tuple[str, ...]) -> list[tuple[date, dict[str, int]]]:
    """The kept counts from day `first` to day `last` (inclusive, every one of them counted), as (its week's
    Monday, key -> count) parts: each whole week's sums, and the days of the weeks cut at either end (at most six
    each), so a long range reads a row a key of each week, however many decisions it holds."""
    whole_from = first + timedelta(days=(7 - first.weekday()) % 7)  # the first Monday on or after `first`
    whole_to = _week(last + timedelta(days=1)) - timedelta(days=7)  # the Monday of the last week ending by `last`
    if whole_from > whole_to:
        days = [(first, last)]
        weeks: dict[date, dict[str, int]] = {}
    else:
        days = [(first, whole_from - timedelta(days=1)), (whole_to + timedelta(days=7), last)]
        weeks = rows.kept_weeks(seconds, whole_from, whole_to, prefixes=prefixes)
    found = list(weeks.items())
    for since, until in days:
        if since <= until:
            for day, counts in rows.kept_days(seconds, since, until, prefixes=prefixes).items():
                found.append((_week(day), counts))
    return found


def _first_day(seconds: int) -> date | None:
    """The day of the first entry, or the first kept day when it is earlier (the archivist moved the entries of the
    oldest days out, and their counts stay)."""
    first = rows.first_at()
    days = [first.astimezone(UTC).date()] if first is not None else []
    if seconds == KEPT_WINDOW_SECONDS and (kept := rows.first_day(seconds)) is not None:
        days.append(kept)
    return min(days, default=None)


def _counted_through(seconds: int) -> date | None:
    """The last day whose counts are kept for this window (only the default window's are), or None."""
    if seconds != KEPT_WINDOW_SECONDS:
        return None
    through, _version = rows.mark(seconds)
    return through


def _scan(since: datetime, until: datetime, *, window: timedelta, now: datetime, add) -> None:
    for (day, role, outcome, failed, _version, cls), count in _tally(since, until, window=window, now=now).items():
        add(day, dict.fromkeys(_keys(role, outcome, failed, cls), count))


def _tally(
    since: datetime, until: datetime, *, window: timedelta, now: datetime, rule_version: str | None = None
) -> Counter:
    """The entries evaluated in [since, until) (under `rule_version`, when given), judged at `now` as `classify`
    judges one, counted by (day, role, outcome, failed gates, rule version, class). The database counts them in
    groups (`rows.tally`: taken up within the window or not, its window closed or not); each group's class is
    named here."""
    found: Counter = Counter()
    if since >= until:
        return found
    groups = rows.tally(
        since,
        until,
        window_seconds=int(window.total_seconds()),
        closed_at_or_before=now - window,
        rule_version=rule_version,
    )
    for day, role, outcome, failed, version, taken, closed, count in groups:
        cls = class_of(outcome, taken=taken, closed=closed)
        found[(day, role, outcome, failed, version, cls)] += count
    return found


# -- kept by the jobs process --------------------------------------------------------------------------------

# Only the default window's days are counted and kept: the one the board shows and a rule's promotion reads.
KEPT_WINDOW_SECONDS = int(DEFAULT_WINDOW.total_seconds())
# The most days with entries one step counts (one transaction): a year imported at once is a dozen steps.
DAYS_PER_STEP = 31


def keep_settled_days(*, now: datetime, at_most: int = DAYS_PER_STEP) -> bool:
    """Count the settled days (every window closed) not counted yet, at most `at_most` days from the first that has
    entries, keep their counts and move the mark past them (empty days cost nothing: the count jumps to the next
    entry). Returns
    whether more is left to count. Cheap when there is nothing to do: one read of the mark."""
    window = DEFAULT_WINDOW
    seconds = KEPT_WINDOW_SECONDS
    # Day d is settled when its last decision's window has closed: midnight after d, plus the window, is past.
    settled = (now - window).astimezone(UTC).date() - timedelta(days=1)

    def step() -> bool:
        done, version = rows.mark(seconds)
        if done is not None and done >= settled:
            return False
        following = rows.first_at(_midnight(done + timedelta(days=1)) if done is not None else None)
        counted: dict[date, dict[str, int]] = {}
        if following is None or following.astimezone(UTC).date() > settled:
            reached = settled
        else:
            first = following.astimezone(UTC).date()
            reached = min(settled, first + timedelta(days=at_most - 1))
            counted = _count_days(first, reached, window=window, now=now)
        weeks: dict[date, Counter] = {}
        for day, counts in counted.items():
            weeks.setdefault(_week(day), Counter()).update(counts)
        if not rows.keep_days(seconds, counted, weeks=weeks, through=reached, version=version):
            raise units.StaleRead("the scorecard's kept days were dropped while they were counted")
        return reached < settled

    return units.run(step, what="keeping the scorecard's settled days")


def keep_through(now: datetime) -> datetime | None:
    """Count every settled day not counted yet (as many steps as it takes), then say until when the default window's
    counts are kept (the midnight after the last counted day; None: none is): the archivist may move decisions
    evaluated before it, and the scorecard still answers the same."""
    while keep_settled_days(now=now):
        pass
    return kept_until()


def kept_until() -> datetime | None:
    """The midnight after the last day whose counts are kept for the default window, or None."""
    through = _counted_through(KEPT_WINDOW_SECONDS)
    return _midnight(through + timedelta(days=1)) if through is not None else None


def forget_days_from(moment: datetime) -> None:
    """Entries or signals were recorded at `moment`, a past time: the kept counts of the days they may change (a
    signal takes up decisions up to a window before it) are dropped, and counted again (`keep_settled_days`). Call
    inside the unit of work that records them."""
    day = (moment - DEFAULT_WINDOW).astimezone(UTC).date()
    # The days whose decisions were archived keep their counts for good, counted once as they were (what is
    # recorded on such a day now is not counted).
    archived = archive.last_day(archive.DECISIONS)
    if archived is not None:
        day = max(day, archived + timedelta(days=1))
    rows.drop_days_from(day, (KEPT_WINDOW_SECONDS,))


def _count_days(first: date, last: date, *, window: timedelta, now: datetime) -> dict[date, dict[str, int]]:
    """day -> key -> count, of the entries evaluated from `first` to `last` (inclusive); days without any are left
    out."""
    counted: dict[date, dict[str, int]] = {}
    tally = _tally(_midnight(first), _midnight(last + timedelta(days=1)), window=window, now=now)
    for (day, role, outcome, failed, version, cls), count in tally.items():
        counts = counted.setdefault(day, {})
        keys = _keys(role, outcome, failed, cls)
        if version is not None:
            keys.append(_version_key(version, cls))
        for key in keys:
            counts[key] = counts.get(key, 0) + count
    return counted


def rule_agreement(rule: Rule, *, since: datetime, now: datetime, window: timedelta = DEFAULT_WINDOW) -> dict[str, Any]:
    """One rule's agreement (`wilson`'s rate, low, high and settled) over its decisions evaluated in [since, now)
    under its present version (`rule.version`: its name, role and conditions), judged at `now` as the scorecard
    judges them: what a rule has earned before it may go live (`policy_versions.judge`)."""
    if rule.role not in ROLES:
        return wilson(0, 0)
    by_class: Counter = Counter()
    version = rule.version
    # Clamped to the first entry's midnight (or the first kept day's), as the scorecard is: its first day whole, so
    # read from the kept counts.
    seconds = int(window.total_seconds())
    first = _first_day(seconds)
    start = max(since, _midnight(first)) if first is not None else now
    through = _counted_through(seconds)
    first_day = _day_at_or_after(start)
    last_day = min(now.astimezone(UTC).date() - timedelta(days=1), through) if through is not None else None
    if last_day is not None and last_day >= first_day:
        # The whole days the jobs process counted: the version's kept counts.
        prefix = _version_key(version, "")
        for _, counts in _kept(KEPT_WINDOW_SECONDS, first_day, last_day, prefixes=(prefix,)):
            by_class.update({key.removeprefix(prefix): count for key, count in counts.items()})
        parts = ((start, _midnight(first_day)), (_midnight(last_day + timedelta(days=1)), now))
    else:
        parts = ((start, now),)
    for part_since, part_until in parts:
        for key, count in _tally(part_since, part_until, window=window, now=now, rule_version=version).items():
            by_class[key[-1]] += count
    counts = Counter({f"rule:{rule.role}:{cls}": count for cls, count in by_class.items()})
    return _rule_numbers(counts, rule.role)["agreement"]


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
    # Clamped to the first entry, as the scorecard is: a range before it costs nothing.
    first = rows.first_at()
    if first is None:
        return []
    start = max(since, first) if since is not None else first
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


def _week(day: date) -> date:
    """The Monday that starts `day`'s week."""
    return day - timedelta(days=day.weekday())
