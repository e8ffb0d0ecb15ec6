"""The rows of the router's policy versions (`domain/router/policy_versions.py` decides what goes in them): the
newest is the policy in force, and none is ever changed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage import statements
from storage.models import RouterPolicyVersion
from storage.paging import decode_cursor, page_of

_TABLE = RouterPolicyVersion._meta.table_name


@statements.record_of(RouterPolicyVersion)
@dataclass(slots=True, eq=False)
class PolicyVersionRecord:
    """A stored version as it is read: its document parsed, `forced` the reason given for forcing it (None: not
    forced), `replaces` the id of the version it followed (0 for the first), `live_since` since which version its
    live rules have been live (`RouterPolicyVersion.live_since`)."""

    id: int
    version: str
    document: dict[str, Any]
    set_by: str | None
    set_at: datetime
    reason: str
    forced: str | None
    replaces: int
    live_since: dict[str, int] | None


def newest_version() -> tuple[int, str] | None:
    """(id, version) of the policy in force, or None when none was ever set: one indexed one-row statement, read
    on every routed event."""
    found = statements.row(
        ("policy_newest_version",),
        lambda p: f'SELECT "id", "version" FROM "{_TABLE}" ORDER BY "id" DESC LIMIT 1',  # noqa: S608 (our table)
        [],
    )
    return (found[0], found[1]) if found else None


def get(version_id: int) -> PolicyVersionRecord | None:
    """The version with this id (a record, its document parsed), or None."""
    return statements.select_one(RouterPolicyVersion, {"id": version_id})


def newest() -> PolicyVersionRecord | None:
    """The policy in force (a record), or None."""
    found = newest_version()
    return get(found[0]) if found is not None else None


def add(
    *,
    version: str,
    document: dict[str, Any],
    set_by: str | None,
    set_at: datetime,
    reason: str,
    forced: str | None,
    replaces: int,
    live_since: dict[str, int],
) -> PolicyVersionRecord:
    """Store a new version after the one with id `replaces` (0: the first). A concurrent change made after the same
    version fails here with IntegrityError (`replaces` is unique), and its unit of work starts over."""
    return statements.insert(
        RouterPolicyVersion,
        {
            "version": version,
            "document": document,
            "set_by": set_by,
            "set_at": set_at,
            "reason": reason,
            "forced": forced,
            "replaces": replaces,
            "live_since": live_since,
        },
    )


def unfilled() -> bool:
    """Whether a version stored before `live_since` was kept is still without it."""
    return bool(
        statements.scalar(
            ("policy_unfilled",),
            lambda p: f'SELECT 1 FROM "{_TABLE}" WHERE "live_since" IS NULL LIMIT 1',  # noqa: S608 (our table)
            [],
        )
    )


def oldest_first() -> list[PolicyVersionRecord]:
    """Every version, oldest first (filling `live_since` walks them once)."""
    return statements.rows(RouterPolicyVersion, ("oldest_first",), lambda p: 'ORDER BY "id"', [])


def fill_live_since(version_id: int, live_since: dict[str, int]) -> bool:
    """Keep `live_since` on a version stored without it; False when it had one already (another start filled it)."""
    touched = statements.execute(
        ("policy_fill_live_since",),
        lambda p: f'UPDATE "{_TABLE}" SET "live_since" = {p} WHERE "id" = {p} AND "live_since" IS NULL',  # noqa: S608
        [RouterPolicyVersion.live_since.db_value(live_since), version_id],
    )
    return touched == 1


def page(*, limit: int, cursor: str | None = None) -> tuple[list[PolicyVersionRecord], str | None]:
    """Versions newest first, keyset-paged on the id."""
    before = decode_cursor(cursor, int)[0] if cursor else None
    found = statements.rows(
        RouterPolicyVersion,
        ("page", before is not None),
        lambda p: ('WHERE "id" < ' + p if before is not None else "") + f' ORDER BY "id" DESC LIMIT {p}',
        [*([before] if before is not None else []), limit + 1],
    )
    return page_of(found, limit, lambda row: [row.id])
