"""Linear, the issue tracker, outbound (its webhooks: `domain/router/senders/linear.py`): closing the work item of a
ticket marked done.

Linear's API is GraphQL over HTTPS at one endpoint. A personal API key goes, as it is, in the
`Authorization` header (OAuth tokens would carry `Bearer `). Closing an issue takes two calls: read the
issue with its team's workflow states of type `completed` (types are stable; names like "Done" can be
renamed), then `issueUpdate` it to the first of them. An issue already in a completed state is left alone,
so a retried close does nothing twice.

Failures are sorted the way the outbox needs them: transient (time-outs, connection errors, 5xx, rate
limits, Linear's internal errors) are tried again later; permanent (a refused key, an unknown issue, a team
without a completed state, any other rejected request) are given up and recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests
import requests.auth

DEFAULT_TIMEOUT = (5.0, 20.0)  # connect, read
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


class TrackerError(Exception):
    """A close that did not happen. `permanent` says whether trying again could help."""

    def __init__(self, detail: str, *, permanent: bool, retry_after: float | None = None):
        self.detail = detail
        self.permanent = permanent
        self.retry_after = retry_after
        super().__init__(detail)


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
        self.api_key = api_key
        self.timeout = timeout
        self.session = session or requests.Session()

    def close_issue(self, issue_id: str) -> Closed:
        """Set `issue_id` (a Linear id or an identifier like ENG-12) to its team's completed state."""
        data = self._call(
            "IssueWithCompletedStates", ISSUE_WITH_COMPLETED_STATES, {"id": issue_id, "stateType": COMPLETED}
        )
        issue = data.get("issue")
        if not issue:
            raise TrackerError(f"Linear has no issue {issue_id!r}", permanent=True)
        name = issue.get("identifier") or issue_id
        current = issue.get("state") or {}
        if current.get("type") == COMPLETED:
            return Closed(name, current.get("name") or COMPLETED, already=True)
        team = issue.get("team") or {}
        states = [s for s in ((team.get("states") or {}).get("nodes") or []) if s.get("type") == COMPLETED]
        if not states:
            raise TrackerError(
                f"the team {team.get('key') or team.get('id') or '?'} of {name} has no workflow state of type "
                "completed",
                permanent=True,
            )
        target = min(states, key=lambda s: (s.get("position") is None, s.get("position") or 0))
        result = self._call("SetIssueState", SET_ISSUE_STATE, {"id": issue["id"], "stateId": target["id"]})
        payload = result.get("issueUpdate") or {}
        if not payload.get("success"):
            raise TrackerError(f"Linear did not apply the change to {name} (success: false)", permanent=True)
        state = ((payload.get("issue") or {}).get("state") or {}).get("name") or target.get("name") or COMPLETED
        return Closed(name, state, already=False)

    # -- one GraphQL call -------------------------------------------------------------------------------

    def _call(self, operation: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self.session.post(
                self.api_url,
                json={"operationName": operation, "query": query, "variables": variables},
                headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
                # As explicit auth, so a ~/.netrc entry for the host can never replace the key.
                auth=_ApiKey(self.api_key),
                timeout=self.timeout,
                allow_redirects=False,
            )
        except requests.Timeout:
            raise TrackerError("Linear did not answer in time", permanent=False) from None
        except requests.ConnectionError as exc:
            raise TrackerError(f"cannot reach Linear: {type(exc).__name__}", permanent=False) from None
        except requests.RequestException as exc:
            raise TrackerError(f"request to Linear failed: {type(exc).__name__}", permanent=False) from None

        status = response.status_code
        retry_after = _retry_after(response)
        try:
            body = response.json()
        except ValueError:
            body = None
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors:
            raise _graphql_error(errors, status, retry_after)
        if status == 429:
            raise TrackerError("Linear rate limit (429)", permanent=False, retry_after=retry_after)
        if status >= 500:
            raise TrackerError(f"Linear answered {status}", permanent=False, retry_after=retry_after)
        if status in (401, 403):
            raise TrackerError(f"Linear refused the API key ({status})", permanent=True)
        if status >= 300:
            raise TrackerError(f"Linear answered {status}", permanent=True)
        if not isinstance(body, dict) or not isinstance(body.get("data"), dict):
            raise TrackerError(f"Linear answered {status} without GraphQL data", permanent=False)
        return body["data"]


class _ApiKey(requests.auth.AuthBase):
    """Linear's personal API key: the `Authorization` header is the key itself, no scheme."""

    def __init__(self, key: str):
        self.key = key

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = self.key
        return request


def _graphql_error(errors: list[Any], status: int, retry_after: float | None) -> TrackerError:
    first = errors[0] if isinstance(errors[0], dict) else {}
    extensions = first.get("extensions") or {}
    kind = str(extensions.get("type") or "").lower()
    code = str(extensions.get("code") or "").upper()
    message = str(extensions.get("userPresentableMessage") or first.get("message") or "unknown error")[:300]
    detail = f"Linear: {message}" + (f" ({kind or code})" if kind or code else "")
    if kind in _TRANSIENT_KINDS or code in _TRANSIENT_CODES:
        return TrackerError(detail, permanent=False, retry_after=retry_after)
    if kind in _PERMANENT_KINDS or code in _PERMANENT_CODES or extensions.get("userError"):
        return TrackerError(detail, permanent=True)
    return TrackerError(detail, permanent=status < 500 and status != 429, retry_after=retry_after)


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None
