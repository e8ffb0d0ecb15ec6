"""`svc demo`: a fortnight of a small team's board, made by the service's own units of work.

The demo plays the people (Ada, who is on the router's allowlist, and Grace, who is not), the content
repository's CI, the forge, CI and the tracker, on a clock that walks through the last two weeks. Everything
they cause is done by the real code, exactly as in production:

- tickets are created, moved, marked done and cancelled through `domain.board.Board`; slots are claimed there too;
- the writing agent's reports go through `WritingAgent.notify` at 09:00 and 18:00 (and the manual
  finalize-batch in between), the automation toggle through `WritingAgent.set_automation`;
- the pulse, the digest and idle reclaim are started by a real `JobsProcess` when their UTC cron comes round,
  the poller every five minutes over the last hours; the same process beats its heartbeat and drains the outbox
  (the board's own events to the router, slot releases through the slot steward, chat posts, tracker closes);
- webhook payloads from `examples/payloads/` (GitHub, Linear), stamped with the story's time as their senders
  would stamp them, go through the real normalizers and the shadow router; invalid envelopes from
  `examples/envelopes/invalid/` are recorded as rejected (`examples/` is shipped inside the package as
  `svc/examples/`, so an installed `svc demo` reads the very same files).

Only what would leave the machine is stood in for: chat posts are recorded, not sent (as with no
`DISCORD_WEBHOOK_URL`); the tracker close is answered by `SimulatedLinear` (one closed, one issue Linear does
not know); bay wipes are recorded only, except one wipe that runs a real command which fails (`umount ... busy`),
so the slot steward's retry shows. The router judges under the demo's own policy (`policy_in_force`: the first
policy's rules, with the allowlist the story is written for, `DEMO_ALLOWLIST`), adopted as a new version of the
database's policy before the story starts, so every outcome occurs (`would_dispatch`, `blocked`, `no_action`,
`rejected`, and `own` for the service's own events; not `stuck`: no rule is live) and the service started
afterwards judges the same way: under it nothing flips.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import resources
from typing import Any, TextIO

from contracts import check as check_contract
from domain.board import TRACKER_CLOSE_KIND
from domain.config import Config
from domain.ops.archivist import ARCHIVIST_AGENT
from domain.ops.reconciler import AGENT_ID as RECONCILER_AGENT_ID
from domain.ops.schedules import AGENTS
from domain.policy.document import Policy
from domain.router.backtest import Report, backtest
from domain.router.deliveries import Delivery
from domain.router.policy_versions import Thresholds
from domain.router.policy_versions import adopt as adopt_policy
from domain.router.poller import AGENT_ID as POLLER_AGENT_ID
from domain.router.poller import Poller
from domain.services import build_services
from integrations import bays
from integrations.bays import WipeResult
from jobs import assembly
from jobs.delivery import Attempt, OutboxDeliverer, Outcome
from jobs.process import JobsProcess
from storage import decisions, reset
from storage.db import connection

# Copies of the files of `examples/` the story uses, shipped in the package so an installed `svc demo` has them
# (a test holds them byte for byte to the originals).
EXAMPLES = resources.files("svc") / "examples"
DEMO_SITE = "https://blog.example.com"
# The allowlist the story is written for: Ada (a person on the board), Ada in Linear, the coding agent on GitHub,
# GitHub's and GitLab's CI, and the poller. Grace and the service's own CI user are left off, so that every outcome
# occurs. docs/board.md starts both the demo and the service with it (SVC_ROUTER_ALLOWLIST).
ADA_LINEAR = "linear:6d3a8c8e-3b1f-4b9e-a2c4-9f7d1e2b3c4d"
DEMO_ALLOWLIST = frozenset(
    {"svc:ada", ADA_LINEAR, "github:svc-coder[bot]", "github:github-actions", "gitlab:gitlab-ci", "svc:poller"}
)
PORT_12_ISSUE = "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"  # the Linear issue of the example payloads
GRACE = "svc:grace"  # who moves tickets on the board and is on no allowlist
DAYS = 14
# The poller runs every five minutes over these last hours, then stops: the agents strip shows it late.
POLLER_FROM = timedelta(hours=3)
POLLER_STOPPED = timedelta(minutes=45)
# The reconciler runs every ten minutes over the last half hour, up to the end: on time.
RECONCILER_FROM = timedelta(minutes=30)
# When the real jobs process would try a failed outbox message again (the outbox's first backoff steps).
RETRY_OFFSETS = (timedelta(seconds=6), timedelta(seconds=21), timedelta(seconds=81))


def sent_at(document: dict[str, Any], at: datetime, *, attempt: int) -> None:
    """Stamp an example as its sender would send it at `at`: Linear signs the time of sending
    (`webhookTimestamp`, checked against the replay window) beside the time of the action (`createdAt`); GitHub's
    body carries the time of the change. Both are the story's, so the router's `fresh` gate sees news, not the
    examples' own date. The story sends the same red pipeline three times: each is a re-run of the workflow
    (`run_attempt`), as GitHub sends it, and so a new event, not a redelivery of the first."""
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if "webhookTimestamp" in document:
        document["webhookTimestamp"] = int(at.timestamp() * 1000)
        if "createdAt" in document:
            document["createdAt"] = at.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    if isinstance(document.get("pull_request"), dict):
        document["pull_request"]["updated_at"] = stamp
    if isinstance(document.get("workflow_run"), dict):
        document["workflow_run"].update(updated_at=stamp, run_attempt=attempt)


class AlreadyFilled(Exception):
    """The database already holds tickets; the demo writes into it only when forced."""


class StoryClock:
    """The demo's clock: it moves only forward, when the story says."""

    def __init__(self, start: datetime):
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def move_to(self, when: datetime) -> None:
        self.now = max(self.now, when)


@dataclass(order=True)
class Step:
    at: datetime
    order: int
    action: Callable[[], Any] = field(compare=False)


@dataclass(frozen=True)
class Suggestion:
    """A backtest the demo suggests, with what it found: run as printed, `svc backtest` finds the same."""

    command: str
    report: Report

    def words(self) -> str:
        report = self.report
        if not report.flipped:
            return f"`{self.command}` flips none of the {report.evaluated} decisions"
        gates = [(gate, n) for gate, n in report.flips_by_gate.items() if n]
        because = (
            f"all on the {gates[0][0]} gate"
            if len(gates) == 1 and gates[0][1] == report.flipped
            else "by gate: " + ", ".join(f"{gate} {n}" for gate, n in gates)
        )
        return f"`{self.command}` flips {report.flipped} of the {report.evaluated} decisions, {because}"


@dataclass(frozen=True)
class Filled:
    """What the demo left in the database, the policy it judged with, and the backtest it suggests."""

    rows: dict[str, int]
    outcomes: dict[str, int]
    end: datetime
    policy: Policy
    suggestion: Suggestion


class SimulatedLinear:
    """Answers the outbox's `tracker_close` as Linear would, without the network: the issue of PORT-10 is
    closed; PORT-9's issue is one Linear does not know, so the close is given up (and says so on its timeline)."""

    def __init__(self, unknown: set[str]):
        self.unknown = unknown

    def __call__(self, attempt: Attempt) -> Outcome:
        issue = attempt.payload["issue_id"]
        if issue in self.unknown:
            return Outcome.give_up(f"Linear has no issue {issue!r}")
        key = attempt.payload["ticket"]
        return Outcome.sent(f"Linear issue {key} set to Done", issue=key, state="Done", already=False)


class DemoBays:
    """Bay wipes: recorded only (no SVC_BAY_WIPE_COMMAND), except the first wipe of each bay in `fail_once`,
    which runs a real command that fails the way a busy bay does."""

    def __init__(self, fail_once: set[str]):
        self.fail_once = set(fail_once)

    def __call__(self, slot: str) -> WipeResult:
        if slot in self.fail_once:
            self.fail_once.discard(slot)
            busy = f"import sys; sys.exit('umount: /srv/bays/{slot}: target is busy.')"
            return bays.wipe(slot, command=(sys.executable, "-c", busy), timeout=30)
        return bays.wipe(slot, command=None, timeout=30)


def policy_in_force(config: Config) -> Policy:
    """The router's policy the demo judges with and leaves in force: the one place that says which.

    The first policy's rules with the allowlist the story is written for (`DEMO_ALLOWLIST`) and a retry budget of
    two; the story adopts it as a new version of the database's policy before its first event, so `svc run`,
    `svc backtest` and "Try a policy" afterwards apply the very policy its decisions record (`svc policy history`
    shows the demo set it)."""
    return Policy.from_config(dataclasses.replace(config, router_allowlist=DEMO_ALLOWLIST, retry_budget_per_day=2))


def demo_config(config: Config, policy: Policy) -> Config:
    """The configuration the demo runs under: nothing leaves the machine; the router applies `policy`."""
    return dataclasses.replace(
        config,
        discord_webhook_url=None,
        staging_url=None,
        tracker_api_key="demo: answered by SimulatedLinear, never sent",
        bay_wipe_command=None,
        router_allowlist=policy.allowlist,
        retry_budget_per_day=policy.retry_budget,
        poller_window_minutes=30,
        ops_scheduler="jobs",
        site_url=config.site_url or DEMO_SITE,
    )


def fill(config: Config, *, end: datetime, force: bool = False) -> Filled:
    """Fill the bound database with the demo, ending at `end`. Raises `AlreadyFilled` when it holds tickets
    and `force` is not given; with `force`, everything in it is deleted first."""
    with connection():
        held = reset.row_counts()
        if (held["ticket"] or held["initiative"]) and not force:
            raise AlreadyFilled(
                f"the database already holds {held['ticket']} ticket(s) and {held['initiative']} initiative(s)"
            )
        if force:
            reset.empty()
        policy = policy_in_force(config)
        story = Story(demo_config(config, policy), end)
        story.play()
        # What letting Grace through would change: the question the authorization gate's scorecard row raises.
        widened = sorted(policy.allowlist | {GRACE})
        suggestion = Suggestion(
            f"svc backtest --allowlist {','.join(widened)}",
            backtest(policy.changed(allowlist=widened), list_at_most=0, max_age=config.dispatch_max_age_seconds),
        )
        return Filled(reset.row_counts(), decisions.count_by_outcome(), end, policy, suggestion)


class Story:
    """The fortnight as a list of steps (who does what, when), played in time order on the story's clock; after
    each step the jobs process beats, and drains the outbox as it would then and a few backoff steps later."""

    def __init__(self, config: Config, end: datetime):
        self.config = config
        self.end = end
        self.start = end - timedelta(days=DAYS)
        self.clock = StoryClock(self.start - timedelta(hours=1))
        clock = self.clock
        # The services as the API and `svc jobs` build them, on one board, with the demo's bays.
        services = build_services(config, clock, wiper=DemoBays({"bay-2"}))
        self.board, self.router, self.writing, self.ops = (
            services.board,
            services.router,
            services.writing,
            services.ops,
        )
        # What `svc jobs` runs, with the tracker close answered by SimulatedLinear and the poller run apart.
        handlers, recorders = assembly.outbox_handlers(config, clock, services=services)
        handlers[TRACKER_CLOSE_KIND] = SimulatedLinear({_issue("PORT-9")})
        deliverer = OutboxDeliverer(handlers, clock, recorders=recorders, owner="demo")
        scheduled = {**assembly.ops_jobs(config, self.ops), ARCHIVIST_AGENT: assembly.archivist(config, clock)}
        self.jobs = JobsProcess(clock, scheduled, deliverer=deliverer, owner="demo")
        self.poller = JobsProcess(clock, {POLLER_AGENT_ID: Poller(self.router, config, clock)}, owner="demo-poller")
        # The reconciler asks no sender anything here (nothing leaves the machine): its runs say so.
        quiet = dataclasses.replace(config, tracker_api_key=None, github_hooks=(), gitlab_hooks=())
        self.reconciler = JobsProcess(
            clock, {RECONCILER_AGENT_ID: assembly.reconciler(quiet, clock, services=services)}, owner="demo-reconciler"
        )
        self.steps: list[Step] = []
        self.sent: dict[str, int] = {}  # how often each example was sent so far

    # -- the walk ------------------------------------------------------------------------------------------

    def at(self, when: datetime, action: Callable[[], Any]) -> None:
        if when > self.end:
            return  # the story never runs ahead of the present
        self.steps.append(Step(when, len(self.steps), action))

    def hours_ago(self, hours: float, action: Callable[[], Any]) -> None:
        self.at(self.end - timedelta(hours=hours), action)

    def play(self) -> None:
        self.setup()
        self.scheduled()
        self.writing_routine()
        self.tickets()
        self.webhooks()
        self.steps.sort()
        for index, step in enumerate(self.steps):
            self.clock.move_to(step.at)
            step.action()
            self.jobs.heartbeat()
            self.jobs.drain()
            following = self.steps[index + 1].at if index + 1 < len(self.steps) else self.end
            for offset in RETRY_OFFSETS:
                if step.at + offset < following:
                    self.clock.move_to(step.at + offset)
                    self.jobs.drain()
        self.clock.move_to(self.end)
        self.jobs.drain()

    def scheduled(self) -> None:
        """The jobs process at every due time of the pulse, the digest and idle reclaim; the poller lately."""
        for agent_id in self.jobs.jobs:
            cron = AGENTS[agent_id].cron
            when = cron.next_after(self.start)
            while when <= self.end:
                self.at(when, self.jobs.run_due)
                when = cron.next_after(when)
        when = self.end - POLLER_FROM
        while when <= self.end - POLLER_STOPPED:
            self.at(when, self.poller.run_due)
            when += timedelta(minutes=5)
        when = self.end - RECONCILER_FROM
        while when <= self.end:
            self.at(when, self.reconciler.run_due)
            when += timedelta(minutes=10)

    # -- the board -----------------------------------------------------------------------------------------

    def setup(self) -> None:
        def initiatives() -> None:
            for ident, name, stage in (
                ("portfolio", "Portfolio site", "active"),
                ("billing", "Billing revamp", "active"),
                ("docs", "Help centre", "active"),
                ("mobile", "Mobile reader app", "agree"),
            ):
                self.board.create_initiative(
                    check_contract("initiative-create.json", {"id": ident, "name": name, "stage": stage}), actor="ada"
                )
            self.board.put_wallet(
                check_contract("wallet-put.json", {"budget": 400.0, "spent": 236.5, "locked": False}), actor="ada"
            )

        def policy() -> None:
            # The demo's allowlist as the policy in force: what the router judges the story under, and what the
            # service goes on judging with once the demo is done (its history says so).
            adopt_policy(
                Policy.from_config(self.config).document(),
                reason="svc demo: the first policy's rules, with the demo's allowlist",
                force=None,
                actor="svc demo",
                if_match=None,
                clock=self.clock,
                thresholds=Thresholds.from_config(self.config),
            )

        self.at(self.start - timedelta(minutes=31), policy)
        self.at(self.start - timedelta(minutes=30), initiatives)

    def create(self, hours: float, key: str, initiative: str, title: str, *, tracker: str | None = None) -> None:
        body: dict[str, Any] = {"key": key, "initiative_id": initiative, "title": title}
        if tracker:
            body["tracker_issue_id"] = tracker
        check_contract("ticket-create.json", body)
        self.hours_ago(hours, lambda: self.board.create_ticket(body, actor="ada"))

    def move(self, hours: float, key: str, to: str, *, by: str = "ada", waiting_on: str | None = None, **extra):
        body: dict[str, Any] = {"to": to, **extra}
        if waiting_on:
            body["waiting_on"] = waiting_on
        check_contract("ticket-move.json", body)
        self.hours_ago(hours, lambda: self.board.move(key, body, actor=by))

    def path(self, key: str, *moves: tuple[float, str] | tuple[float, str, dict[str, Any]]) -> None:
        for move in moves:
            hours, to, *rest = move
            self.move(hours, key, to, **(rest[0] if rest else {}))

    def claim(self, hours: float, slot: str, key: str) -> None:
        body = check_contract("slot-claim.json", {"ticket": key})
        self.hours_ago(hours, lambda: self.board.claim_slot(slot, body, actor="worker"))

    def done(self, hours: float, key: str, *, by: str = "ada") -> None:
        self.hours_ago(hours, lambda: self.board.mark_done(key, {}, actor=by))

    def cancel(self, hours: float, key: str, reason: str) -> None:
        body = check_contract("ticket-action.json", {"reason": reason})
        self.hours_ago(hours, lambda: self.board.cancel(key, body, actor="ada"))

    def tickets(self) -> None:
        ci = {"by": "ci"}
        ci_wait = {"by": "ci", "waiting_on": "ci"}
        # Shipped: closed in Linear after mark_done; its bay wiped (recorded) and released.
        self.create(330, "PORT-10", "portfolio", "Contact page with a spam-safe form", tracker=_issue("PORT-10"))
        self.path("PORT-10", (320, "queued"), (300, "execute"))
        self.claim(299, "bay-1", "PORT-10")
        self.path("PORT-10", (280, "ci", ci_wait), (276, "human_test", ci), (260, "human_merge"), (250, "ship"))
        self.done(240, "PORT-10")
        # Shipped after a red pipeline; the first wipe of its bay fails and the retry releases it; Linear does
        # not know its issue, so the tracker close is given up.
        self.create(320, "PORT-9", "portfolio", "RSS feed for the writing section", tracker=_issue("PORT-9"))
        self.path("PORT-9", (310, "queued"), (230, "execute"))
        self.claim(229, "bay-2", "PORT-9")
        self.path(
            "PORT-9",
            (200, "ci", ci_wait),
            (190, "execute", {"by": "ci", "waiting_on": "agent_failed"}),
            (186, "ci", ci_wait),
            (170, "human_test", ci),
            (160, "human_merge", {"by": "grace"}),
            (150, "ship", {"by": "grace"}),
        )
        self.done(146, "PORT-9", by="grace")
        # Cancelled while it held a bay.
        self.create(300, "PORT-13", "portfolio", "Support for legacy browsers")
        self.path("PORT-13", (290, "queued"), (200, "execute", {"by": "grace"}))
        self.claim(199, "bay-3", "PORT-13")
        self.cancel(120, "PORT-13", "we dropped IE11 support")
        self.create(280, "BILL-1", "billing", "Invoice PDF shows the VAT number")
        self.path("BILL-1", (270, "queued"), (180, "execute"))
        self.claim(179, "bay-1", "BILL-1")
        self.path("BILL-1", (150, "ci", ci_wait), (148, "human_test", ci), (110, "human_merge"), (100, "ship"))
        self.done(96, "BILL-1")
        # In flight.
        self.create(250, "PORT-11", "portfolio", "Sitemap and robots.txt")
        self.path(
            "PORT-11",
            (240, "queued"),
            (130, "execute"),
            (100, "ci", ci_wait),
            (99, "human_test", ci),
            (70, "human_merge"),
            (30, "ship"),
        )
        self.create(260, "PORT-17", "portfolio", "Search across every article")
        self.path("PORT-17", (250, "queued"), (140, "execute"))
        self.claim(139, "bay-2", "PORT-17")
        self.path(
            "PORT-17",
            (120, "ci", ci_wait),
            (90, "execute", {"by": "ci", "waiting_on": "agent_failed"}),
            (72, "blocked", {"reason": "the index needs a design decision"}),
        )
        self.create(200, "BILL-2", "billing", "Retry failed payment webhooks")
        self.path(
            "BILL-2", (190, "queued"), (96, "execute"), (60, "ci", ci_wait), (50, "human_test", ci), (30, "human_merge")
        )
        self.create(180, "PORT-16", "portfolio", "Contact form spam filter")
        self.path("PORT-16", (170, "queued"), (60, "execute"), (30, "ci", ci_wait), (20, "human_test", ci))
        self.create(150, "PORT-18", "portfolio", "Newsletter sign-up")
        self.path("PORT-18", (100, "queued"), (52, "execute", {"waiting_on": "agent"}))
        self.create(120, "BILL-4", "billing", "Proration on plan change")
        self.path(
            "BILL-4",
            (100, "queued"),
            (30, "execute"),
            (12, "ci", ci_wait),
            (8, "execute", {"by": "ci", "waiting_on": "agent_failed"}),
        )
        # PORT-12 is the ticket of the example payloads: Linear, GitHub pull request and workflow runs.
        self.create(90, "PORT-12", "portfolio", "Login form keeps the email after an error", tracker=PORT_12_ISSUE)
        self.move(80, "PORT-12", "queued")
        self.move(59.9, "PORT-12", "execute")
        self.claim(59.5, "bay-3", "PORT-12")
        self.create(100, "PORT-15", "portfolio", "Lazy-load images below the fold")
        self.path("PORT-15", (90, "queued"), (5, "execute"), (2, "ci", ci_wait))
        self.create(90, "PORT-14", "portfolio", "Dark mode toggle")
        self.move(40, "PORT-14", "queued")
        self.create(50, "BILL-3", "billing", "Export invoices as CSV")
        self.move(6, "BILL-3", "queued", by="grace")
        self.create(60, "DOCS-3", "docs", "Help-centre articles for billing")
        self.move(10, "DOCS-3", "queued", waiting_on="topic_refill")
        self.create(200, "MOB-1", "mobile", "Offline reading")
        self.create(100, "MOB-2", "mobile", "Sync the reading position across devices")

    # -- the content repository --------------------------------------------------------------------------

    def notify(self, status: str, *, missing: int | None = None, items: list[dict[str, Any]] | None = None):
        body: dict[str, Any] = {"status": status}
        if missing is not None:
            body["missing"] = missing
        if items:
            body["items"] = items
        check_contract("writing-notify.json", body)
        return lambda: self.writing.notify(body, actor="ci", idempotency_key=None)

    def writing_routine(self) -> None:
        """The writing poll at 09:00 and 18:00: most mornings one article is missing, written and published by
        noon, and the evening poll is caught up. Some days go otherwise; the latest poll leaves work to do."""
        cron = AGENTS["writing-daily"].cron
        polls: list[datetime] = []
        when = cron.next_after(self.start)
        while when <= self.end:
            polls.append(when)
            when = cron.next_after(when)
        latest = polls.pop()
        mornings = [poll for poll in polls if poll.hour == 9]
        # Counted back from the latest morning: a holiday (automation off for a day), a failed QA, no topics
        # left, a failed push.
        special = dict(zip(mornings[-3:-12:-3], ("holiday", "FAIL_QA", "STOP_NEED_TOPICS"), strict=False))
        if len(mornings) >= 11:
            special[mornings[-11]] = "FAIL_PUSH"
        holiday = next((poll for poll, plan in special.items() if plan == "holiday"), None)
        titles = itertools.cycle(ARTICLES)
        for poll in polls:
            day = poll.date().isoformat()
            if holiday is not None and poll.date() == holiday.date():
                self.at(poll, self.notify("AUTOMATION_DISABLED"))  # the poll reads the setting and does nothing
                continue
            if poll.hour != 9:
                self.at(poll, self.notify("SKIP_ALL_CAUGHT_UP", missing=0))
                continue
            missing = [{"date": day}]
            if holiday is not None and poll.date() == holiday.date() + timedelta(days=1):
                missing.insert(0, {"date": holiday.date().isoformat()})  # the holiday's article is owed too
            published = []
            for item in missing:
                title, slug = next(titles)
                published.append({**item, "slug": slug, "title": title, "url": f"{DEMO_SITE}/writing/{slug}"})
            plan = special.get(poll)
            if plan == "STOP_NEED_TOPICS":
                self.at(poll, self.notify("STOP_NEED_TOPICS", missing=len(missing), items=missing))
                poll += timedelta(hours=3)  # a person refills the topics; the editor runs the catch-up again
            self.at(poll, self.notify("BACKFILL_READY", missing=len(missing), items=missing))
            if plan in ("FAIL_QA", "FAIL_PUSH"):
                self.at(poll + timedelta(hours=2), self.notify(plan, missing=len(missing), items=missing))
                poll += timedelta(hours=2)
            self.at(poll + timedelta(hours=2, minutes=15), self.notify("SUCCESS", missing=0, items=published))
        if holiday is not None:
            # Ada turns the scheduled catch-up off before the holiday's first poll and on again the next morning.
            self.at(holiday - timedelta(minutes=40), lambda: self.writing.set_automation(False, actor="ada"))
            self.at(holiday + timedelta(hours=22), lambda: self.writing.set_automation(True, actor="ada"))
        self.at(latest, self.notify("BACKFILL_READY", missing=1, items=[{"date": latest.date().isoformat()}]))

    # -- the forge, CI and the tracker -------------------------------------------------------------------

    def delivery(self, endpoint: str, example: str, headers: dict[str, str], *, at: datetime) -> Callable[[], Any]:
        """The example delivered at `at`, stamped as its sender would stamp it then (`sent_at`)."""
        document = json.loads(EXAMPLES.joinpath("payloads", *example.split("/")).read_bytes())
        self.sent[example] = self.sent.get(example, 0) + 1
        sent_at(document, at, attempt=self.sent[example])
        raw = json.dumps(document).encode()
        delivery = Delivery(
            endpoint=endpoint,
            sender="linear" if endpoint == "tracker" else "github",  # the senders of the examples the story sends
            headers=headers,
            raw=raw,
            document=document,
        )
        return lambda: self.router.receive_delivery(delivery)

    def github(self, hours: float, event: str, example: str) -> None:
        delivery_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"svc-demo:{example}:{hours}"))
        headers = {"x-github-event": event, "x-github-delivery": delivery_id}
        at = self.end - timedelta(hours=hours)
        self.hours_ago(hours, self.delivery("forge", f"github/{example}", headers, at=at))

    def linear(self, hours: float, example: str) -> None:
        delivery_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"svc-demo:{example}:{hours}"))
        at = self.end - timedelta(hours=hours)
        self.hours_ago(hours, self.delivery("tracker", f"linear/{example}", {"linear-delivery": delivery_id}, at=at))

    def rejected(self, hours: float, example: str) -> None:
        document = json.loads(EXAMPLES.joinpath("envelopes", "invalid", example).read_text())
        self.hours_ago(hours, lambda: self.router.receive(document))

    def webhooks(self) -> None:
        self.linear(79, "issue.update-state-no-actor.json")  # no actor named (as in older deliveries): fail closed
        self.linear(60, "issue.update-state-started.json")  # Ada starts it in Linear: a coder, in shadow
        self.github(58, "pull_request", "pull_request.opened.json")  # the coder's PR: wait for CI
        self.github(57, "workflow_run", "workflow_run.completed-failure.json")  # red: the fixer, once
        self.github(56, "pull_request", "pull_request.synchronize.json")
        self.github(55, "workflow_run", "workflow_run.completed-failure.json")  # red again: the fixer, twice
        self.github(54, "pull_request", "pull_request.synchronize.json")
        # Red a third time: the retry budget counts fixer jobs, and a rule in shadow mode queues none.
        self.github(53, "workflow_run", "workflow_run.completed-failure.json")
        self.rejected(30, "unknown-actor-kind.json")
        self.github(1.5, "workflow_run", "workflow_run.in_progress.json")
        self.github(0.6, "workflow_run", "workflow_run.completed-success.json")
        self.github(0.4, "pull_request", "pull_request.ready_for_review.json")
        self.rejected(0.25, "ci-kind-from-the-tracker.json")
        self.linear(0.1, "issue.update-state-in-review.json")


def _issue(key: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"svc-demo:linear:{key}"))


ARTICLES = [
    ("Why we write one article a day", "one-article-a-day"),
    ("Small pull requests, fast reviews", "small-pull-requests"),
    ("What a shadow-mode router is for", "shadow-mode-router"),
    ("Flaky tests are bugs", "flaky-tests-are-bugs"),
    ("The outbox pattern in one page", "outbox-pattern"),
    ("Keyset paging, not offsets", "keyset-paging"),
    ("Cron in UTC, always", "cron-in-utc"),
    ("A board people actually read", "a-board-people-read"),
    ("Compare-and-swap for stage changes", "compare-and-swap"),
    ("Idempotency keys, explained", "idempotency-keys"),
    ("When to page a human", "when-to-page-a-human"),
    ("Wiping build bays safely", "wiping-build-bays"),
    ("Retry budgets for agents", "retry-budgets"),
    ("Reading a run-history bar", "run-history-bar"),
    ("Writing for the Needs-you list", "needs-you-list"),
    ("Shipping on Fridays", "shipping-on-fridays"),
]


def run(config: Config, *, force: bool, end: datetime, out: TextIO, err: TextIO) -> int:
    """The `svc demo` command; the database is bound and migrated already."""
    try:
        filled = fill(config, end=end, force=force)
    except AlreadyFilled as exc:
        print(
            f"svc demo: {exc}; nothing was written. `svc demo --force` deletes everything in it and fills it "
            "with the demo.",
            file=err,
        )
        return 1
    rows = filled.rows
    outcomes = ", ".join(f"{n} {outcome}" for outcome, n in sorted(filled.outcomes.items()))
    print(
        f"svc demo: {rows['ticket']} tickets in {rows['initiative']} initiatives, {rows['timeline_entry']} timeline "
        f"entries, {rows['agent_run']} agent runs, {rows['router_decision']} router decisions ({outcomes}); "
        f"the story ends at {filled.end:%Y-%m-%d %H:%M} UTC.\n"
        f"svc demo: now `svc run` (the web board, the API and the jobs process, which finishes bay releases) with "
        f"the same environment, and open http://{config.host}:{config.port}/ (the credentials are in "
        f"{config.data_dir / 'credentials.env'} unless SVC_BASIC_AUTH is set).\n"
        f"svc demo: {_policy_words(filled.policy)}\n"
        f'svc demo: the decisions page says whether the router was right, and its "Try a policy" starts from the '
        f"policy in force, where nothing flips; what would letting Grace through change? {filled.suggestion.words()}.",
        file=out,
    )
    return 0


def _policy_words(policy: Policy) -> str:
    """Which policy the router judged with, and that it is the one in force now."""
    return (
        f"the router judged under the demo's policy {policy.version}, now the one in force (svc policy show), whose "
        f"allowlist is {','.join(sorted(policy.allowlist))} and retry budget {policy.retry_budget}."
    )
