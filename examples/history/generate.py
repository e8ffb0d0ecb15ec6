"""A made-up team's history as `svc.normalized-event/v0` envelopes, one per line, in the order they occurred: what
`svc import` takes (history.jsonl beside this file is its output with the defaults).

    python examples/history/generate.py [--days 14] [--per-day 3] [--start 2026-10-05T00:00:00Z] [--seed 7] \
        > history.jsonl

Each ticket's story: a person moves it to execute (the coder rule matches; now and then a stranger does, and the
authorization gate blocks it); most of the time a pull request is opened within the day, sometimes late or never;
CI runs, fails now and then (the fixer rule matches), a push follows most failures; the pull request is merged.
The same arguments give the same file; nothing here reads the clock. Run it with the Python that has `svc` installed
(it reads `--start` as the service reads a moment).
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta

REPO = "acme/portfolio"
INITIATIVE = "portfolio"
PM = "linear:6d3a8c8e-3b1f-4b9e-a2c4-9f7d1e2b3c4d"
DEVELOPER = "github:mona"
STRANGER = "github:bob"
CI = "github:github-actions"


def history(*, days: int, per_day: int, start: datetime, seed: int = 7, prefix: str = "PORT") -> Iterator[dict]:
    """`per_day` tickets started on each of `days` days from `start`, their events in the order they occurred."""
    draw = random.Random(seed)  # noqa: S311 (a made-up history, the same for the same seed)
    waiting: list[tuple[datetime, int, dict]] = []
    order = 0
    for day in range(days):
        midnight = start + timedelta(days=day)
        # Everything that occurred before this day is final: nothing later can come before it.
        while waiting and waiting[0][0] < midnight:
            yield heapq.heappop(waiting)[2]
        for n in range(per_day):
            number = day * per_day + n + 1
            for moment, document in _ticket(draw, f"{prefix}-{number}", number, midnight):
                order += 1
                heapq.heappush(waiting, (moment, order, document))
    while waiting:
        yield heapq.heappop(waiting)[2]


def _ticket(draw: random.Random, key: str, number: int, midnight: datetime) -> Iterator[tuple[datetime, dict]]:
    branch = f"{key.lower()}-work"
    moved = midnight + timedelta(hours=8, minutes=draw.randrange(0, 9 * 60))
    mover = STRANGER if draw.random() < 0.1 else PM
    yield moved, _envelope(f"{key}:moved", moved, "tracker", ("state_changed", "queued", "execute"), key, mover)
    late = draw.random()
    if late < 0.15:
        return  # never picked up
    opened = moved + (
        timedelta(hours=draw.uniform(26, 60)) if late < 0.25 else timedelta(minutes=draw.randrange(10, 600))
    )
    head = _sha(draw)
    forge = {"pr_number": number, "branch": branch, "head_sha": head}
    yield opened, _envelope(f"{key}:opened", opened, "forge", ("opened", None, "open"), key, DEVELOPER, forge)
    ran = opened + timedelta(minutes=2)
    for attempt in range(3):
        pipeline = {**forge, "pipeline_id": number * 10 + attempt + 1}
        yield ran, _pipeline(f"{key}:run{attempt}:started", ran, key, "pipeline_started", "running", pipeline)
        finished = ran + timedelta(minutes=draw.randrange(4, 20))
        if attempt == 2 or draw.random() < 0.7:
            yield (
                finished,
                _pipeline(f"{key}:run{attempt}:passed", finished, key, "pipeline_passed", "success", pipeline),
            )
            break
        yield finished, _pipeline(f"{key}:run{attempt}:failed", finished, key, "pipeline_failed", "failure", pipeline)
        if draw.random() < 0.3:
            return  # abandoned after a red run
        pushed = finished + timedelta(minutes=draw.randrange(15, 300))
        forge = {**forge, "head_sha": _sha(draw)}
        yield (
            pushed,
            _envelope(f"{key}:push{attempt}", pushed, "forge", ("synchronized", None, None), key, DEVELOPER, forge),
        )
        ran = pushed + timedelta(minutes=1)
    merged = finished + timedelta(minutes=draw.randrange(30, 240))
    yield merged, _envelope(f"{key}:merged", merged, "forge", ("merged", "open", "merged"), key, DEVELOPER, forge)


def _pipeline(ident: str, at: datetime, key: str, kind: str, status: str, forge: dict) -> dict:
    document = _envelope(ident, at, "ci", (kind, None if kind == "pipeline_started" else "running", status), key, CI)
    document["actor"]["kind"] = "system"
    document["forge"] = {**forge, "pipeline_status": status}
    if kind == "pipeline_failed":
        document["dispatch_hints"] = {"eligible_for_worker": True, "blocked_reason": None, "suggested_role": "fixer"}
    return document


def _envelope(
    ident: str,
    at: datetime,
    source: str,
    transition: tuple[str, str | None, str | None],
    key: str,
    actor: str,
    forge: dict | None = None,
) -> dict:
    kind, before, after = transition
    document = {
        "schema": "svc.normalized-event/v0",
        "id": f"history:{ident}",
        "occurred_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": source,
        "transition": {"kind": kind, "from": before, "to": after},
        "subject": {"type": "ticket", "id": key, "initiative_id": INITIATIVE}
        | ({"repo": REPO} if source != "tracker" else {}),
        "actor": {"kind": "human", "id": actor, "roles": ["pm"] if actor == PM else []},
        "dispatch_hints": {
            "eligible_for_worker": kind == "state_changed",
            "blocked_reason": "await_ci" if kind in ("opened", "synchronized", "pipeline_started") else None,
            "suggested_role": "coder" if kind == "state_changed" else None,
        },
    }
    if forge is not None:
        document["forge"] = dict(forge)
    return document


def _sha(draw: random.Random) -> str:
    return f"{draw.getrandbits(160):040x}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--per-day", type=int, default=3, help="tickets started each day")
    parser.add_argument("--start", default="2026-10-05T00:00:00Z", help="when the first day starts (ISO 8601)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--prefix", default="PORT", help="the ticket keys' prefix")
    args = parser.parse_args()
    from domain.clock import parse_timestamp

    start = parse_timestamp(args.start)
    out = sys.stdout
    for document in history(days=args.days, per_day=args.per_day, start=start, seed=args.seed, prefix=args.prefix):
        out.write(json.dumps(document, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
