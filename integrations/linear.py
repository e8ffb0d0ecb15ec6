"""Linear, the issue tracker, outbound (its webhooks: `domain/router/senders/linear.py`): closing the work item of a
ticket marked done, and reading the issues the board tracks that changed since a moment (the reconciler).

Linear's API is GraphQL over HTTPS at one endpoint. A personal API key goes, as it is, in the
`Authorization` header (OAuth tokens would carry `Bearer `). Closing an issue takes two calls: read the
issue with its team's workflow states of type `completed` (types are stable; names like "Done" can be
renamed), then `issueUpdate` it to the first of them. An issue already in a completed state is left alone,
so a retried close does nothing twice.

Failures raise `TransportError` (`integrations/transport.py`), sorted as for every target: transient (time-outs,
connection errors, 5xx, rate limits, and Linear's own internal errors) are tried again later; permanent (a refused
key, an unknown issue, a team without a completed state, any other rejected request) are given up and recorded.
Linear answers many errors in a GraphQL `errors` list, whatever the status: their kinds are read first.

Reading changed issues is one `issues` query, filtered on `updatedAt` and on the issues asked about (by id, or by
team key and number for an identifier such as ENG-12), paged forward by `pageInfo { hasNextPage endCursor }`, at most
`MAX_ISSUE_PAGES` pages: a reading the cap stopped says so (`UpdatedIssues.truncated`).

A rate-limited answer waits `Retry-After`, else until Linear's `X-RateLimit-Requests-Reset` (epoch milliseconds).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import requests

from integrations import transport
from integrations.timestamps import parse_time
from integrations.transport import TransportError

DEFAULT_TIMEOUT = transport.DEFAULT_TIMEOUT
USER_AGENT = "svc-delivery/1 (tracker close)"
COMPLETED = "completed"

ISSUE_WITH_COMPLETED_STATES = """
query IssueWithCompletedStates($id: String!, $stateType: String!) {
  issue(id: $id) {
    id
    identifier
    state { id name type }
    team {
      id
      key
      states(filter: { type: { eq: $stateType } }) {
        nodes { id name type position }
      }
    }
  }
}
"""

SET_ISSUE_STATE = """
mutation SetIssueState($id: String!, $stateId: String!) {
  issueUpdate(id: $id, input: { stateId: $stateId }) {
    success
    issue { id identifier state { id name type } }
  }
}
"""

ISSUES_UPDATED_SINCE = """
query IssuesUpdatedSince($filter: IssueFilter, $first: Int!, $after: String) {
  issues(filter: $filter, first: $first, after: $after) {
    nodes { id identifier updatedAt state { name type } }
    pageInfo { hasNextPage endCursor }
  }
}
"""
# Issues one page of `issues` asks for (Linear allows up to 250), and the most pages one reading follows.
ISSUES_PER_PAGE = 100
MAX_ISSUE_PAGES = 50
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_IDENTIFIER = re.compile(r"^([A-Z][A-Z0-9]*)-([0-9]{1,9})$")

# Linear names its error kinds in `extensions.type` (the SDK's list) and, on some, `extensions.code`.
_TRANSIENT_KINDS = {"ratelimited", "internal error", "lock timeout", "network error", "bootstrap error"}
_PERMANENT_KINDS = {
    "authentication error",
    "forbidden",
    "invalid input",
    "feature not accessible",
    "user error",
    "graphql error",
    "usage limit exceeded",
}
_TRANSIENT_CODES = {"RATELIMITED", "INTERNAL_SERVER_ERROR"}
_PERMANENT_CODES = {"AUTHENTICATION_ERROR", "FORBIDDEN", "INPUT_ERROR", "GRAPHQL_VALIDATION_FAILED", "BAD_USER_INPUT"}


@dataclass(frozen=True)
class Closed:
    issue: str  # the identifier people know, e.g. ENG-12
    state: str  # the completed state's name, e.g. Done
    already: bool  # it was completed before this call

    def describe(self) -> str:
        if self.already:
            return f"Linear issue {self.issue} was already {self.state}"
        return f"Linear issue {self.issue} set to {self.state}"


@dataclass(frozen=True)
class TrackerIssue:
    """An issue as Linear has it now: its id, identifier (ENG-12), last update and workflow state."""

    id: str
    identifier: str
    updated_at: datetime
    updated_at_text: str  # as Linear wrote it, to the millisecond
    state_name: str
    state_type: str | None


@dataclass
class UpdatedIssues:
    """What one reading of the changed issues found, in Linear's order. `truncated`: the page cap stopped it with
    more pages to read, so issues may be missing."""

    issues: list[TrackerIssue] = field(default_factory=list)
    truncated: bool = False


class LinearTracker:
    def __init__(
        self,
        api_url: str,
        api_key: str,
        *,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        session: requests.Session | None = None,
    ):
        self.api_url = api_url
        # As explicit auth, so a ~/.netrc entry for the host can never replace the key.
        self.auth = transport.HeaderAuth(api_key)
        self.timeout = timeout
        self.session = session or transport.session(USER_AGENT)

    def close_issue(self, issue_id: str) -> Closed:
        """Set `issue_id` (a Linear id or an identifier like ENG-12) to its team's completed state."""
        data = self.graphql(
            "IssueWithCompletedStates", ISSUE_WITH_COMPLETED_STATES, {"id": issue_id, "stateType": COMPLETED}
        )
        issue = data.get("issue")
        if not issue:
            raise TransportError(f"Linear has no issue {issue_id!r}", permanent=True)
        name = issue.get("identifier") or issue_id
        current = issue.get("state") or {}
        if current.get("type") == COMPLETED:
            return Closed(name, current.get("name") or COMPLETED, already=True)
        team = issue.get("team") or {}
        states = [s for s in ((team.get("states") or {}).get("nodes") or []) if s.get("type") == COMPLETED]
        if not states:
            raise TransportError(
                f"the team {team.get('key') or team.get('id') or '?'} of {name} has no workflow state of type "
                "completed",
                permanent=True,
            )
        target = min(states, key=lambda s: (s.get("position") is None, s.get("position") or 0))
        result = self.graphql("SetIssueState", SET_ISSUE_STATE, {"id": issue["id"], "stateId": target["id"]})
        payload = result.get("issueUpdate") or {}
        if not payload.get("success"):
            raise TransportError(f"Linear did not apply the change to {name} (success: false)", permanent=True)
        state = ((payload.get("issue") or {}).get("state") or {}).get("name") or target.get("name") or COMPLETED
        return Closed(name, state, already=False)

    def issues_updated_since(
        self, tracked: Iterable[str], since: datetime, *, max_pages: int = MAX_ISSUE_PAGES
    ) -> UpdatedIssues:
        """The issues among `tracked` (Linear ids, or identifiers like ENG-12) updated at or after `since`, with
        their states; every page of the answer, in Linear's order, at most `max_pages` of them (then `truncated`).
        Raises `TransportError`."""
        wanted = sorted(set(tracked))
        ids = [ident for ident in wanted if _UUID.match(ident)]
        numbers: dict[str, list[int]] = {}
        for ident in wanted:
            found = _IDENTIFIER.match(ident)
            if found:
                numbers.setdefault(found.group(1), []).append(int(found.group(2)))
        alternatives: list[dict[str, Any]] = [{"id": {"in": ids}}] if ids else []
        alternatives += [{"team": {"key": {"eq": key}}, "number": {"in": sorted(n)}} for key, n in numbers.items()]
        if not alternatives:
            return UpdatedIssues()
        stamp = since.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        issue_filter = {"updatedAt": {"gte": stamp}, "or": alternatives}
        found = UpdatedIssues()
        after: str | None = None
        for number in range(1, max_pages + 1):
            data = self.graphql(
                "IssuesUpdatedSince",
                ISSUES_UPDATED_SINCE,
                {"filter": issue_filter, "first": ISSUES_PER_PAGE, "after": after},
            )
            connection = data.get("issues")
            nodes = connection.get("nodes") if isinstance(connection, dict) else None
            info = connection.get("pageInfo") if isinstance(connection, dict) else None
            if not isinstance(nodes, list) or not isinstance(info, dict):
                raise TransportError("Linear's issues page has no nodes or pageInfo", permanent=True)
            for index, node in enumerate(nodes):
                issue = _tracker_issue(node)
                if issue is None:
                    raise TransportError(
                        f"Linear's issue record {index} lacks its id, updatedAt or state", permanent=True
                    )
                found.issues.append(issue)
            after = info.get("endCursor")
            if info.get("hasNextPage") is not True:
                break
            if not isinstance(after, str) or not after:
                raise TransportError("Linear said there is a next page but gave no endCursor", permanent=True)
            if number == max_pages:
                found.truncated = True
        return found

    # -- one GraphQL call -------------------------------------------------------------------------------

    def graphql(self, operation: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        """One GraphQL operation: its `data`, or `TransportError` (Linear's `errors` read by their kind first)."""
        response = transport.send(
            self.session,
            "POST",
            self.api_url,
            target="Linear",
            timeout=self.timeout,
            auth=self.auth,
            json={"operationName": operation, "query": query, "variables": variables},
            headers={"Accept": "application/json"},
        )
        try:
            body = response.json()
        except ValueError:
            body = None
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors:
            raise _graphql_error(errors, response)
        error = transport.error_for(response, "Linear", retry_after=_wait(response))
        if error is not None:
            raise error
        if not isinstance(body, dict) or not isinstance(body.get("data"), dict):
            raise TransportError(f"Linear answered {response.status_code} without GraphQL data", permanent=False)
        return body["data"]


def _graphql_error(errors: list[Any], response: requests.Response) -> TransportError:
    """Linear's first error, by its kind; a kind Linear has not named is judged by the status, as `error_for` does."""
    status = response.status_code
    first = errors[0] if isinstance(errors[0], dict) else {}
    extensions = first.get("extensions") or {}
    kind = str(extensions.get("type") or "").lower()
    code = str(extensions.get("code") or "").upper()
    message = str(extensions.get("userPresentableMessage") or first.get("message") or "unknown error")[:300]
    detail = f"Linear: {message}" + (f" ({kind or code})" if kind or code else "")
    retry_after = _wait(response)
    if kind in _TRANSIENT_KINDS or code in _TRANSIENT_CODES:
        return TransportError(detail, permanent=False, retry_after=retry_after, status=status)
    if kind in _PERMANENT_KINDS or code in _PERMANENT_CODES or extensions.get("userError"):
        return TransportError(detail, permanent=True, status=status)
    if status == 429 or status >= 500:
        return TransportError(detail, permanent=False, retry_after=retry_after, status=status)
    return TransportError(detail, permanent=True, status=status)


def _wait(response: requests.Response) -> float | None:
    """How long a rate-limited answer asks to wait: `Retry-After`, else until `X-RateLimit-Requests-Reset` (Linear
    writes it in epoch milliseconds; a value small enough to be seconds is read as seconds)."""
    at = transport.answered_at(response)
    wait = transport.parse_retry_after(response.headers.get("Retry-After"), now=at)
    reset = response.headers.get("X-RateLimit-Requests-Reset")
    if wait is None and reset is not None:
        in_ms = reset.strip().isdigit() and len(reset.strip()) > 11
        wait = transport.until_epoch(reset, now=at, unit=0.001 if in_ms else 1.0)
    return wait


def _tracker_issue(node: Any) -> TrackerIssue | None:
    if not isinstance(node, dict):
        return None
    ident, identifier, updated = node.get("id"), node.get("identifier"), node.get("updatedAt")
    state = node.get("state")
    if not isinstance(ident, str) or not ident or not isinstance(updated, str) or not isinstance(state, dict):
        return None
    moment = parse_time(updated)
    if moment is None or not isinstance(state.get("name"), str) or not state["name"]:
        return None
    return TrackerIssue(
        id=ident,
        identifier=identifier if isinstance(identifier, str) and identifier else ident,
        updated_at=moment,
        updated_at_text=updated,
        state_name=state["name"],
        state_type=state.get("type") if isinstance(state.get("type"), str) else None,
    )
