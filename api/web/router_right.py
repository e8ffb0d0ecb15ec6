"""Is the router right? On the web board: the scorecard on the decisions page (with a weekly picture, and each live
rule's dispatch jobs by state), the
decisions behind each of its numbers, "Try a policy" (a backtest of other rules and knobs, which an operator may then
adopt), and one decision's own page with the facts its gates read and the policy they applied. Each reads through
the same units as `api/resources/router_evidence.py` and `api/resources/router_policy.py`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import falcon

import contracts
from api.operations import Param
from api.web import decisions, freshness, policy_views
from api.web.render import page, person, signed_in
from api.web.render import page_operation as _html
from domain.dispatch import panel as dispatch_panel
from domain.router import policy_versions
from domain.router.gates import GATE_NAMES
from domain.router.scorecard import GATE_CLASSES, ROLES, RULE_CLASSES, WINDOW_SECONDS
from machines.job import STATES as JOB_STATES

FLIPS_SHOWN = 200
BEHIND_SHOWN = 200
DAY = 86400
WINDOW_CHOICES = ((3600, "an hour"), (4 * 3600, "4 hours"), (DAY, "a day"), (3 * DAY, "3 days"), (7 * DAY, "a week"))
NUMBER = re.compile(
    r"^(rule:(coder|fixer):(confirmed|not_taken_up|held|overridden|pending)|gate:[a-z_]+:(held|overridden|pending))$"
)
CLASS_WORDS = {
    "confirmed": "confirmed",
    "not_taken_up": "not taken up",
    "held": "held",
    "overridden": "overridden",
    "pending": "pending",
}
# What moves these pages: a decision recorded, a slot claimed (a signal), the board's tickets.
PARTS = ("decisions", "slots", "ticket_count")


def window_of(req: falcon.Request) -> int:
    raw = req.get_param("window_seconds")
    if raw in (None, ""):
        return DAY
    low, high = WINDOW_SECONDS
    if not raw.isdigit() or not low <= int(raw) <= high:
        return DAY  # a page answers a page: an odd window reads as the default one, which the page names
    return int(raw)


# -- the scorecard, as the decisions page shows it ----------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """One week of the chart: the agreement rate as a bar, its interval as a whisker (SVG units)."""

    week: str
    x: float
    height: float
    low_y: float
    high_y: float
    label: str


CHART_HEIGHT = 100
CHART_BAR = 28
CHART_GAP = 8


def chart(weeks: list[dict[str, Any]]) -> list[Bar]:
    bars = []
    for index, week in enumerate(weeks[-12:]):
        agreement = week["agreement"]
        if agreement["rate"] is None:
            continue
        rate, low, high = agreement["rate"], agreement["low"], agreement["high"]
        bars.append(
            Bar(
                week=week["week"],
                x=index * (CHART_BAR + CHART_GAP),
                height=round(rate * CHART_HEIGHT, 1),
                low_y=round(CHART_HEIGHT - low * CHART_HEIGHT, 1),
                high_y=round(CHART_HEIGHT - high * CHART_HEIGHT, 1),
                label=f"week of {week['week']}: {round(rate * 100)} % agreement of {agreement['settled']} settled "
                f"(95 % interval {round(low * 100)} to {round(high * 100)} %)",
            )
        )
    return bars


def scorecard_context(router, *, window_seconds: int = DAY) -> dict[str, Any]:
    """What `_router_right.html` needs: the scorecard per rule and per gate, links, and the weekly chart."""
    card = router.scorecard(window_seconds=window_seconds).as_dict()

    def link(number: str) -> str:
        return "/decisions/behind?" + urlencode({"number": number, "window_seconds": window_seconds})

    policy = router.policy()
    live = [rule.name for rule in policy.live_rules()]

    return {
        "card": card,
        "rule_classes": RULE_CLASSES,
        "gate_classes": GATE_CLASSES,
        "class_words": CLASS_WORDS,
        "roles": ROLES,
        "gate_names": GATE_NAMES,
        "number_link": link,
        "bars": chart(card["weeks"]),
        "chart_width": max(1, min(len(card["weeks"]), 12)) * (CHART_BAR + CHART_GAP),
        "chart_height": CHART_HEIGHT,
        "chart_bar": CHART_BAR,
        "window_seconds": window_seconds,
        "window_choices": WINDOW_CHOICES,
        "policy": policy,
        # Each live rule's jobs by state (queued, running, succeeded, failed, cancelled), in the policy's order.
        "live_jobs": dispatch_panel.jobs_by_state(live),
        "job_states": JOB_STATES,
    }


# -- pages --------------------------------------------------------------------------------------------------------


class DecisionPage:
    """One decision: its gates, the facts they read from the board, the policy they applied."""

    operations = {
        "GET": _html(
            "One router decision, with the facts its gates read and the policy they applied",
            params=(
                Param("decision_id", {"type": "string"}, "The decision's id (any other text: 404).", "path", True),
            ),
            statuses=(200, 404),
        )
    }

    def __init__(self, board, router, clock):
        self.board, self.router, self.clock = board, router, clock

    def on_get(self, req: falcon.Request, resp: falcon.Response, decision_id: str) -> None:
        now = self.clock()
        row = self.router.decision(int(decision_id)) if decision_id.isdigit() and len(decision_id) < 19 else None
        tag = freshness.etag(marks=self.board.marks(PARTS), now=now, person=person(req), extra=(decision_id,))
        if freshness.unchanged(req, resp, tag, exists=row is not None):
            return
        if row is None:
            resp.status = falcon.HTTP_404
        on_board = self.board.on_board({row.subject_id} if row is not None and row.subject_id else set())
        page(
            resp,
            "decision.html",
            now=now,
            decision_id=decision_id,
            d=decisions.describe(row, on_board) if row is not None else None,
            **signed_in(req),
        )


class TryPolicyPage:
    """Try a policy: the backtest of the recorded decisions under the knobs and rules in the form; then, for an
    operator, adopt it (a PUT of `router/policy` from the version the page showed, so a stale adopt is refused)."""

    operations = {
        "GET": _html(
            "Try a policy: which recorded decisions would flip under other rules, another allowlist, retry budget "
            "or fleet size, and because of which gate or rule (a backtest; it changes nothing). An operator may "
            "then adopt it",
            # Any text: a value the form would not send is said beside its field (400), not refused as a query.
            params=(
                Param("allowlist", {"type": "string"}, "Actor ids, one per line or comma-separated."),
                Param(
                    "retry_budget",
                    {"type": "string"},
                    "Fixer jobs per ticket since its last green pipeline, 0 to 1000.",
                ),
                Param("fleet_size", {"type": "string"}, "Tickets that may hold a slot in execute or ci, 1 to 1000."),
                Param(
                    "rules",
                    {"type": "string"},
                    "The rules, in order: a JSON array of rules (contracts/router-policy.json); empty: those in force.",
                ),
            ),
            statuses=(200, 400),
        )
    }

    def __init__(self, board, router, clock):
        self.board, self.router, self.clock = board, router, clock

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = self.clock()
        in_force = policy_versions.current()
        today = in_force.policy if in_force is not None else self.router.policy()
        members, errors, given = self._candidate(req)
        report = candidate = None
        if not errors:
            report = self.router.backtest(members, list_at_most=FLIPS_SHOWN)
            candidate = report.policy
            report = {**report.as_dict(), "flips": [_flip_view(f) for f in report.flips]}
        else:
            resp.status = falcon.HTTP_400
        page(
            resp,
            "try_policy.html",
            now=now,
            report=report,
            errors=errors,
            form={
                "allowlist": given.get("allowlist", "\n".join(sorted(today.allowlist))),
                "retry_budget": given.get("retry_budget", str(today.retry_budget)),
                "fleet_size": given.get("fleet_size", str(today.fleet_size)),
                "rules": given["rules"] if given.get("rules", "").strip() else rules_text(today),
            },
            today=today.as_dict(),
            in_force=in_force,
            # What an operator may adopt: the candidate tried, whole, when it is not the policy in force already.
            candidate=candidate,
            candidate_json=json.dumps(candidate.document(), ensure_ascii=False) if candidate is not None else None,
            candidate_rules=policy_views.rules_of(candidate) if candidate is not None else [],
            adoptable=candidate is not None and in_force is not None and candidate.version != in_force.version,
            gate_names=GATE_NAMES,
            flips_shown=FLIPS_SHOWN,
            **signed_in(req),
        )

    @staticmethod
    def _candidate(req: falcon.Request) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, str]]:
        """The members the form changes, what is wrong with each field (in words), and the fields as given."""
        members: dict[str, Any] = {}
        errors: dict[str, list[str]] = {}
        given = {name: req.get_param(name) for name in ("allowlist", "retry_budget", "fleet_size", "rules")}
        given = {name: value for name, value in given.items() if value is not None}
        if "allowlist" in given:
            members["allowlist"] = [a.strip() for a in re.split(r"[,\s]+", given["allowlist"]) if a.strip()]
        for name, low, words in (("retry_budget", 0, "0 or more"), ("fleet_size", 1, "1 or more")):
            raw = given.get(name, "").strip()
            if not raw:
                continue
            if not raw.isdigit() or not low <= int(raw) <= 1000:
                errors[name] = [f"a whole number, {words} (up to 1000)"]
            else:
                members[name] = int(raw)
        text = given.get("rules", "").strip()
        if text:
            try:
                members["rules"] = json.loads(text)
            except ValueError as exc:
                errors["rules"] = [f"not JSON: {exc}"]
        if not errors:
            # The schema's own verdict (the one checking path), each violation beside its field, in words.
            for violation in contracts.violations("router-policy.json", members):
                field, words = policy_views.violation_words(violation, members.get("rules"))
                errors.setdefault(field if field in given else "rules", []).append(words)
        return members, errors, given


def rules_text(policy) -> str:
    """A policy's rules as the form's JSON editor shows them: one rule to a line, in order."""
    lines = [json.dumps(rule, ensure_ascii=False) for rule in policy.document()["rules"]]
    return "[\n" + ",\n".join(f"  {line}" for line in lines) + "\n]" if lines else "[]"


def _flip_view(flip) -> dict[str, Any]:
    return {
        **flip.as_dict(),
        "recorded_words": decisions.OUTCOME_WORDS[flip.recorded] + _role_words(flip.recorded_role, flip),
        "candidate_words": decisions.OUTCOME_WORDS[flip.candidate] + _role_words(flip.candidate_role, flip),
        "rule_changed": flip.rule_changed,
        "recorded_rule": flip.recorded_rule,
        "candidate_rule": flip.candidate_rule,
    }


def _role_words(role: str | None, flip) -> str:
    """The role, said only when the flip changed it (the outcome alone says the rest)."""
    if flip.recorded_role == flip.candidate_role:
        return ""
    return f" ({role})" if role else " (no role)"


class BehindPage:
    """The decisions behind one number of the scorecard."""

    operations = {
        "GET": _html(
            "The decisions behind one number of the router's scorecard (e.g. rule:coder:confirmed)",
            params=(
                Param("number", {"type": "string"}, "rule:ROLE:CLASS or gate:GATE:CLASS (anything else: 400)."),
                Param("window_seconds", {"type": "string"}, "The scorecard's window, 60 to 2592000 (else a day)."),
            ),
            statuses=(200, 400),
        )
    }

    def __init__(self, board, router, clock):
        self.board, self.router, self.clock = board, router, clock

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = self.clock()
        number = req.get_param("number") or ""
        if not number:
            page(resp, "behind.html", now=now, error=None, what=None, **signed_in(req))
            return
        if not NUMBER.match(number) or (number.startswith("gate:") and number.split(":")[1] not in GATE_NAMES):
            resp.status = falcon.HTTP_400
            page(
                resp,
                "behind.html",
                now=now,
                error=f"There is no number {number!r} on the scorecard: the links on the decisions page name them.",
                **signed_in(req),
            )
            return
        window = window_of(req)
        tag = freshness.etag(marks=self.board.marks(PARTS), now=now, person=person(req), extra=(number, window))
        if freshness.unchanged(req, resp, tag):
            return
        ids = self.router.decisions_behind(number, since=None, until=None, window_seconds=window)
        rows = self.router.decisions_with_ids(ids[:BEHIND_SHOWN])
        on_board = self.board.on_board({row.subject_id for row in rows if row.subject_id})
        kind, name, cls = number.split(":")
        page(
            resp,
            "behind.html",
            now=now,
            error=None,
            what=f"{'rule' if kind == 'rule' else 'gate'} {name}: {CLASS_WORDS[cls]}",
            total=len(ids),
            shown=BEHIND_SHOWN,
            window_seconds=window,
            decisions=[decisions.describe(row, on_board) for row in rows],
            **signed_in(req),
        )


def routes(services) -> list[tuple[str, object]]:
    board, router, clock = services.board, services.router, services.clock
    return [
        ("/decisions/{decision_id}", DecisionPage(board, router, clock)),
        ("/decisions/try", TryPolicyPage(board, router, clock)),
        ("/decisions/behind", BehindPage(board, router, clock)),
    ]
