"""The router's policy in force and its history (the rows: `storage/policy_versions.py`): the first policy stored on
the first start, a change judged and then adopted, and the policy every routed event reads.

Versions are rows that never change, and the newest is the one in force, so every API and jobs process applies a new
version from its next event on (`domain/policy/in_force.py`).

A change goes through `adopt`: the `If-Match` check, an equal document stored no second time, `judge` (the one
place that may refuse a change for what it changes: issue 29's evidence before a rule goes live), then the row.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain import entity_tags, units
from domain.clock import Clock
from domain.config import Config
from domain.errors import NotEarned
from domain.policy.document import Policy
from domain.policy.rules import Rule
from domain.router import scorecard
from storage import policy_versions as rows

log = logging.getLogger("svc.config")

FIRST_SET_BY = "svc"
FIRST_REASON = (
    "the first policy: the contract's three rules, with the allowlist (SVC_ROUTER_ALLOWLIST) and the retry budget "
    "(SVC_RETRY_BUDGET) of the environment of the first start"
)


@dataclass(frozen=True)
class PolicyVersion:
    """One stored version: the policy, and who set it, when, why, and (when forced) the reason for forcing it."""

    id: int
    version: str
    policy: Policy
    set_by: str | None
    set_at: datetime
    reason: str
    force: str | None

    @property
    def forced(self) -> bool:
        return self.force is not None

    @property
    def tag(self) -> str:
        """The `ETag` of this version (`If-Match` names it)."""
        return entity_tags.policy_tag(self.version)


def _version(row: Any) -> PolicyVersion:
    return PolicyVersion(
        id=row.id,
        version=row.version,
        policy=Policy.from_document(row.document),
        set_by=row.set_by,
        set_at=row.set_at,
        reason=row.reason,
        force=row.forced,
    )


# -- reading -------------------------------------------------------------------------------------------------------


def current() -> PolicyVersion | None:
    """The policy in force, or None on a database where none was ever stored."""
    row = rows.newest()
    return _version(row) if row is not None else None


def history(*, limit: int, cursor: str | None) -> tuple[list[PolicyVersion], str | None]:
    """The versions, newest first, keyset-paged."""
    found, after = rows.page(limit=limit, cursor=cursor)
    return [_version(row) for row in found], after


# -- changing ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Adoption:
    """What became of a policy change: the version in force after it, and whether it was stored now (an equal
    document is not stored a second time)."""

    current: PolicyVersion
    stored: bool


@dataclass(frozen=True)
class Thresholds:
    """What a rule must have earned before a change may make it live: over its decisions of the last `days` days
    under its present version, at least `min_settled` settled and the low end of the agreement's Wilson 95 %
    interval at least `min_agreement` (SVC_PROMOTION_DAYS, SVC_PROMOTION_MIN_SETTLED, SVC_PROMOTION_MIN_AGREEMENT)."""

    days: int
    min_settled: int
    min_agreement: float

    @classmethod
    def from_config(cls, config: Config) -> Thresholds:
        return cls(config.promotion_days, config.promotion_min_settled, config.promotion_min_agreement)


@dataclass(frozen=True)
class Evidence:
    """One rule's evidence against the thresholds: its settled decisions and its agreement (rate, Wilson low end)
    over the last `thresholds.days` days, counted by the scorecard (24 h window) under the rule's present version.

    A rule without a role dispatches nothing, live or not: it has nothing to earn (`needed` is False)."""

    rule: str
    version: str
    role: str | None
    settled: int
    rate: float | None
    low: float | None
    thresholds: Thresholds

    @property
    def needed(self) -> bool:
        return self.role is not None

    @property
    def earned(self) -> bool:
        t = self.thresholds
        return not self.needed or (
            self.settled >= t.min_settled and self.low is not None and self.low >= t.min_agreement
        )

    def missing(self) -> list[str]:
        """What the rule lacks, in words (empty when it has earned going live)."""
        if self.earned:
            return []
        t = self.thresholds
        said = []
        if self.settled < t.min_settled:
            said.append(f"{self.settled} settled decision(s) of the {t.min_settled} required")
        if self.low is None:
            said.append(f"no agreement to measure (its low end must be at least {t.min_agreement:.2f})")
        elif self.low < t.min_agreement:
            said.append(f"the agreement's low end is {self.low:.2f}, below the {t.min_agreement:.2f} required")
        return said

    def as_dict(self) -> dict[str, Any]:
        """The 409's `evidence` member for this rule."""
        return {
            "settled": self.settled,
            "low": self.low,
            "required_settled": self.thresholds.min_settled,
            "required_low": self.thresholds.min_agreement,
        }


def evidence(rule: Rule, *, thresholds: Thresholds, now: datetime) -> Evidence:
    """What `rule` (its present version) has earned by `now`. Call inside a unit of work or a connection."""
    found = scorecard.rule_agreement(rule, since=now - timedelta(days=thresholds.days), now=now)
    return Evidence(rule.name, rule.version, rule.role, found["settled"], found["rate"], found["low"], thresholds)


def went_live(rule: Rule, *, look_back: int = 100) -> PolicyVersion | None:
    """The version that made `rule` (its present version) live: the oldest of the unbroken run of versions, from the
    one in force back, in which it is live (at most `look_back` versions are read; None when it is not live in the
    version in force)."""
    found: PolicyVersion | None = None
    cursor: str | None = None
    read = 0
    while read < look_back:
        page, cursor = history(limit=min(50, look_back - read), cursor=cursor)
        for version in page:
            if rule.version not in {live.version for live in version.policy.live_rules()}:
                return found
            found = version
        read += len(page)
        if cursor is None or not page:
            break
    return found


def newly_live(current: PolicyVersion | None, candidate: Policy) -> list[Rule]:
    """The rules `candidate` makes live that are not live in `current`. A rule is the same rule while its version
    (name, role, conditions) is: a live rule whose conditions change is a new rule, with evidence of its own to
    earn; a live rule kept as it is stays live whatever else the change does."""
    live_now = {rule.version for rule in current.policy.live_rules()} if current is not None else set()
    return [rule for rule in candidate.live_rules() if rule.version not in live_now]


def judge(
    current: PolicyVersion | None, candidate: Policy, *, force: str | None, now: datetime, thresholds: Thresholds
) -> None:
    """May `candidate` replace `current`? Called inside the change's unit of work, before anything is stored; a
    refusal is a `DomainError` and stores nothing.

    A rule the change makes live (`newly_live`) must have earned it (`evidence`), else `NotEarned` names every such
    rule and what it lacks, with its numbers. `force` (a reason, kept with the version) accepts the change
    anyway."""
    if force is not None:
        return
    refused = [
        found
        for found in (evidence(rule, thresholds=thresholds, now=now) for rule in newly_live(current, candidate))
        if not found.earned
    ]
    if not refused:
        return
    said = "; ".join(f"rule {found.rule} (version {found.version}): {', '.join(found.missing())}" for found in refused)
    raise NotEarned(
        f"the change makes {len(refused)} rule(s) live that have not earned it over the last {thresholds.days} "
        f"day(s) under their present version: {said}. Leave them in shadow mode to gather evidence, or force the "
        "change with a reason",
        evidence={found.rule: found.as_dict() for found in refused},
    )


def adopt(
    document: Mapping[str, Any],
    *,
    reason: str,
    force: str | None,
    actor: str | None,
    if_match: Sequence[str] | None,
    clock: Clock,
    thresholds: Thresholds,
) -> Adoption:
    """Make `document` (a whole policy, checked against its schema already) the policy in force.

    `if_match` is the tags of the version the change was decided on (None: whatever is in force); another version
    in force is `PreconditionFailed`, naming it and who set it. A document equal to the one in force (the same
    version) stores nothing. A rule made live must have earned it (`judge`, against `thresholds`)."""
    candidate = Policy.from_document(document)

    def work() -> Adoption:
        row = rows.newest()
        now = clock()
        present = _version(row) if row is not None else None
        if present is not None:
            entity_tags.check_policy(if_match, version=present.version, set_by=present.set_by, set_at=present.set_at)
            if present.version == candidate.version:
                return Adoption(present, stored=False)
        judge(present, candidate, force=force, now=now, thresholds=thresholds)
        stored = rows.add(
            version=candidate.version,
            document=candidate.document(),
            set_by=actor,
            set_at=now,
            reason=reason,
            forced=force,
            replaces=present.id if present is not None else 0,
        )
        return Adoption(_version(stored), stored=True)

    return units.run(work, what="setting the router's policy")


def seed(config: Config, clock: Clock) -> str | None:
    """What every start that migrates does next (`svc serve`, `svc jobs`, `svc run`, the tests' app).

    On a database with no policy, store the first one (`Policy.from_config`). On one that has a policy, the
    environment changes nothing: log (and return) one warning line saying where the SVC_ROUTER_ALLOWLIST or
    SVC_RETRY_BUDGET it sets disagrees with the policy in force (None when it agrees, or sets neither)."""

    def work() -> str | None:
        row = rows.newest()
        if row is None:
            first = Policy.from_config(config)
            rows.add(
                version=first.version,
                document=first.document(),
                set_by=FIRST_SET_BY,
                set_at=clock(),
                reason=FIRST_REASON,
                forced=None,
                replaces=0,
            )
            return None
        return _disagreement(config, _version(row))

    found = units.run(work, what="storing the first router policy")
    if found is not None:
        log.warning("router policy: %s", found)
    return found


def _disagreement(config: Config, present: PolicyVersion) -> str | None:
    policy = present.policy
    found = []
    if "SVC_ROUTER_ALLOWLIST" in config.policy_variables_set and config.router_allowlist != policy.allowlist:
        found.append(
            f"SVC_ROUTER_ALLOWLIST={','.join(sorted(config.router_allowlist))} against the allowlist "
            f"{','.join(sorted(policy.allowlist)) or '(empty)'}"
        )
    if "SVC_RETRY_BUDGET" in config.policy_variables_set and config.retry_budget_per_day != policy.retry_budget:
        found.append(f"SVC_RETRY_BUDGET={config.retry_budget_per_day} against the retry budget {policy.retry_budget}")
    if not found:
        return None
    return (
        f"the environment disagrees with the router's policy in force (version {present.version}, set by "
        f"{present.set_by or 'no one recorded'}), which applies: {'; '.join(found)}. These variables only seed the "
        "first policy; change the policy with svc policy set or PUT /api/v1/router/policy"
    )
