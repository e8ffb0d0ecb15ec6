"""Is the router right? `POST router/backtest` (what a candidate policy would change in the recorded decisions),
`GET router/scorecard` (the decisions against what the team then did) and `GET router/reconciliation` (the events
the senders failed to deliver, and what became of each). All only read: a viewer may use them.
"""

from __future__ import annotations

from datetime import datetime

import falcon

from api import params, representations
from api.operations import CURSOR, LIMIT, Operation, Param
from domain.clock import parse_timestamp
from domain.errors import InvalidQuery
from domain.router import reconciliation
from domain.router.routing import Router
from domain.router.scorecard import WINDOW_SECONDS

# The most flips one answer lists (oldest first); `flipped` always counts them all. `svc backtest` lists all.
FLIPS_LISTED = 500


def _timestamp(value: str | None) -> datetime | None:
    # The body's schema lets through only UTC date-times (`...Z`), which always read.
    return None if value is None else parse_timestamp(value)


class Backtest:
    operations = {
        "POST": Operation(
            "Re-evaluate every recorded decision in the range under a candidate policy, against the board as it "
            "was when each was taken; say which flip and because of which gate. Writes nothing: a viewer may run "
            f"it. The list of flips holds the first {FLIPS_LISTED} (oldest first); `flipped` counts them all",
            request="router-backtest-request.json",
            responses={200: "router-backtest-report.json"},
            changes_nothing=True,
            tags=("router",),
        ),
    }

    def __init__(self, router: Router):
        self.router = router

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = req.context.body
        report = self.router.backtest(
            body.get("policy", {}),
            since=_timestamp(body.get("since")),
            until=_timestamp(body.get("until")),
            list_at_most=FLIPS_LISTED,
        )
        resp.media = report.as_dict()


class Scorecard:
    operations = {
        "GET": Operation(
            "Would the router have been right? Per rule and per gate, its recorded decisions against what the team "
            "then did within the window: confirmed, not taken up, held, overridden, pending, and the agreement",
            responses={200: "router-scorecard.json"},
            params=(
                Param("since", {"type": "string", "format": "date-time"}, "Decisions evaluated at or after."),
                Param(
                    "until",
                    {"type": "string", "format": "date-time"},
                    "Decisions evaluated before (default now; later reads up to now). Earlier than `since`: 400.",
                ),
                Param(
                    "window_seconds",
                    {"type": "integer", "minimum": WINDOW_SECONDS[0], "maximum": WINDOW_SECONDS[1], "default": 86400},
                    "How long after a decision the team's taking up the work counts (a minute to 30 days).",
                ),
            ),
            tags=("router",),
        ),
    }

    def __init__(self, router: Router):
        self.router = router

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        card = self.router.scorecard(
            since=params.timestamp(req, "since"),
            until=params.timestamp(req, "until"),
            window_seconds=window_seconds(req),
        )
        resp.media = card.as_dict()


class Reconciliation:
    operations = {
        "GET": Operation(
            "The reconciliation ledger, newest first: each delivery a sender (GitHub, GitLab) says it failed to make "
            "and the service never accepted, each tracker state change no webhook brought, each hook that could not "
            "be read; and what became of it: redelivered, recovered, given up, or refused by us",
            responses={200: "router-reconciliation.json", 400: "problem.json", 401: "problem.json"},
            params=(LIMIT, CURSOR),
            tags=("router",),
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        rows, after = reconciliation.ledger(limit=params.limit(req), cursor=params.cursor(req))
        resp.media = representations.page("gaps", [representations.gap(r) for r in rows], after)


def window_seconds(req: falcon.Request) -> int:
    raw = req.get_param("window_seconds")
    if raw is None or raw == "":
        return 86400
    low, high = WINDOW_SECONDS
    try:
        value = int(raw)
    except ValueError:
        raise InvalidQuery("window_seconds", f"expected a whole number of seconds from {low} to {high}") from None
    if not low <= value <= high:
        raise InvalidQuery("window_seconds", f"expected a whole number of seconds from {low} to {high}, got {value}")
    return value


def routes(services) -> list[tuple[str, object]]:
    return [
        ("/api/v1/router/backtest", Backtest(services.router)),
        ("/api/v1/router/scorecard", Scorecard(services.router)),
        ("/api/v1/router/reconciliation", Reconciliation()),
    ]
