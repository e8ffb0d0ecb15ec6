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
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from domain import entity_tags, units
from domain.clock import Clock
from domain.config import Config
from domain.errors import NotEarned
from domain.policy.document import Policy
from domain.policy.rules import Rule, when_words
from domain.router import scorecard
from storage import policy_versions as rows

log = logging.getLogger("svc.router.policy")

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
    # For each rule live here that was live already in the version before: the id of the version that made it live
    # (`made_live_by`), worked out once as this version was stored (`_live_since`).
    live_since: Mapping[str, int]

    @property
    def forced(self) -> bool:
        return self.force is not None

    def made_live_by(self, rule: Rule) -> int:
        """The id of the version that made `rule` (live here) live: the oldest of the unbroken run of versions, up to
        this one, in which it is live under its present version."""
        return self.live_since.get(rule.version, self.id)

    @property
    def tag(self) -> str:
        """The `ETag` of this version (`If-Match` names it)."""
        return entity_tags.policy_tag(self.version)


def _version(row: rows.PolicyVersionRecord) -> PolicyVersion:
    return PolicyVersion(
        id=row.id,
        version=row.version,
        policy=Policy.from_document(row.document),
        set_by=row.set_by,
        set_at=row.set_at,
        reason=row.reason,
        force=row.forced,
        # None only on a version stored before it was kept and not yet filled (`seed` fills them at start).
        live_since=row.live_since or {},
    )


def _live_since(previous: PolicyVersion | None, candidate: Policy) -> dict[str, int]:
    """What a version of `candidate` stored after `previous` keeps as its `live_since`: each of its live rules that
    `previous` held live under the same rule version keeps the version that made it live there."""
    if previous is None:
        return {}
    live_before = {rule.version for rule in previous.policy.live_rules()}
    return {rule.version: previous.made_live_by(rule) for rule in candidate.live_rules() if rule.version in live_before}


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


def made_live(current: PolicyVersion) -> dict[str, PolicyVersion]:
    """For each rule live in `current`, by name, the version that made it live (`PolicyVersion.made_live_by`): kept
    with each version as it was stored, so this reads one row per other version named, however long ago that was."""
    versions = {current.id: current}
    found = {}
    for rule in current.policy.live_rules():
        version_id = current.made_live_by(rule)
        if version_id not in versions:
            row = rows.get(version_id)
            if row is None:  # never deleted while a newer one names it; read as made live here
                version_id = current.id
            else:
                versions[version_id] = _version(row)
        found[rule.name] = versions[version_id]
    return found


@dataclass(frozen=True)
class Standing:
    """One rule of the policy in force against going live: its evidence under its present version (counted now), and
    the version that made it live (None while it is in shadow mode)."""

    rule: Rule
    evidence: Evidence
    made_live_by: PolicyVersion | None

    @property
    def live_without_evidence(self) -> bool:
        """Live, made so by a forced change, and still short of what it was forced past. It stops once the rule has
        earned that, or is put back in shadow mode; a rule that went live on its evidence is never live without
        evidence, even when a quiet fortnight later its numbers have thinned (its evidence says so beside it)."""
        return self.made_live_by is not None and self.made_live_by.forced and not self.evidence.earned


def standings(current: PolicyVersion, *, thresholds: Thresholds, now: datetime) -> list[Standing]:
    """Each rule of the policy in force, in order, with its standing. Call inside a unit of work or a connection."""
    live = made_live(current)
    return [
        Standing(rule, evidence(rule, thresholds=thresholds, now=now), live.get(rule.name))
        for rule in current.policy.rules
    ]


def changes(newer: PolicyVersion, older: PolicyVersion | None) -> list[str]:
    """What `newer` changed from `older`, the version before it, in words (the first: what it started with)."""
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
            live_since=_live_since(present, candidate),
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
                live_since=_live_since(None, first),
            )
            return None
        if rows.unfilled():
            _fill_live_since()
        return _disagreement(config, _version(row))

    found = units.run(work, what="storing the first router policy")
    if found is not None:
        log.warning("router policy: %s", found)
    return found


def _fill_live_since() -> None:
    """Work out `live_since` for the versions stored before it was kept, oldest first, each from the one before."""
    previous: PolicyVersion | None = None
    for row in rows.oldest_first():
        version = _version(row)
        if row.live_since is None:
            filled = _live_since(previous, version.policy)
            rows.fill_live_since(row.id, filled)
            version = replace(version, live_since=filled)
        previous = version


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
