"""Refresh the subsets of the forges' and trackers' published API descriptions that the conformance test reads
(`tests/integrations/descriptions/`, whose README names each source and version).

    .venv/bin/python scripts/refresh_api_descriptions.py [--github FILE] [--discord FILE] [--linear FILE]
                                                         [--gitlab DIR] [--only github,discord,linear,gitlab]

Each source is read from the file given, else fetched: GitHub's description from the npm package `@octokit/openapi`
(`npm pack`, GitHub's own `rest-api-description` with Octokit's extensions), Discord's and Linear's from their
repositories (`discord/discord-api-spec` `specs/openapi.json`, `linear/linear` `packages/sdk/src/schema.graphql`),
GitLab's API code from `gitlab-org/gitlab` (`lib/api/...rb`). What is kept:
- GitHub and Discord: the operations the service calls (`OPERATIONS`), each with its parameters and request body,
  and the components they refer to, transitively; responses are left out (the test checks what is sent).
- Linear: the three operations of `integrations/linear.py` are validated against the whole schema first (the script
  fails when one is not valid), then the schema is cut to the root fields they use, the object types' fields they
  select, and every input type, enum and scalar those fields' arguments reach, whole.
- GitLab: the parameters each route used declares (`requires`/`optional`, their type and `values`), read from the
  `params do ... end` block before the route and the `use :name` helpers it names (`params :name do`).
Then `git diff tests/integrations/descriptions/` shows what the forges changed, for a person to read.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "integrations" / "descriptions"

GITHUB_PACKAGE = "@octokit/openapi"
DISCORD_URL = "https://raw.githubusercontent.com/discord/discord-api-spec/main/specs/openapi.json"
LINEAR_URL = "https://raw.githubusercontent.com/linear/linear/master/packages/sdk/src/schema.graphql"
GITLAB_RAW = "https://gitlab.com/gitlab-org/gitlab/-/raw/master/"

# (method, path) of every operation the service's clients call.
OPERATIONS = {
    "github": [
        ("get", "/repos/{owner}/{repo}/hooks/{hook_id}/deliveries"),
        ("post", "/repos/{owner}/{repo}/hooks/{hook_id}/deliveries/{delivery_id}/attempts"),
        ("get", "/orgs/{org}/hooks/{hook_id}/deliveries"),
        ("post", "/orgs/{org}/hooks/{hook_id}/deliveries/{delivery_id}/attempts"),
        ("get", "/repos/{owner}/{repo}"),
        ("get", "/repos/{owner}/{repo}/pulls"),
        ("post", "/repos/{owner}/{repo}/pulls"),
        ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
        ("get", "/user"),
    ],
    "discord": [("post", "/webhooks/{webhook_id}/{webhook_token}")],
}
# The headers GitHub's REST docs require of every request, which its description does not declare as parameters.
GITHUB_HEADERS = {
    "x-svc-headers": {
        "Authorization": "https://docs.github.com/rest/authentication/authenticating-to-the-rest-api",
        "Accept": "https://docs.github.com/rest/using-the-rest-api/getting-started-with-the-rest-api#media-types",
        "X-GitHub-Api-Version": "https://docs.github.com/rest/about-the-rest-api/api-versions",
    }
}
# GitLab: each route the service calls, the file that declares it, and the files of the helpers it uses.
GITLAB_ROUTES = [
    ("get", "/projects/:id/hooks/:hook_id/events", "lib/api/hooks/events.rb", r'get "events"'),
    ("post", "/projects/:id/hooks/:hook_id/events/:hook_log_id/resend", "lib/api/hooks/resend_hook.rb", r"resend"),
    ("get", "/projects/:id", "lib/api/projects.rb", r'get ":id"'),
    ("get", "/projects/:id/merge_requests", "lib/api/merge_requests.rb", r'get ":id/merge_requests"'),
    ("post", "/projects/:id/merge_requests", "lib/api/merge_requests.rb", r'post ":id/merge_requests"'),
    (
        "get",
        "/projects/:id/merge_requests/:merge_request_iid",
        "lib/api/merge_requests.rb",
        r"get ':id/merge_requests/:merge_request_iid'",
    ),
    (
        "post",
        "/projects/:id/merge_requests/:noteable_id/notes",
        "lib/api/notes.rb",
        r'post ":id/#\{noteables_str\}/:noteable_id/notes"',
    ),
    ("get", "/user", "lib/api/users.rb", r'get "user"|get do'),
]
GITLAB_HELPERS = ["lib/api/pagination_params.rb", "lib/api/helpers/merge_requests_helpers.rb"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--github", type=Path, help="GitHub's api.github.com.json (else npm pack @octokit/openapi)")
    parser.add_argument("--discord", type=Path, help="Discord's specs/openapi.json (else fetched)")
    parser.add_argument("--linear", type=Path, help="Linear's packages/sdk/src/schema.graphql (else fetched)")
    parser.add_argument("--gitlab", type=Path, help="a checkout of gitlab-org/gitlab (else its files are fetched)")
    parser.add_argument("--only", default="github,discord,linear,gitlab")
    args = parser.parse_args()
    wanted = set(args.only.split(","))
    if "github" in wanted:
        document, version = _github_document(args.github)
        subset = openapi_subset(document, OPERATIONS["github"], version=version)
        subset.update(GITHUB_HEADERS)
        _write(OUT / "github.json", subset)
    if "discord" in wanted:
        document = json.loads(_read(args.discord, DISCORD_URL))
        version = document["info"]["version"]
        _write(OUT / "discord.json", openapi_subset(document, OPERATIONS["discord"], version=version))
    if "linear" in wanted:
        (OUT / "linear.graphql").write_text(linear_subset(_read(args.linear, LINEAR_URL)))
        print(f"wrote {OUT / 'linear.graphql'}")
    if "gitlab" in wanted:
        checkout = args.gitlab
        _write(
            OUT / "gitlab.json",
            gitlab_subset(lambda path: _read(checkout / path if checkout else None, GITLAB_RAW + path)),
        )
    return 0


# -- OpenAPI (GitHub, Discord) ------------------------------------------------------------------------------------


def openapi_subset(document: dict[str, Any], operations: list[tuple[str, str]], *, version: str) -> dict[str, Any]:
    """The document with only `operations` (their parameters and request bodies) and the components they refer to."""
    paths: dict[str, Any] = {}
    for method, path in operations:
        item = document["paths"][path]
        kept_keys = ("operationId", "summary", "parameters", "requestBody")
        operation = {k: v for k, v in item[method].items() if k in kept_keys}
        operation.setdefault("parameters", [])
        kept = paths.setdefault(path, {})
        if "parameters" in item:
            kept["parameters"] = item["parameters"]
        kept[method] = operation
    components: dict[str, dict[str, Any]] = {}
    pending = list(_refs(paths))
    while pending:
        ref = pending.pop()
        _, _, kind, name = ref.split("/", 3)
        if name in components.get(kind, {}):
            continue
        found = document["components"][kind][name]
        components.setdefault(kind, {})[name] = found
        pending.extend(_refs(found))
    subset = {
        "openapi": document["openapi"],
        "info": {**{k: v for k, v in document["info"].items() if k in ("title", "version")}, "version": version},
        "servers": document.get("servers", []),
        "paths": paths,
        "components": {kind: dict(sorted(found.items())) for kind, found in sorted(components.items())},
    }
    schemes = document.get("components", {}).get("securitySchemes")
    if schemes:
        subset["components"]["securitySchemes"] = schemes
    return subset


def _refs(node: Any):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/components/"):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _github_document(path: Path | None) -> tuple[dict[str, Any], str]:
    if path is not None:
        document = json.loads(path.read_text())
        return document, document["info"]["version"]
    with tempfile.TemporaryDirectory() as scratch:
        packed = subprocess.run(
            ["npm", "pack", GITHUB_PACKAGE, "--silent"], cwd=scratch, check=True, capture_output=True, text=True
        ).stdout.split()[-1]
        with tarfile.open(Path(scratch) / packed) as archive:
            member = archive.extractfile("package/generated/api.github.com.json")
            document = json.loads(member.read())
    return document, document["info"]["version"]


# -- GraphQL (Linear) ---------------------------------------------------------------------------------------------


def linear_subset(sdl: str) -> str:
    """Linear's schema cut to what the service's three operations use (see the module's docstring)."""
    from graphql import (
        GraphQLEnumType,
        GraphQLInputObjectType,
        GraphQLObjectType,
        GraphQLScalarType,
        TypeInfo,
        TypeInfoVisitor,
        Visitor,
        build_schema,
        get_named_type,
        parse,
        print_type,
        validate,
        visit,
    )

    from integrations import linear

    schema = build_schema(sdl)
    operations = [linear.ISSUE_WITH_COMPLETED_STATES, linear.SET_ISSUE_STATE, linear.ISSUES_UPDATED_SINCE]
    used: dict[str, set[str]] = {}
    for text in operations:
        document = parse(text)
        errors = validate(schema, document)
        if errors:
            raise SystemExit(f"an operation of integrations/linear.py is not valid against Linear's schema: {errors}")
        info = TypeInfo(schema)

        class Fields(Visitor):
            def enter_field(self, node, *_, info=info):
                parent = info.get_parent_type()
                if parent is not None:
                    used.setdefault(parent.name, set()).add(node.name.value)

        visit(document, TypeInfoVisitor(info, Fields()))
    keep: dict[str, str] = {}
    inputs: list[Any] = []
    for type_name, fields in sorted(used.items()):
        owner = schema.get_type(type_name)
        kept_fields = {name: field for name, field in owner.fields.items() if name in fields}
        for field in kept_fields.values():
            inputs.extend(get_named_type(arg.type) for arg in field.args.values())
            named = get_named_type(field.type)
            if isinstance(named, GraphQLEnumType | GraphQLScalarType):
                inputs.append(named)
        cut = GraphQLObjectType(type_name, fields=kept_fields, description=owner.description)
        keep[type_name] = print_type(cut)
    while inputs:
        named = inputs.pop()
        if named.name in keep or named.name in ("String", "Int", "Float", "Boolean", "ID"):
            continue
        keep[named.name] = print_type(named)
        if isinstance(named, GraphQLInputObjectType):
            inputs.extend(get_named_type(field.type) for field in named.fields.values())
    header = "# Linear's SDK schema (linear/linear, packages/sdk/src/schema.graphql), cut to what the service uses\n"
    roots = "schema {\n  query: Query\n  mutation: Mutation\n}\n"
    return header + roots + "\n" + "\n\n".join(keep[k] for k in sorted(keep)) + "\n"


# -- GitLab's API code --------------------------------------------------------------------------------------------

_PARAM = re.compile(r"^\s*(requires|optional)\s+:(\w+)(.*)$")
_BLOCK = re.compile(r"^\s*params\s+:(\w+)\s+do\b")
_USE = re.compile(r"^\s*use\s+:(\w+)")
_VALUES_RANGE = re.compile(r"values:\s*(\d+)\.\.(\d+)")
_VALUES_WORDS = re.compile(r"values:\s*%w\[([^\]]*)\]")
_TYPE = re.compile(r"\btypes?:\s*(\[[^\]]*\]|[\w:]+(?:\[\w+\])?)")


def gitlab_subset(read: Callable[[str], str]) -> dict[str, Any]:
    """Each route of `GITLAB_ROUTES` with the parameters GitLab's code declares for it."""
    helpers: dict[str, list[str]] = {}
    texts = {path: read(path) for path in {*GITLAB_HELPERS, *(r[2] for r in GITLAB_ROUTES)}}
    for text in texts.values():
        helpers.update(_named_blocks(text.splitlines()))
    operations = []
    for method, path, source, route in GITLAB_ROUTES:
        lines = texts[source].splitlines()
        at = next(i for i, line in enumerate(lines) if re.search(route, line))
        block = _block_before(lines, at)
        params = _params(block, helpers, set())
        for name in re.findall(r":(\w+)", path):
            params.setdefault(name, {"type": "String", "in": "path", "required": True})
            params[name]["in"] = "path"
        operations.append({"method": method.upper(), "path": path, "source": source, "params": params})
    return {
        "source": "gitlab-org/gitlab, the Grape declarations of lib/api (master)",
        "x-svc-headers": {"PRIVATE-TOKEN": "https://docs.gitlab.com/api/rest/authentication/"},
        "operations": operations,
    }


def _named_blocks(lines: list[str]) -> dict[str, list[str]]:
    found = {}
    for i, line in enumerate(lines):
        named = _BLOCK.match(line)
        if named:
            found[named.group(1)] = _until_end(lines, i)
    return found


def _until_end(lines: list[str], start: int) -> list[str]:
    depth, body = 0, []
    for line in lines[start:]:
        depth += len(re.findall(r"\bdo\b(\s*\|[^|]*\|)?\s*$", line)) - len(re.findall(r"^\s*end\b", line))
        body.append(line)
        if depth <= 0:
            break
    return body[1:-1]


def _block_before(lines: list[str], route_at: int) -> list[str]:
    for i in range(route_at - 1, -1, -1):
        if re.match(r"^\s*(get|post|put|delete|patch)\b", lines[i]):
            return []
        if re.match(r"^\s*params do\b", lines[i]):
            return _until_end(lines, i)
    return []


def _statements(block: list[str]) -> list[str]:
    """The block's lines with each declaration's continuation lines (`type:` or `values:` on the next lines) joined."""
    joined: list[str] = []
    for line in block:
        starts = re.match(r"^\s*(requires|optional|use|end|mutually_exclusive|at_least_one_of|exactly_one_of)\b", line)
        if joined and not starts and line.strip() and not joined[-1].rstrip().endswith((" do", "do |options|")):
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    return joined


def _params(block: list[str], helpers: dict[str, list[str]], seen: set[str]) -> dict[str, Any]:
    """The parameters a block declares, its `use :name` helpers' included; the first declaration of a name stands
    (GitLab's `per_page` with `values: 1..20` before `use :pagination`), nested `do ... end` blocks are skipped."""
    params: dict[str, Any] = {}
    depth = 0
    for line in _statements(block):
        if depth == 0:
            used = _USE.match(line)
            if used and used.group(1) in helpers and used.group(1) not in seen:
                for name, param in _params(helpers[used.group(1)], helpers, seen | {used.group(1)}).items():
                    params.setdefault(name, param)
            declared = _PARAM.match(line)
            if declared and declared.group(2) not in params:
                rest = declared.group(3)
                param: dict[str, Any] = {"required": declared.group(1) == "requires"}
                kind = _TYPE.search(rest)
                if kind:
                    param["type"] = kind.group(1).replace("Grape::API::", "")
                ranged, words = _VALUES_RANGE.search(rest), _VALUES_WORDS.search(rest)
                if ranged:
                    param["range"] = [int(ranged.group(1)), int(ranged.group(2))]
                elif words:
                    param["values"] = words.group(1).split()
                params[declared.group(2)] = param
        depth += len(re.findall(r"\bdo\b\s*$", line)) - len(re.findall(r"^\s*end\b", line))
    return params


# -- reading and writing ------------------------------------------------------------------------------------------


def _read(path: Path | None, url: str) -> str:
    if path is not None:
        return path.read_text()
    with urllib.request.urlopen(url, timeout=60) as answer:  # noqa: S310 (a fixed https URL)
        return answer.read().decode()


def _write(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
