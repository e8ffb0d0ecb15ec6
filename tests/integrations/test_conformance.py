"""Every request the service's clients send, held to what the forges and trackers publish (the subsets kept in
`tests/integrations/descriptions/`, their sources and versions in its README): each client method the service uses
is driven against a local server shaped like its target, which records what it got, and each request is checked
against the operation it claims to be.

- GitHub and Discord: the operation whose method and path template match, from their OpenAPI descriptions: every
  query parameter and path parameter declared (and of its type, enum and bounds), every body member declared (at
  every depth, against the request body's schema), the required ones present, every header declared (HTTP's own,
  the description's parameters and security scheme, and the headers GitHub's docs require, `x-svc-headers`).
- GitLab: the parameters its API code declares for the route (`gitlab.json`, read from `lib/api/*.rb`), query and
  body alike as Grape reads them, with their types, `values` and ranges (`per_page` 1..20 on hook events).
- Linear: the body is `{operationName, query, variables}`, the query valid against Linear's SDK schema
  (graphql-core's `validate`) and the variables coerced against the operation's own definitions.

A request with a parameter, a body member or a header the description does not declare fails; the checkers are
shown to fail on such requests too. The descriptions are read once per module.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest
from graphql import build_schema, parse, validate
from graphql.execution.values import get_variable_values
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from integrations.discord import DiscordWebhook
from integrations.github import GitHub
from integrations.gitlab import GitLab
from integrations.linear import LinearTracker

from servers.discord import FakeDiscord
from servers.forges import GITHUB_TOKEN, GITLAB_TOKEN, FakeGitHub, FakeGitLab
from servers.linear import API_KEY, FakeLinear

DESCRIPTIONS = Path(__file__).parent / "descriptions"
# What HTTP itself (and `requests`) puts on every request: no API declares these, every API takes them.
HTTP_HEADERS = {"host", "user-agent", "accept-encoding", "accept", "connection", "content-length", "content-type"}

Problems = list[str]


# -- OpenAPI (GitHub, Discord) ------------------------------------------------------------------------------------


class OpenApi:
    """An OpenAPI description read once: which operation a request is, and what in it the operation does not
    declare or does not allow."""

    def __init__(self, document: dict[str, Any], *, prefix: str = ""):
        self.document = document
        self.prefix = prefix
        # The headers the API's docs require of every request (GitHub's: its token, media type and API version).
        self.required_headers = {h.lower() for h in document.get("x-svc-headers", {})}
        self.extra_headers = set(self.required_headers)
        schemes = document.get("components", {}).get("securitySchemes", {})
        self.extra_headers |= {s["name"].lower() for s in schemes.values() if s.get("in") == "header"}
        root = {**document, "$id": "urn:svc:description"}
        self.registry = Registry().with_resource("urn:svc:description", Resource(root, DRAFT202012))
        self.routes = [
            (method.upper(), path, re.compile("^" + re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/]+)", re.escape(path)) + "$"))
            for path, item in document["paths"].items()
            for method in item
            if method != "parameters"
        ]

    def operation(self, method: str, path: str) -> tuple[str, dict[str, str]] | None:
        """(the path template, the path's parameters) of the operation `method path` is, or None."""
        for verb, template, pattern in self.routes:
            found = pattern.match(path.removeprefix(self.prefix))
            if verb == method and found:
                return template, found.groupdict()
        return None

    def check(self, method: str, url: str, headers: dict[str, str], body: Any) -> Problems:
        parts = urlsplit(url)
        matched = self.operation(method, unquote(parts.path))
        if matched is None:
            return [f"{method} {parts.path}: no such operation in the description"]
        template, path_values = matched
        item = self.document["paths"][template]
        operation = item[method.lower()]
        declared = {}
        for parameter in [*item.get("parameters", []), *operation.get("parameters", [])]:
            parameter = self.resolve(parameter)
            declared[(parameter["in"], parameter["name"])] = parameter
        where = f"{method} {template}"
        problems: Problems = []
        query = parse_qsl(parts.query, keep_blank_values=True)
        for place, values in (("path", list(path_values.items())), ("query", query)):
            for name, value in values:
                parameter = declared.get((place, name))
                if parameter is None:
                    problems.append(f"{where}: {place} parameter {name!r} is not declared")
                else:
                    problems += [f"{where}: {place} {name}={value!r} {p}" for p in _scalar(parameter["schema"], value)]
        for (place, name), parameter in declared.items():
            present = name in path_values if place == "path" else any(n == name for n, _ in query)
            if parameter.get("required") and place in ("path", "query") and not present:
                problems.append(f"{where}: required {place} parameter {name!r} is missing")
        allowed = HTTP_HEADERS | self.extra_headers | {n.lower() for (p, n) in declared if p == "header"}
        problems += [f"{where}: header {h!r} is not declared" for h in headers if h.lower() not in allowed]
        sent = {h.lower() for h in headers}
        problems += [f"{where}: required header {h!r} is missing" for h in self.required_headers if h not in sent]
        problems += self._body(where, template, method.lower(), operation, body)
        return problems

    def _body(self, where: str, template: str, method: str, operation: dict[str, Any], body: Any) -> Problems:
        declared = operation.get("requestBody")
        if declared is None:
            return [] if body is None else [f"{where}: a body, which the operation does not declare"]
        declared = self.resolve(declared)
        if body is None:
            return [f"{where}: the required body is missing"] if declared.get("required") else []
        escaped = template.replace("~", "~0").replace("/", "~1")
        pointer = f"#/paths/{escaped}/{method}/requestBody/content/application~1json/schema"
        validator = Draft202012Validator({"$ref": f"urn:svc:description{pointer}"}, registry=self.registry)
        problems = [
            f"{where}: body {'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(body)
        ]
        schema = declared["content"]["application/json"]["schema"]
        return problems + [f"{where}: body member {m} is not declared" for m in self.undeclared(schema, body, "")]

    def undeclared(self, schema: dict[str, Any], value: Any, at: str) -> list[str]:
        """The members of `value` (at every depth) that `schema` does not declare: an object's members must be among
        its `properties` (of some branch, for `anyOf`/`oneOf`/`allOf`) unless it says `additionalProperties`."""
        schema = self.resolve(schema)
        branches = [self.resolve(s) for key in ("anyOf", "oneOf", "allOf") for s in schema.get(key, [])]
        if isinstance(value, dict):
            properties: dict[str, Any] = {}
            open_ended = bool(schema.get("additionalProperties"))
            for candidate in [schema, *branches]:
                properties.update(candidate.get("properties", {}))
                open_ended = open_ended or bool(candidate.get("additionalProperties"))
            found = []
            for name, member in value.items():
                if name in properties:
                    found += self.undeclared(properties[name], member, f"{at}/{name}")
                elif not open_ended:
                    found.append(f"{at}/{name}")
            return found
        if isinstance(value, list):
            items = [candidate.get("items") for candidate in [schema, *branches] if candidate.get("items")]
            return [
                m
                for i, item in enumerate(value)
                for m in (self.undeclared(items[0], item, f"{at}/{i}") if items else [])
            ]
        return []

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while isinstance(node, dict) and "$ref" in node:
            target: Any = self.document
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node


def _scalar(schema: dict[str, Any], text: str) -> Problems:
    """What is wrong with a parameter's text against its (scalar) schema."""
    kind = schema.get("type")
    if kind == "integer":
        if not re.fullmatch(r"-?\d+", text):
            return ["is not an integer"]
        number = int(text)
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and number < low) or (high is not None and number > high):
            return [f"is outside {low}..{high}"]
    if kind == "boolean" and text not in ("true", "false"):
        return ["is not a boolean"]
    if "enum" in schema and text not in [str(v) for v in schema["enum"]]:
        return [f"is not one of {schema['enum']}"]
    return []


# -- GitLab -------------------------------------------------------------------------------------------------------


class GitLabApi:
    """GitLab's declared parameters per route, read once (`gitlab.json`)."""

    def __init__(self, document: dict[str, Any], *, prefix: str = "/api/v4"):
        self.prefix = prefix
        self.headers = HTTP_HEADERS | {h.lower() for h in document["x-svc-headers"]}
        self.routes = [
            (op, re.compile("^" + re.sub(r":(\w+)", r"(?P<\1>[^/]+)", op["path"]) + "$"))
            for op in document["operations"]
        ]

    def check(self, method: str, url: str, headers: dict[str, str], body: Any) -> Problems:
        parts = urlsplit(url)
        # An encoded project path ("group%2Fname") is one segment: split before decoding.
        path = parts.path.removeprefix(self.prefix)
        for operation, pattern in self.routes:
            found = pattern.match(path)
            if operation["method"] == method and found:
                break
        else:
            return [f"{method} {path}: no such route in GitLab's API code"]
        where = f"{method} {operation['path']}"
        given = {**{k: unquote(v) for k, v in found.groupdict().items()}, **dict(parse_qsl(parts.query))}
        if isinstance(body, dict):
            given.update(body)
        elif body is not None:
            return [f"{where}: a body that is not a JSON object"]
        declared = operation["params"]
        problems = [f"{where}: parameter {name!r} is not declared" for name in given if name not in declared]
        for name, param in declared.items():
            if name not in given:
                if param.get("required"):
                    problems.append(f"{where}: required parameter {name!r} is missing")
                continue
            problems += [f"{where}: {name}={given[name]!r} {p}" for p in _grape(param, given[name])]
        problems += [f"{where}: header {h!r} is not declared" for h in headers if h.lower() not in self.headers]
        if "private-token" not in {h.lower() for h in headers}:
            problems.append(f"{where}: required header 'PRIVATE-TOKEN' is missing")
        return problems


def _grape(param: dict[str, Any], value: Any) -> Problems:
    """What GitLab's Grape declaration of `param` refuses in `value` (sent as text in a query, or as JSON)."""
    kind, text = param.get("type", "String"), str(value).lower() if isinstance(value, bool) else str(value)
    if kind == "Integer" and not re.fullmatch(r"-?\d+", text):
        return ["is not an Integer"]
    if kind == "Boolean" and text not in ("true", "false", "1", "0"):
        return ["is not a Boolean"]
    if "range" in param and not param["range"][0] <= int(text) <= param["range"][1]:
        return ["is outside {}..{}".format(*param["range"])]
    if "values" in param and not any(v in param["values"] for v in text.split(",")) and "values_also" not in param:
        return [f"is not one of {param['values']}"]
    return []


# -- Linear -------------------------------------------------------------------------------------------------------


class LinearSchema:
    """Linear's SDK schema (the subset), built once."""

    def __init__(self, sdl: str):
        self.schema = build_schema(sdl)

    def check(self, headers: dict[str, str], raw: str) -> Problems:
        problems = [
            f"header {h!r} is not declared" for h in headers if h.lower() not in HTTP_HEADERS | {"authorization"}
        ]
        try:
            body = json.loads(raw)
        except ValueError:
            return [*problems, "the body is not JSON"]
        problems += [f"body member {m!r} is not GraphQL over HTTP's" for m in body if m not in _GRAPHQL_MEMBERS]
        document = parse(body.get("query", ""))
        errors = validate(self.schema, document)
        if errors:
            return [*problems, *(f"query: {e.message}" for e in errors)]
        operation = next(d for d in document.definitions if d.name and d.name.value == body.get("operationName"))
        coerced = get_variable_values(self.schema, operation.variable_definitions, body.get("variables") or {})
        if isinstance(coerced, list):
            problems += [f"variables: {e.message}" for e in coerced]
        declared = {v.variable.name.value for v in operation.variable_definitions}
        problems += [f"variable {n!r} is not declared" for n in (body.get("variables") or {}) if n not in declared]
        return problems


_GRAPHQL_MEMBERS = {"query", "operationName", "variables", "extensions"}


# -- the descriptions, read once ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def github_api() -> OpenApi:
    return OpenApi(json.loads((DESCRIPTIONS / "github.json").read_text()))


@pytest.fixture(scope="module")
def gitlab_api() -> GitLabApi:
    return GitLabApi(json.loads((DESCRIPTIONS / "gitlab.json").read_text()))


@pytest.fixture(scope="module")
def discord_api() -> OpenApi:
    return OpenApi(json.loads((DESCRIPTIONS / "discord.json").read_text()), prefix="/api")


@pytest.fixture(scope="module")
def linear_schema() -> LinearSchema:
    return LinearSchema((DESCRIPTIONS / "linear.graphql").read_text())


REPO_HOOK = "repos/acme/portfolio/hooks/467123908"
ORG_HOOK = "orgs/acme/hooks/12"
LAB_HOOK = "projects/15/hooks/7"


def own_login(client: GitHub | GitLab) -> None:
    """The service's own login (`GET /user`): the client's method once it has one, else its own call."""
    method = getattr(client, "own_login", None)
    if method is not None:
        method()
    else:
        client._call("GET", "user")


# -- the service's requests conform -------------------------------------------------------------------------------


def test_every_github_request_the_service_sends_conforms_to_githubs_description(github_api):
    with FakeGitHub(lambda headers, body: 200) as fake:
        fake.add_repo("acme/portfolio")
        for hook in (REPO_HOOK, ORG_HOOK):
            fake.send(hook, "pull_request", "opened", {"X-GitHub-Delivery": f"guid-{hook}"}, b"{}")
        client = GitHub(fake.url, GITHUB_TOKEN, tries=1)
        for hook in (REPO_HOOK, ORG_HOOK):
            log = client.deliveries_since(hook, datetime.now(UTC) - timedelta(hours=1))
            client.redeliver(hook, log.deliveries[0].id)
        made = client.draft_pull_request("acme/portfolio", branch="svc/PORT-12", title="t", body="b")
        client.open_pull_request("acme/portfolio", "svc/PORT-12")
        client.comment("acme/portfolio", made.number, "c")
        own_login(client)
    driven = set()
    for call in fake.calls:
        assert github_api.check(call["method"], call["path"], call["headers"], call["json"]) == []
        driven.add((call["method"], github_api.operation(call["method"], urlsplit(call["path"]).path)[0]))
    assert driven == {(verb, template) for verb, template, _ in github_api.routes}  # every operation was driven


def test_every_gitlab_request_the_service_sends_conforms_to_gitlabs_api_code(gitlab_api):
    with FakeGitLab(lambda headers, body: 500) as fake:
        fake.add_project("acme/web/portfolio", project_id=15)
        fake.send(LAB_HOOK, "merge_request_hooks", {"Idempotency-Key": "k1"}, b"{}")
        client = GitLab(fake.url, GITLAB_TOKEN, tries=1)
        events = client.hook_events(LAB_HOOK, status="server_failure")
        client.hook_events(LAB_HOOK, status="client_failure")
        client.resend(LAB_HOOK, events.events[0].id)
        made = client.draft_merge_request("acme/web/portfolio", branch="svc/PORT-12", title="t" * 300, body="b")
        client.note("acme/web/portfolio", made.iid, "n")
        own_login(client)
    routes = set()
    for call in fake.calls:
        assert gitlab_api.check(call["method"], call["path"], call["headers"], call["json"]) == []
        routes.add((call["method"], re.sub(r"/\d+|/acme%2Fweb%2Fportfolio", "/:x", urlsplit(call["path"]).path)))
    assert len(routes) == len(gitlab_api.routes)  # every route of the subset was driven


def test_linears_three_operations_and_their_variables_are_valid_against_its_sdk_schema(linear_schema):
    with FakeLinear() as fake:
        team = fake.add_team("ENG")
        issue = fake.add_issue("ENG-12", team)
        tracker = LinearTracker(fake.url, API_KEY)
        tracker.issues_updated_since([issue.identifier, issue.id], datetime.now(UTC) - timedelta(days=1))
        tracker.close_issue(issue.identifier)
    operations = [json.loads(call["body"])["operationName"] for call in fake.calls]
    assert operations == ["IssuesUpdatedSince", "IssueWithCompletedStates", "SetIssueState"]
    for call in fake.calls:
        assert linear_schema.check(call["headers"], call["body"]) == []


def test_the_discord_post_conforms_to_discords_description(discord_api):
    with FakeDiscord() as fake:
        DiscordWebhook(fake.url).execute("hello")
    [request] = fake.requests
    url = f"/api/webhooks/{fake.webhook_id}/{fake.token}?" + "&".join(
        f"{k}={v[0]}" for k, v in request["query"].items()
    )
    assert discord_api.check("POST", url, request["headers"], request["body"]) == []


# -- the checkers fail on what the descriptions do not declare ----------------------------------------------------


GOOD_PULL = {"title": "t", "body": "b", "head": "svc/PORT-12", "base": "main", "draft": True}
GITHUB_HEADERS = {
    "Authorization": "Bearer x",
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "User-Agent": "svc",
}


@pytest.mark.parametrize(
    ("url", "headers", "body", "said"),
    [
        ("/repos/a/b/pulls", GITHUB_HEADERS, {**GOOD_PULL, "auto_merge": True}, "body member /auto_merge"),
        ("/repos/a/b/pulls?force=1", GITHUB_HEADERS, GOOD_PULL, "query parameter 'force' is not declared"),
        ("/repos/a/b/pulls", {**GITHUB_HEADERS, "X-Bypass": "1"}, GOOD_PULL, "header 'X-Bypass' is not declared"),
        ("/repos/a/b/pulls", GITHUB_HEADERS, {**GOOD_PULL, "draft": "yes"}, "body draft: 'yes' is not of type"),
        ("/repos/a/b/pulls", GITHUB_HEADERS, {"title": "t"}, "'head' is a required property"),
        ("/repos/a/b/pullz", GITHUB_HEADERS, GOOD_PULL, "no such operation"),
        ("/repos/a/b/pulls", {"Authorization": "Bearer x"}, GOOD_PULL, "required header 'x-github-api-version'"),
    ],
)
def test_the_github_checker_fails_on_what_githubs_description_does_not_declare(github_api, url, headers, body, said):
    assert github_api.check("POST", "/repos/a/b/pulls", GITHUB_HEADERS, GOOD_PULL) == []
    problems = github_api.check("POST", url, headers, body)
    assert any(said in p for p in problems), problems


@pytest.mark.parametrize(
    ("method", "url", "headers", "body", "said"),
    [
        ("GET", "/api/v4/projects/15/hooks/7/events?per_page=100", {}, None, "per_page='100' is outside 1..20"),
        ("GET", "/api/v4/projects/15/hooks/7/events?since=x", {}, None, "parameter 'since' is not declared"),
        ("POST", "/api/v4/projects/15/merge_requests", {}, {"title": "t"}, "'source_branch' is missing"),
        (
            "POST",
            "/api/v4/projects/15/merge_requests",
            {},
            {"title": "t", "source_branch": "a", "target_branch": "b", "draft": True},
            "parameter 'draft' is not declared",
        ),
        ("GET", "/api/v4/projects/15", {"Authorization": "Bearer x"}, None, "header 'Authorization' is not declared"),
    ],
)
def test_the_gitlab_checker_fails_on_what_gitlabs_code_does_not_declare(gitlab_api, method, url, headers, body, said):
    problems = gitlab_api.check(method, url, {"PRIVATE-TOKEN": "x", **headers}, body)
    assert any(said in p for p in problems), problems


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"query": "query Q { issues(first: 1) { nodes { id priority2 } } }", "operationName": "Q"}, "priority2"),
        (
            {
                "query": "query Q($f: IssueFilter) { issues(filter: $f) { nodes { id } } }",
                "operationName": "Q",
                "variables": {"f": {"updatedAt": {"since": "x"}}},
            },
            "variables",
        ),
        ({"query": "query Q { viewer { id } }", "operationName": "Q", "debug": True}, "member 'debug'"),
    ],
)
def test_the_linear_checker_fails_on_what_linears_schema_does_not_declare(linear_schema, body, said):
    problems = linear_schema.check({"Authorization": "x"}, json.dumps(body))
    assert any(said in p for p in problems), problems


def test_the_discord_checker_fails_on_an_undeclared_member_or_parameter(discord_api):
    url = "/api/webhooks/1/t?wait=true"
    good = {"content": "x", "allowed_mentions": {"parse": []}}
    assert discord_api.check("POST", url, {}, good) == []
    assert discord_api.check("POST", url, {}, {**good, "allowed_mentions": {"parse": [], "everyone": True}})
    assert discord_api.check("POST", url + "&silent=1", {}, good)
