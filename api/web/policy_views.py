"""The router's policy on the web board: the panel of the decisions page (the policy in force: its rules in order,
each with its `when` in words, its mode and its version; who set it, when and why), the page of its versions with
what each changed, and a policy's schema violations said in words (Try a policy shows them). It reads through
`domain/router/policy_versions.py`, the unit `GET router/policy` uses."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import falcon

from api import params
from api.operations import CURSOR
from api.web import freshness
from api.web.render import page, person, signed_in
from api.web.render import page_operation as _html
from contracts import Violation
from domain.policy.document import Policy
from domain.policy.rules import LIVE, when_words
from domain.router import policy_versions
from domain.router.policy_versions import PolicyVersion

VERSIONS_PER_PAGE = 20
# What moves the versions page: a new version.
PARTS = ("policy",)


@dataclass(frozen=True)
class RuleView:
    number: int
    name: str
    role: str | None
    mode: str
    version: str
    words: str


def rules_of(policy: Policy) -> list[RuleView]:
    return [
        RuleView(number, rule.name, rule.role, rule.mode, rule.version, when_words(rule.when))
        for number, rule in enumerate(policy.rules, 1)
    ]


@dataclass(frozen=True)
class Standing:
    """One rule of the policy in force against going live: its evidence (`policy_versions.Evidence`), whether it is
    live without evidence, and what its "Go live" control sends (the policy in force with this rule live; None when
    it is live already or has no role, so dispatches nothing either way)."""

    rule: RuleView
    evidence: policy_versions.Evidence
    live_without_evidence: bool
    went_live: PolicyVersion | None
    go_live_json: str | None


def standings(current: PolicyVersion, *, thresholds: policy_versions.Thresholds, now) -> list[Standing]:
    """Each rule of the policy in force with its evidence under its present version, counted now.

    "Live without evidence": the rule is live, the version that made it live (`policy_versions.went_live`, the
    oldest of the unbroken run of versions, up to the one in force, in which it is live under its present version)
    was forced, and its evidence, counted now, does not meet the thresholds. So it stops showing once the rule has
    earned what it was forced past, or is put back in shadow mode; a rule that went live on its evidence is never
    shown so, even when a quiet fortnight later its numbers have thinned (its evidence is shown beside it)."""
    found = []
    document = current.policy.document()
    for view, rule in zip(rules_of(current.policy), current.policy.rules, strict=True):
        evidence = policy_versions.evidence(rule, thresholds=thresholds, now=now)
        live = rule.mode == LIVE
        went_live = policy_versions.went_live(rule) if live else None
        go_live = None
        if not live and rule.role is not None:
            changed = copy.deepcopy(document)
            changed["rules"][view.number - 1]["mode"] = LIVE
            go_live = json.dumps(changed, ensure_ascii=False)
        found.append(
            Standing(
                view,
                evidence,
                live_without_evidence=live and went_live is not None and went_live.forced and not evidence.earned,
                went_live=went_live,
                go_live_json=go_live,
            )
        )
    return found


def panel(*, thresholds: policy_versions.Thresholds, now) -> dict[str, Any]:
    """What `_policy.html` needs: the version in force, its rules, and each rule's standing against going live."""
    current = policy_versions.current()
    return {
        "policy_in_force": current,
        "policy_rules": rules_of(current.policy) if current is not None else [],
        "policy_standings": standings(current, thresholds=thresholds, now=now) if current is not None else [],
        "promotion": thresholds,
    }


def changes(newer: PolicyVersion, older: PolicyVersion | None) -> list[str]:
    """What a version changed from the one before it, in words (the first: what it started with)."""
    policy = newer.policy
    if older is None:
        return [f"the first version: {len(policy.rules)} rule(s), allowlist of {len(policy.allowlist)}"]
    before = older.policy
    said = []
    added, removed = sorted(policy.allowlist - before.allowlist), sorted(before.allowlist - policy.allowlist)
    if added:
        said.append(f"allowlist: added {', '.join(added)}")
    if removed:
        said.append(f"allowlist: removed {', '.join(removed)}")
    for knob, words in (("retry_budget", "retry budget"), ("fleet_size", "fleet size")):
        if getattr(policy, knob) != getattr(before, knob):
            said.append(f"{words} {getattr(before, knob)} → {getattr(policy, knob)}")
    old = {rule.name: rule for rule in before.rules}
    new = {rule.name: rule for rule in policy.rules}
    for rule in policy.rules:
        was = old.get(rule.name)
        if was is None:
            said.append(f"rule {rule.name} added ({rule.role or 'no role'}, {rule.mode}): when {when_words(rule.when)}")
            continue
        if was.version != rule.version:
            said.append(f"rule {rule.name} changed: when {when_words(rule.when)}, role {rule.role or 'none'}")
        if was.mode != rule.mode:
            said.append(f"rule {rule.name}: {was.mode} → {rule.mode}")
    said.extend(f"rule {name} removed" for name in old if name not in new)
    kept_before = [rule.name for rule in before.rules if rule.name in new]
    kept_now = [rule.name for rule in policy.rules if rule.name in old]
    if kept_before != kept_now:
        said.append(f"rules reordered: {', '.join(kept_now)}")
    return said or ["nothing but the reason"]


def violation_words(violation: Violation, rules: Any) -> tuple[str, str]:
    """(the field of the Try-a-policy form it belongs to, the violation in words), e.g. ("rules", "rule 3
    (coder), when → transition.knd: is not a known field")."""
    steps = [step.replace("~1", "/").replace("~0", "~") for step in violation.path.split("/")[1:]]
    if not steps:
        return "rules", violation.message
    field = steps[0]
    if field != "rules" or len(steps) < 2 or not steps[1].isdigit():
        return field, f"{' → '.join(steps)}: {violation.message}"
    index = int(steps[1])
    name = rules[index].get("name") if isinstance(rules, list) and isinstance(rules[index], dict) else None
    where = f"rule {index + 1}" + (f" ({name})" if isinstance(name, str) and name else "")
    rest = steps[2:]
    return "rules", f"{where}{', ' + ' → '.join(rest) if rest else ''}: {violation.message}"


# -- the versions page -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionView:
    version: PolicyVersion
    in_force: bool
    rules: list[RuleView]
    changes: list[str]


class PolicyHistoryPage:
    """The router policy's versions, newest first: who set each, when and why, what it changed, its rules."""

    operations = {
        "GET": _html(
            "The versions of the router's policy, newest first: who set each, when and why, what it changed",
            params=(CURSOR,),
            statuses=(200, 400),
        )
    }

    def __init__(self, board, clock):
        self.board, self.clock = board, clock

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        now = self.clock()
        cursor = params.cursor(req)
        tag = freshness.etag(marks=self.board.marks(PARTS), now=now, person=person(req), extra=(cursor,))
        if freshness.unchanged(req, resp, tag):
            return
        shown, after = policy_versions.history(limit=VERSIONS_PER_PAGE, cursor=cursor)
        # The version before the oldest shown: what that one changed is said against it.
        older = policy_versions.history(limit=1, cursor=after)[0][0] if after else None
        views = [
            VersionView(
                version,
                in_force=cursor is None and index == 0,
                rules=rules_of(version.policy),
                changes=changes(version, shown[index + 1] if index + 1 < len(shown) else older),
            )
            for index, version in enumerate(shown)
        ]
        page(
            resp,
            "policy_history.html",
            now=now,
            etag=tag,
            versions=views,
            older_url="/decisions/policy?" + urlencode({"cursor": after}) if after else None,
            newest_url="/decisions/policy" if cursor else None,
            **signed_in(req),
        )


def routes(services) -> list[tuple[str, object]]:
    return [("/decisions/policy", PolicyHistoryPage(services.board, services.clock))]
