"""A local HTTP server shaped like Linear's GraphQL API, for the tracker close and the reconciler.

It serves `POST /graphql` with the personal API key as the bare `Authorization` header, answers the operations
the service sends (`IssueWithCompletedStates`, `SetIssueState`, and `IssuesUpdatedSince`: the `issues` connection
filtered on `updatedAt` and on ids or team key and number, paged by `first`/`after` with `pageInfo { hasNextPage
endCursor }`) from its own little store of
teams, workflow states and issues, and answers errors the way Linear does: a JSON body with `errors`, each
carrying `extensions.type` / `extensions.code` / `userPresentableMessage`. Scripted failures (a 500, a rate
limit with Retry-After, a slow answer) can be queued ahead of the real answers.

As strict as Linear: a query that is not valid against Linear's SDK schema (the subset the conformance test reads,
`tests/integrations/descriptions/linear.graphql`), or whose variables do not fit the operation's definitions, is
refused with 400 and `GRAPHQL_VALIDATION_FAILED`, and a page (`first`) above 250 with `INPUT_ERROR`, as Linear does.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphql import GraphQLSchema, build_schema, parse, validate
from graphql.error import GraphQLError
from graphql.execution.values import get_variable_values

API_KEY = "lin_api_test_0123456789abcdefghijklmnopqrstuv"
SCHEMA = Path(__file__).resolve().parent.parent / "integrations" / "descriptions" / "linear.graphql"
# Linear's most a page: "first" above it is refused.
MAX_PAGE = 250


@functools.cache
def schema() -> GraphQLSchema:
    """Linear's SDK schema (the subset the service uses), built once per process."""
    return build_schema(SCHEMA.read_text())


def refusals(query: str, operation: str | None, variables: dict[str, Any]) -> list[str]:
    """Why Linear would refuse this request: its query not valid against the schema, or its variables not fitting."""
    try:
        document = parse(query)
    except GraphQLError as exc:
        return [exc.message]
    errors = [e.message for e in validate(schema(), document)]
    if errors:
        return errors
    chosen = [d for d in document.definitions if getattr(d, "name", None) and d.name.value == operation]
    if not chosen:
        return [f"Unknown operation named {operation!r}."]
    coerced = get_variable_values(schema(), chosen[0].variable_definitions, variables or {})
    return [e.message for e in coerced] if isinstance(coerced, list) else []


@dataclass
class State:
    id: str
    name: str
    type: str
    position: float


@dataclass
class Team:
    id: str
    key: str
    states: list[State] = field(default_factory=list)


@dataclass
class Issue:
    id: str
    identifier: str
    team: Team
    state: State
    updated_at: str = field(default_factory=lambda: _stamp(datetime.now(UTC)))

    @property
    def number(self) -> int:
        return int(self.identifier.rsplit("-", 1)[1])


def _stamp(moment: datetime) -> str:
    """As Linear writes a time: ISO 8601 UTC to the millisecond."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _error(message: str, *, type_: str, code: str, user: bool, presentable: str | None = None, path=None) -> dict:
    extensions = {"type": type_, "code": code, "userError": user}
    if presentable:
        extensions["userPresentableMessage"] = presentable
    error: dict[str, Any] = {"message": message, "extensions": extensions}
    if path:
        error["path"] = path
    return error


class FakeLinear:
    def __init__(self, api_key: str = API_KEY):
        self.api_key = api_key
        self.teams: dict[str, Team] = {}
        self.issues: dict[str, Issue] = {}
        self.calls: list[dict[str, Any]] = []
        self.script: deque[tuple[int, dict[str, str], bytes]] = deque()
        self.hold = threading.Event()
        self.hold.set()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                fake.hold.wait(timeout=15)
                status, headers, body = fake.answer(self.path, dict(self.headers), raw)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- setting up the workspace -------------------------------------------------------------------------

    def add_team(self, key: str) -> Team:
        team = Team(str(uuid.uuid4()), key)
        for position, (name, type_) in enumerate(
            [("Backlog", "backlog"), ("Todo", "unstarted"), ("In Progress", "started"), ("Done", "completed"),
             ("Canceled", "canceled")]
        ):  # fmt: skip
            team.states.append(State(str(uuid.uuid4()), name, type_, float(position)))
        self.teams[team.id] = team
        return team

    def add_issue(self, identifier: str, team: Team, state_name: str = "In Progress") -> Issue:
        state = next(s for s in team.states if s.name == state_name)
        issue = Issue(str(uuid.uuid4()), identifier, team, state)
        self.issues[issue.id] = issue
        return issue

    def move(self, issue: Issue, state_name: str, *, at: datetime | None = None) -> None:
        """A person moves `issue` in Linear (no webhook is sent): its state and its `updatedAt` change."""
        issue.state = next(s for s in issue.team.states if s.name == state_name)
        issue.updated_at = _stamp(at or datetime.now(UTC))

    def find(self, ident: str) -> Issue | None:
        return self.issues.get(ident) or next((i for i in self.issues.values() if i.identifier == ident), None)

    def fail_next(self, status: int, *, body: dict | None = None, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode() if body is not None else b"upstream error"
        content_type = "application/json" if body is not None else "text/plain"
        self.script.append((status, {"Content-Type": content_type, **(headers or {})}, payload))

    def rate_limit_next(self, retry_after: int = 30) -> None:
        self.fail_next(
            429,
            body={
                "errors": [_error("Rate limit exceeded", type_="ratelimited", code="RATELIMITED", user=False)],
            },
            headers={"Retry-After": str(retry_after)},
        )

    # -- answering ----------------------------------------------------------------------------------------

    def answer(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], bytes]:
        self.calls.append(
            {"path": path, "authorization": headers.get("Authorization"), "body": raw.decode(), "headers": headers}
        )
        if self.script:
            return self.script.popleft()
        if path != "/graphql":
            return 404, {"Content-Type": "text/plain"}, b"Not Found"
        if headers.get("Authorization") != self.api_key:
            return self._json(
                400,
                {
                    "errors": [
                        _error(
                            "Authentication required, not authenticated",
                            type_="authentication error",
                            code="AUTHENTICATION_ERROR",
                            user=True,
                            presentable="You need to authenticate to access this operation.",
                        )
                    ]
                },
            )
        request = json.loads(raw)
        operation, query, variables = request.get("operationName"), request.get("query", ""), request.get("variables")
        refused = refusals(query, operation, variables or {})
        if refused:
            errors = [_error(m, type_="graphql error", code="GRAPHQL_VALIDATION_FAILED", user=False) for m in refused]
            return self._json(400, {"errors": errors})
        if isinstance((variables or {}).get("first"), int) and variables["first"] > MAX_PAGE:
            message = f"first must not be greater than {MAX_PAGE}"
            return self._json(400, {"errors": [_error(message, type_="invalid input", code="INPUT_ERROR", user=True)]})
        if operation == "IssueWithCompletedStates" and f"query {operation}" in query:
            return self._issue_with_states(variables["id"], variables["stateType"])
        if operation == "SetIssueState" and f"mutation {operation}" in query:
            return self._set_state(variables["id"], variables["stateId"])
        if operation == "IssuesUpdatedSince" and f"query {operation}" in query:
            return self._issues(variables.get("filter") or {}, int(variables["first"]), variables.get("after"))
        return self._json(
            400,
            {
                "errors": [
                    _error("Unknown operation", type_="graphql error", code="GRAPHQL_VALIDATION_FAILED", user=False)
                ]
            },
        )

    def _issue_with_states(self, ident: str, state_type: str):
        issue = self.find(ident)
        if issue is None:
            return self._not_found("issue")
        return self._json(
            200,
            {
                "data": {
                    "issue": {
                        "id": issue.id,
                        "identifier": issue.identifier,
                        "state": _state(issue.state),
                        "team": {
                            "id": issue.team.id,
                            "key": issue.team.key,
                            "states": {"nodes": [_state(s) for s in issue.team.states if s.type == state_type]},
                        },
                    }
                }
            },
        )

    def _set_state(self, ident: str, state_id: str):
        issue = self.find(ident)
        if issue is None:
            return self._not_found("issueUpdate")
        state = next((s for s in issue.team.states if s.id == state_id), None)
        if state is None:
            return self._json(
                200,
                {
                    "data": None,
                    "errors": [
                        _error(
                            "Argument Validation Error",
                            type_="invalid input",
                            code="INPUT_ERROR",
                            user=True,
                            presentable="The workflow state does not belong to the issue's team.",
                            path=["issueUpdate"],
                        )
                    ],
                },
            )
        issue.state = state
        return self._json(
            200,
            {
                "data": {
                    "issueUpdate": {
                        "success": True,
                        "issue": {"id": issue.id, "identifier": issue.identifier, "state": _state(state)},
                    }
                }
            },
        )

    def _issues(self, issue_filter: dict, first: int, after: str | None):
        """The `issues` connection: what matches the filter, oldest update first, `first` at a time after the
        cursor (an issue's position, opaque to the client)."""
        since = (issue_filter.get("updatedAt") or {}).get("gte")

        def alternative(issue: Issue, wanted: dict) -> bool:
            if "id" in wanted:
                return issue.id in wanted["id"]["in"]
            return issue.team.key == wanted["team"]["key"]["eq"] and issue.number in wanted["number"]["in"]

        matching = sorted(
            (
                issue
                for issue in self.issues.values()
                if (since is None or issue.updated_at >= since)
                and any(alternative(issue, wanted) for wanted in issue_filter.get("or", [{}]))
            ),
            key=lambda i: (i.updated_at, i.id),
        )
        start = int(after.removeprefix("cursor-")) if after else 0
        page = matching[start : start + first]
        more = start + first < len(matching)
        nodes = [
            {
                "id": i.id,
                "identifier": i.identifier,
                "updatedAt": i.updated_at,
                "state": {"name": i.state.name, "type": i.state.type},
            }
            for i in page
        ]
        info = {"hasNextPage": more, "endCursor": f"cursor-{start + len(page)}" if page else None}
        return self._json(200, {"data": {"issues": {"nodes": nodes, "pageInfo": info}}})

    def _not_found(self, field_name: str):
        return self._json(
            200,
            {
                "data": None,
                "errors": [
                    _error(
                        "Entity not found: Issue",
                        type_="invalid input",
                        code="INPUT_ERROR",
                        user=True,
                        presentable="Could not find referenced Issue.",
                        path=[field_name],
                    )
                ],
            },
        )

    def _json(self, status: int, body: dict) -> tuple[int, dict[str, str], bytes]:
        return status, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(body).encode()

    # -- lifecycle ----------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/graphql"

    def __enter__(self) -> FakeLinear:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


def _state(state: State) -> dict[str, Any]:
    return {"id": state.id, "name": state.name, "type": state.type, "position": state.position}
