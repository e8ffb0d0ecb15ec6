"""The `svc policy` command: the router's policy in force (`show`), a new version of it from a file (`set`), and its
versions (`history`), read and written in the database as `GET/PUT /api/v1/router/policy` do.

A file that cannot be read, is not JSON, or breaks the policy's schema is one line saying what is wrong (exit 2);
nothing is stored then.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any, TextIO

import contracts
from domain.clock import Clock, iso
from domain.errors import NotEarned
from domain.policy.rules import when_words
from domain.router import policy_versions

# A whole policy, as `svc policy set` and `PUT router/policy` take it.
DOCUMENT = "router-policy.json#/$defs/document"
# What `PUT router/policy` takes for a reason, and for the reason to force (`router-policy-put.json`).
REASON_LENGTH = contracts.part("router-policy-put.json", "/properties/reason")["maxLength"]


class BadFile(Exception):
    """One line saying why the policy file cannot be used."""


def show(*, output: str, out: TextIO, err: TextIO) -> int:
    current = policy_versions.current()
    if current is None:
        err.write(
            "svc policy: no policy is stored in this database yet; the first start of svc serve, svc jobs or svc run "
            "stores the first one (or store one: svc policy set FILE --reason TEXT)\n"
        )
        return 1
    if output == "json":
        from api import representations

        out.write(json.dumps(representations.policy_version(current)) + "\n")
    else:
        out.write(describe(current) + "\n")
    return 0


def describe(version: policy_versions.PolicyVersion) -> str:
    """The policy in force for people: who set it and why, its knobs, and each rule with its `when` in words."""
    policy = version.policy
    forced = f" (forced: {version.force})" if version.forced else ""
    lines = [
        f"policy {version.version}, set by {version.set_by or 'no one recorded'} at {iso(version.set_at)}: "
        f"{version.reason}{forced}",
        f"allowlist: {', '.join(sorted(policy.allowlist)) or '(empty)'}",
        f"retry budget {policy.retry_budget}; fleet size {policy.fleet_size}",
        "rules, in order (the first that matches is the event's rule):" if policy.rules else "rules: none",
    ]
    for number, rule in enumerate(policy.rules, 1):
        lines.append(
            f"  {number}. {rule.name} ({rule.role or 'no role: wait'}, {rule.mode}, version {rule.version}): "
            f"{when_words(rule.when)}"
        )
    return "\n".join(lines)


def read_document(file: str) -> dict[str, Any]:
    """The whole policy in `file`, checked against its schema; `BadFile` (one line) when it cannot be used."""
    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadFile(f"cannot read {file}: {exc}") from None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise BadFile(f"{file} is not JSON: {exc}") from None
    found = contracts.violations(DOCUMENT, document)
    if found:
        listed = "; ".join(f"{v.path or '/'}: {v.message}" for v in found)
        raise BadFile(f"{file} is not a whole router policy ({len(found)} violation(s)): {listed}")
    return document


def set_policy(
    file: str,
    *,
    reason: str,
    force: str | None,
    clock: Clock,
    thresholds: policy_versions.Thresholds,
    out: TextIO,
    err: TextIO,
) -> int:
    """Adopt the policy in `file`: exit 0 when it is in force, 2 when the file or a reason cannot be used, 1 when a
    rule it makes live has not earned it (each such rule's numbers against the thresholds; nothing stored)."""
    try:
        document = read_document(file)
    except BadFile as exc:
        err.write(f"svc policy set: {exc}\n")
        return 2
    for flag, text in (("--reason", reason), ("--force", force)):
        if text is not None and not 0 < len(text.strip()) <= REASON_LENGTH:
            err.write(f"svc policy set: {flag} must say why, in 1 to {REASON_LENGTH} characters (it is kept)\n")
            return 2
    try:
        adoption = policy_versions.adopt(
            document, reason=reason, force=force, actor=actor(), if_match=None, clock=clock, thresholds=thresholds
        )
    except NotEarned as refused:
        err.write(f"svc policy set: refused, nothing stored: {refused}\n")
        for rule, numbers in refused.evidence.items():
            low = "none" if numbers["low"] is None else f"{numbers['low']:.2f}"
            err.write(
                f"  {rule}: {numbers['settled']} settled (needs {numbers['required_settled']}), agreement low end "
                f"{low} (needs {numbers['required_low']:.2f})\n"
            )
        err.write("  to adopt it anyway: svc policy set FILE --reason TEXT --force REASON\n")
        return 1
    current = adoption.current
    if adoption.stored:
        out.write(
            f"svc policy: version {current.version} is in force from the next event on, in every process "
            f"(set by {current.set_by}{', forced' if current.forced else ''})\n"
        )
    else:
        out.write(f"svc policy: the policy in force (version {current.version}) is this one already; nothing stored\n")
    return 0


def history(*, limit: int, out: TextIO) -> int:
    versions, _ = policy_versions.history(limit=limit, cursor=None)
    if not versions:
        out.write("svc policy: no policy is stored in this database yet\n")
        return 0
    for number, version in enumerate(versions):
        state = "in force" if number == 0 else "replaced"
        forced = f"; forced: {version.force}" if version.forced else ""
        out.write(
            f"{version.version}  {iso(version.set_at)}  {state:<8}  by {version.set_by or 'no one recorded'}: "
            f"{version.reason}{forced}\n"
        )
    return 0


def actor() -> str:
    """Who a change made with `svc policy set` is attributed to: the account that ran the command."""
    try:
        return f"{getpass.getuser()} via svc policy"
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return "svc policy"
