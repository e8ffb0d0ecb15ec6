"""Linear, the issue tracker, outbound (its webhooks: `domain/router/senders/linear.py`): closing the work item of a
ticket marked done.

Linear's API is GraphQL over HTTPS at one endpoint. A personal API key goes, as it is, in the
`Authorization` header (OAuth tokens would carry `Bearer `). Closing an issue takes two calls: read the
issue with its team's workflow states of type `completed` (types are stable; names like "Done" can be
renamed), then `issueUpdate` it to the first of them. An issue already in a completed state is left alone,
so a retried close does nothing twice.

Failures raise `TransportError` (`integrations/transport.py`), sorted as for every target: transient (time-outs,
connection errors, 5xx, rate limits, and Linear's own internal errors) are tried again later; permanent (a refused
key, an unknown issue, a team without a completed state, any other rejected request) are given up and recorded.
Linear answers many errors in a GraphQL `errors` list, whatever the status: their kinds are read first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

from integrations import transport
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
        error = transport.error_for(response, "Linear")
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
    retry_after = transport.parse_retry_after(response.headers.get("Retry-After"))
    if kind in _TRANSIENT_KINDS or code in _TRANSIENT_CODES:
        return TransportError(detail, permanent=False, retry_after=retry_after, status=status)
    if kind in _PERMANENT_KINDS or code in _PERMANENT_CODES or extensions.get("userError"):
        return TransportError(detail, permanent=True, status=status)
    if status == 429 or status >= 500:
        return TransportError(detail, permanent=False, retry_after=retry_after, status=status)
    return TransportError(detail, permanent=True, status=status)
