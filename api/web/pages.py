"""The board's pages. Like the API's resources, each reads through the units of work and renders."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from importlib import resources
from urllib.parse import urlencode

import falcon

import contracts
from api import params
from api.operations import CURSOR, IDENTIFIER, Operation, Param
from api.web import bays, decisions, dispatch_views, freshness, policy_views, router_right, timeline
from api.web.render import page, person, signed_in
from api.web.render import page_operation as _html
from domain import automation, health
from domain.dispatch import panel as dispatch_panel
from domain.dispatch import workers as dispatch_workers
from domain.errors import InvalidQuery, NotFound
from domain.ops import agents_strip, runs
from domain.router import reconciliation
from domain.router.gates import AGREED_INITIATIVE_STAGES
from domain.router.policy_versions import Thresholds
from domain.router.routing import OUTCOMES, OWN, SOURCES
from machines.stages import FINAL_STAGES, LIVE_STAGES, STAGES, WAITING_ON, WRITING_TICKET_KEY
from storage.paging import InvalidCursor

RECENT_RUNS = 20
DECISIONS_PER_PAGE = 50
TIMELINE_PER_PAGE = 50
INITIATIVES_PER_PAGE = 50
INITIATIVES_TO_CHOOSE_FROM = 500
TICKET_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9]*-[A-Za-z0-9]+$")
# What `<input type="datetime-local">` sends: a time without a zone, which the decisions page reads as UTC.
LOCAL_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$")

# The parts of the board each page shows (`storage.freshness.PARTS`): its ETag moves when one of them does.
BOARD_PARTS = ("tickets", "runs", "settings", "wallet", "slots", "initiatives", "jobs", "workers")
NEEDS_YOU_PARTS = ("tickets", "settings")
INITIATIVES_PARTS = ("initiatives", "tickets")
# A decision links to its subject's ticket page once that ticket exists.
# The scorecard on it moves with a slot claimed too (a signal that the team took up a coder's work), and the
# policy panel with a new version of the policy, each live rule's jobs by state with a job's move.
DECISIONS_PARTS = ("decisions", "ticket_count", "slots", "reconciliation", "policy", "jobs")


HEALTH_REUSE = timedelta(seconds=5)


class BoardPage:
    operations = {
        "GET": _html(
            "The web board: Needs-you, the agents strip, a column per stage, the bays with the job running in each, "
            "the dispatch queue and the wallet"
        )
    }

    def __init__(self, board, clock, config, outage, policy):
        self.board = board
        self.clock = clock
        self.config = config
        self.outage = outage
        self.policy = policy  # the router's policy in force: the fleet size the queue speaks of
        self._health: tuple[datetime, health.Health] | None = None

    def _service_health(self, now: datetime) -> health.Health:
        """The service's checks, reused for `HEALTH_REUSE`: the board is polled, and an unchanged board answers 304
        after a single statement; the checks cost four more."""
        cached = self._health
        if cached is None or not timedelta(0) <= now - cached[0] < HEALTH_REUSE:
            cached = self._health = (now, health.health(self.config, now, self.outage))
        return cached[1]

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = self.clock()
        # The service's failing checks show on the agents strip (a jobs process down, a disk filling up).
        found = self._service_health(now)
        problems = found.degraded
        tag = freshness.etag(marks=self.board.marks(BOARD_PARTS), now=now, person=person(req), extra=problems)
        if freshness.unchanged(req, resp, tag):
            return
        strip = agents_strip.strip(now)
        history = runs.recent([status.schedule.agent_id for status in strip], RECENT_RUNS)
        toggle = automation.state()
        columns = self.board.columns()
        wallet, percent_used = self.board.wallet_and_percent_used()
        choices, _ = self.board.initiatives(limit=INITIATIVES_TO_CHOOSE_FROM, cursor=None)
        running = dispatch_panel.running_by_bay()
        workers = dispatch_workers.everyone()
        queued, queued_total = dispatch_panel.queue(self.policy)
        page(
            resp,
            "board.html",
            now=now,
            etag=tag,
            needs_you=self.board.needs_you_list(limit=100),
            agents=strip,
            history=history,
            health_problems=problems,
            health_status=found.status,
            automation_enabled=toggle.enabled,
            automation_changed=toggle,
            **signed_in(req),
            columns=columns,
            stages=STAGES,
            # Folded into one narrow column, so every stage is in view at a laptop's width.
            folded_stages=tuple(stage for stage in STAGES if stage in FINAL_STAGES),
            writing_key=WRITING_TICKET_KEY,
            waiting_choices=WAITING_ON,
            initiatives=choices,
            bays=[bays.describe(view, now, running.get(view.slot.name)) for view in self.board.slots()],
            workers=workers,
            queue=queued,
            queue_total=queued_total,
            # Tickets a free bay could be claimed for: the live ones on the board that hold none.
            claimable=[t.key for stage in LIVE_STAGES for t in columns[stage][0] if not t.assigned_slot],
            wallet=wallet,
            percent_used=percent_used,
        )


class NeedsYouFragment:
    """The Needs-you section alone, for tools that show it elsewhere (the board itself refreshes as a whole)."""

    operations = {"GET": _html("The Needs-you section of the board, as an HTML fragment")}

    def __init__(self, board, clock):
        self.board = board
        self.clock = clock

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = self.clock()
        tag = freshness.etag(marks=self.board.marks(NEEDS_YOU_PARTS), now=now, person=person(req))
        if freshness.unchanged(req, resp, tag):
            return
        page(
            resp,
            "_needs_you.html",
            now=now,
            needs_you=self.board.needs_you_list(limit=100),
            **signed_in(req),
        )


def initiative_stages() -> list[tuple[str, str]]:
    """The stages an initiative may be given (the contract's own list), each with what it means for the
    router's agreement gate."""
    stages = contracts.load("common.json")["$defs"]["initiative_stage"]["enum"]
    return [
        (stage, f"{stage}: agreement gate {'passes' if stage in AGREED_INITIATIVE_STAGES else 'fails'}")
        for stage in stages
    ]


class InitiativesPage:
    """The initiatives, with how many tickets each has: create one, change its stage (the agreement gate)."""

    operations = {
        "GET": _html(
            "The initiatives with their tickets' counts; create one, change its stage",
            params=(CURSOR,),
            statuses=(200, 400),
        )
    }

    def __init__(self, board, clock):
        self.board = board
        self.clock = clock

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = self.clock()
        cursor = params.cursor(req)
        tag = freshness.etag(marks=self.board.marks(INITIATIVES_PARTS), now=now, person=person(req))
        if freshness.unchanged(req, resp, tag):
            return
        rows, after = self.board.initiatives(limit=INITIATIVES_PER_PAGE, cursor=cursor)
        counts = self.board.initiative_ticket_counts([row.id for row in rows])
        page(
            resp,
            "initiatives.html",
            now=now,
            etag=tag,
            initiatives=rows,
            counts=counts,
            stage_choices=initiative_stages(),
            agreed=AGREED_INITIATIVE_STAGES,
            final_ticket_stages=FINAL_STAGES,
            older_url="/initiatives?" + urlencode({"cursor": after}) if after else None,
            first_url="/initiatives" if cursor else None,
            **signed_in(req),
        )


class TicketPage:
    """A ticket, and its timeline: its own entries and the router's decisions about it, newest first."""

    operations = {
        "GET": _html(
            "A ticket and its timeline: its entries and the router's decisions about it, newest first (an unknown "
            "key: a page saying so)",
            params=(
                Param("key", IDENTIFIER, location="path", required=True),
                Param("cursor", {"type": "string"}, "Older entries and decisions."),
            ),
            statuses=(200, 404),
        )
    }

    def __init__(self, board, router, clock):
        self.board = board
        self.router = router
        self.clock = clock

    def on_get(self, req: falcon.Request, resp: falcon.Response, key: str) -> None:
        now = self.clock()
        # The automation setting too: it decides whether WRITING-DAILY reads as needing someone.
        marks = self.board.ticket_marks(key, ("settings",))
        tag = freshness.etag(marks=marks, now=now, person=person(req))
        # Every ticket has a timeline entry (its creation); a key with none names no ticket, which `*` never matches.
        if freshness.unchanged(req, resp, tag, exists=marks[0] is not None):
            return
        try:
            ticket, _ = self.board.ticket(key)
        except NotFound:
            # A person following an old link reads a page, not a problem document; the router may still
            # have judged events about that key (a tracker issue that never became a ticket).
            resp.delete_header("ETag")
            page(resp, "no_ticket.html", now=now, key=key, **signed_in(req))
            resp.status = falcon.HTTP_404
            return
        cursor = req.get_param("cursor") or None
        happened, after = timeline.history(self.board, self.router, key, limit=TIMELINE_PER_PAGE, cursor=cursor)
        page(
            resp,
            "ticket.html",
            now=now,
            etag=tag,
            waiting_choices=WAITING_ON,
            ticket=ticket,
            happened=happened,
            next_cursor=after,
            first_page=cursor is None,
            writing_key=WRITING_TICKET_KEY,
            **signed_in(req),
        )


def _since(req: falcon.Request) -> datetime | None:
    """The `since` filter: an ISO 8601 time with a zone, as the API takes it, or the zoneless time a browser's
    date-and-time field sends, read as UTC (the page says so)."""
    raw = params.text(req, "since", max_length=64)
    if raw is None or not raw.strip():
        return None
    value = raw.strip()
    return params.parse_timestamp("since", value + "Z" if LOCAL_TIME.match(value) else value)


def _subject(req: falcon.Request) -> str | None:
    """The subject filter as typed: trimmed; a ticket key in any case is the key (tickets are upper case)."""
    raw = params.text(req, "subject_id", max_length=128)
    value = raw.strip() if raw else None
    if value and TICKET_KEY.match(value):
        return value.upper()
    return value or None


class DecisionsPage:
    """The router's recorded decisions: a plain GET form filters them, keyset pages go back in time.

    It reads through `Router.decisions`, the unit `GET /api/v1/router/decisions` uses.
    """

    operations = {
        "GET": _html(
            "The router's decisions, newest first, filtered by outcome, source and subject (the service's own "
            "events only with include=own)",
            params=(
                Param("outcome", {"type": "string", "enum": ["", *OUTCOMES]}, "Empty for any outcome."),
                Param("source", {"type": "string", "enum": ["", *SOURCES]}, "Empty for any source."),
                Param(
                    "subject_id",
                    {**IDENTIFIER, "maxLength": 128},
                    "A ticket key (any case) or another subject id; empty for any.",
                ),
                Param(
                    "since",
                    {"type": "string", "maxLength": 64},
                    "Only decisions evaluated at or after this time: ISO 8601 with a zone, or without one (UTC).",
                ),
                Param(
                    "include",
                    {"type": "string", "enum": ["", OWN]},
                    "own: the service's own events' decisions too (left out otherwise, as by the API).",
                ),
                Param(
                    "window_seconds",
                    {"type": "string"},
                    "The scorecard's window: how long after a decision the team's taking it up counts (default a day).",
                ),
                CURSOR,
            ),
            statuses=(200, 400),
        )
    }

    def __init__(self, board, router, clock, thresholds: Thresholds):
        self.board = board
        self.router = router
        self.clock = clock
        self.thresholds = thresholds

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = self.clock()
        try:
            filters = {
                "outcome": params.choice(req, "outcome", OUTCOMES),
                "source": params.choice(req, "source", SOURCES),
                "subject_id": _subject(req),
                "since": _since(req),
                "include": params.choice(req, "include", (OWN,)),
            }
        except InvalidQuery as exc:
            # A person who typed `?since=yesterday` reads a page that says what was wrong, not a problem document.
            self._render(req, resp, now, refused=exc)
            return
        cursor = params.cursor(req)
        window = router_right.window_of(req)
        tag = freshness.etag(marks=self.board.marks(DECISIONS_PARTS), now=now, person=person(req), extra=(window,))
        if freshness.unchanged(req, resp, tag):
            return
        try:
            rows, after = self.router.decisions(
                limit=DECISIONS_PER_PAGE,
                cursor=cursor,
                include_own=filters["include"] == OWN,
                **{name: value for name, value in filters.items() if name != "include"},
            )
        except InvalidCursor:
            # A link cut short or typed by hand: the page says so, like a bad filter.
            self._render(req, resp, now, refused=InvalidQuery("cursor", "not a link to older decisions this page made"))
            return
        self._render(req, resp, now, filters=filters, rows=rows, cursor=cursor, after=after, tag=tag)

    def _render(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        now: datetime,
        *,
        filters: dict | None = None,
        rows: list | None = None,
        cursor: str | None = None,
        after: str | None = None,
        tag: str | None = None,
        refused: InvalidQuery | None = None,
    ) -> None:
        """The page: the decisions `rows` found with `filters`, or, when a filter or the link was `refused`, the
        form left empty and what was wrong (400)."""
        filters = filters or dict.fromkeys(("outcome", "source", "subject_id", "since", "include"))
        rows = rows or []
        on_board = self.board.on_board({row.subject_id for row in rows if row.subject_id})
        given = {name: _query_value(value) for name, value in filters.items() if value}
        page(
            resp,
            "decisions.html",
            now=now,
            # A refused page carries no tag: the script keeps no such page current.
            **({"etag": tag} if tag else {}),
            refused=f"{refused}" if refused else None,
            filters=filters,
            since_value=filters["since"].strftime("%Y-%m-%dT%H:%M:%S") if filters["since"] else "",
            filtered=bool(given),
            decisions=[decisions.describe(row, on_board) for row in rows],
            outcome_choices=decisions.OUTCOME_CHOICES,
            source_choices=decisions.SOURCE_CHOICES,
            older_url="/decisions?" + urlencode({**given, "cursor": after}) if after else None,
            newest_url=("/decisions?" + urlencode(given) if given else "/decisions") if cursor else None,
            **router_right.scorecard_context(self.router, window_seconds=router_right.window_of(req)),
            **policy_views.panel(thresholds=self.thresholds, now=now),
            reconciled=reconciliation.this_week(now),
            **signed_in(req),
        )
        if refused:
            resp.status = falcon.HTTP_400


def _query_value(value: str | datetime) -> str:
    # A time in UTC, as given: to the microsecond (a filter cut to the second would widen on the older pages).
    return value.isoformat().replace("+00:00", "Z") if isinstance(value, datetime) else value


class Static:
    """The board's CSS, JavaScript and icon, from the installed package; only the files listed here are served."""

    FILES = {
        "board.css": "text/css; charset=utf-8",
        "board.js": "text/javascript; charset=utf-8",
        "idiomorph.min.js": "text/javascript; charset=utf-8",
        "favicon.svg": "image/svg+xml",
    }
    operations = {
        "GET": Operation(
            "The board's stylesheet, script and icon",
            responses={200: None, 404: "problem.json"},
            params=(Param("name", {"type": "string", "enum": sorted(FILES)}, location="path", required=True),),
            tags=("web board",),
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        if name not in self.FILES:
            raise falcon.HTTPNotFound()
        self.send(resp, name)

    @classmethod
    def send(cls, resp: falcon.Response, name: str) -> None:
        resp.content_type = cls.FILES[name]
        resp.set_header("Cache-Control", "private, max-age=300")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.data = resources.files("api.web").joinpath("static", name).read_bytes()


class Favicon:
    """`/favicon.ico`, where a browser looks for an icon whatever the page links: the board's own (an SVG, which
    browsers read by its type, not by the name's ending)."""

    operations = {
        "GET": Operation(
            "The board's icon (SVG), where browsers look for one", responses={200: None}, tags=("web board",)
        )
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        Static.send(resp, "favicon.svg")


def routes(services) -> list[tuple[str, object]]:
    board, clock = services.board, services.clock
    return [
        ("/", BoardPage(board, clock, services.config, services.outage, services.router.policy)),
        ("/fragments/needs-you", NeedsYouFragment(board, clock)),
        ("/initiatives", InitiativesPage(board, clock)),
        ("/tickets/{key}", TicketPage(board, services.router, clock)),
        ("/decisions", DecisionsPage(board, services.router, clock, Thresholds.from_config(services.config))),
        ("/jobs/{job_id}", dispatch_views.JobPage(board, services.router, services.dispatch, clock)),
        ("/static/{name}", Static()),
        ("/favicon.ico", Favicon()),
    ]
