"""The layout's table in docs/development.md, executed: every module's imports, read with `ast` (those inside
functions too), against what its folder may import; the packages the wheel ships; and modules that share a name.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "development.md"
# The service's own top-level packages: what an import of ours starts with.
OURS = ("svc", "clients", "api", "jobs", "domain", "integrations", "storage", "machines", "contracts")
_ROW = re.compile(r"^\| `([a-z_]+)/` \|.*\| ([^|]+) \|$")


def allowed_imports() -> dict[str, frozenset[str]]:
    """folder -> the packages of ours it may import, read from the layout table (`everything`, `nothing of
    ours`, or a list of backticked names)."""
    allowed: dict[str, frozenset[str]] = {}
    for line in TABLE.read_text().splitlines():
        found = _ROW.match(line.strip())
        if not found or found.group(1) not in OURS:
            continue
        folder, may = found.group(1), found.group(2).strip()
        if may == "everything":
            allowed[folder] = frozenset(OURS)
        elif may.startswith("nothing, not even"):
            allowed[folder] = frozenset()  # each module stands alone (a client is copied on its own)
        elif may == "nothing of ours":
            allowed[folder] = frozenset({folder})
        else:
            allowed[folder] = frozenset({folder, *re.findall(r"`([a-z_]+)`", may)})
    return allowed


def modules() -> list[Path]:
    return sorted(path for package in OURS for path in (ROOT / package).rglob("*.py"))


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every import of ours in the module; a relative import counts as one of
    `relative` (the house writes absolute imports, so the layering reads off each line)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append((node.lineno, "relative"))
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        else:
            continue
        found += [(node.lineno, name.split(".")[0]) for name in names if name.split(".")[0] in OURS]
    return found


def third_party_imports(path: Path) -> set[str]:
    """The top-level modules the module imports from outside the standard library and the service."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {name for name in names if name not in sys.stdlib_module_names and name not in OURS}


def test_the_table_names_every_package_of_ours():
    assert set(allowed_imports()) == set(OURS)


def against_the_layering(path: Path, folder: str, allowed: dict[str, frozenset[str]]) -> list[str]:
    return [
        f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line} imports {package} "
        f"({folder}/ may import {', '.join(sorted(allowed[folder]))})"
        for line, package in imports_of(path)
        if package not in allowed[folder]
    ]


def test_no_module_imports_against_the_layering():
    allowed = allowed_imports()
    found = [v for path in modules() for v in against_the_layering(path, path.relative_to(ROOT).parts[0], allowed)]
    assert found == []


@pytest.mark.parametrize(
    ("module", "package"),
    [
        ("api/app.py", "jobs"),
        ("domain/board.py", "api"),
        ("domain/writing.py", "svc"),
        ("integrations/discord.py", "domain"),
        ("clients/notify_hook.py", "clients"),
    ],
)
def test_an_import_against_the_layering_is_caught_even_inside_a_function(tmp_path, module, package):
    planted = tmp_path / "planted.py"
    planted.write_text((ROOT / module).read_text() + f"\n\ndef later():\n    import {package}.anything\n")
    found = against_the_layering(planted, module.split("/")[0], allowed_imports())
    assert len(found) == 1 and f"imports {package} " in found[0]


def test_a_relative_import_is_caught(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text((ROOT / "api/app.py").read_text() + "\nfrom .. import jobs\n")
    found = against_the_layering(planted, "api", allowed_imports())
    assert len(found) == 1 and "imports relative " in found[0]


def test_the_clients_need_the_standard_library_and_requests_only():
    clients = sorted((ROOT / "clients").glob("*.py"))
    assert clients
    assert {str(path.relative_to(ROOT)): third_party_imports(path) - {"requests"} for path in clients} == {
        str(path.relative_to(ROOT)): set() for path in clients
    }


def test_the_wheel_ships_every_package_of_the_checkout():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for package in OURS
        for init in (ROOT / package).rglob("__init__.py")
    }
    assert found <= listed, f"packages the wheel would leave out: {sorted(found - listed)}"
    assert "svc.examples" in listed


def test_modules_that_share_a_name_are_one_idea_at_two_layers_and_say_so():
    by_name: dict[str, list[Path]] = defaultdict(list)
    for path in modules():
        if path.name != "__init__.py":
            by_name[path.name].append(path)
    silent = []
    for paths in by_name.values():
        if len(paths) < 2:
            continue
        for path in paths:
            docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
            first = docstring.split("\n\n")[0]  # the first line, as it wraps
            others = [str(other.relative_to(ROOT)) for other in paths if other != path]
            if not any(other in first for other in others):
                silent.append(f"{path.relative_to(ROOT)} does not name {' or '.join(others)} in its first line")
    assert silent == []


def test_every_module_says_what_it_is():
    missing = [str(path.relative_to(ROOT)) for path in modules() if not ast.get_docstring(ast.parse(path.read_text()))]
    assert missing == []


# -- within domain/: no cycles ---------------------------------------------------------------------------------


def domain_modules(planted: dict[str, Path] | None = None) -> dict[str, Path]:
    """domain's modules by dotted name (`domain.router.shadow`), `planted` standing in for some of them."""
    found = {}
    for path in sorted((ROOT / "domain").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {**found, **(planted or {})}


def domain_import_graph(found: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules of domain it imports (`from domain.router import scorecard` is domain.router.scorecard)."""
    graph: dict[str, set[str]] = {}
    for name, path in found.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets |= {
                    f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in found else node.module
                    for alias in node.names
                }
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
        graph[name] = {target for target in targets if target in found and target != name}
    return graph


def by_part(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same imports between domain's parts: each top-level module alone, each subpackage (`domain.router`,
    `domain.ops`) as one."""

    def part(name: str) -> str:
        return ".".join(name.split(".")[:2])

    parts: dict[str, set[str]] = defaultdict(set)
    for name, targets in graph.items():
        parts[part(name)] |= {part(target) for target in targets if part(target) != part(name)}
    return dict(parts)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every set of nodes that import each other round (the strongly connected components of more than one)."""
    order, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in order:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], order[target])
        if low[node] == order[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return found


def test_within_domain_no_module_and_no_part_imports_another_that_imports_it_back():
    graph = domain_import_graph(domain_modules())
    assert "domain.router.scorecard" in graph["domain.router.shadow"]  # the graph is read, not empty
    assert cycles(graph) == []
    assert cycles(by_part(graph)) == []


def test_a_cycle_between_the_board_and_the_router_is_caught(tmp_path):
    planted = tmp_path / "board.py"
    later = "\n\ndef later():\n    from domain.router import poller\n"
    planted.write_text((ROOT / "domain/board.py").read_text() + later)
    graph = domain_import_graph(domain_modules({"domain.board": planted}))
    (parts,) = cycles(by_part(graph))
    assert {"domain.board", "domain.router"} <= set(parts)
    (modules_round,) = cycles(graph)
    assert {"domain.board", "domain.router.poller"} <= set(modules_round)


# -- no HTTP status number in domain/ ---------------------------------------------------------------------------

# The statuses an answer of ours can carry, and the common others: none is a value in the domain, which says what
# happened and leaves the status to api/ (a docstring or a comment may still say "answered 412").
HTTP_STATUSES = frozenset(
    {200, 201, 202, 204, 301, 302, 303, 304, 307, 308, 400, 401, 403, 404, 405, 406, 409, 410, 412, 413, 415, 422}
    | {428, 429, 500, 502, 503, 504}
)
# A number among them may still be a size: as the whole value of a module constant whose name says so.
_A_SIZE = re.compile(r"^(?:[A-Z][A-Z0-9_]*_)?(BATCH|LIMIT|MAX|LISTED|SHOWN|LENGTH|SIZE)$")


def status_numbers(path: Path) -> list[str]:
    """Where the module writes an integer that is an HTTP status, other than as a size constant (`BATCH = 200`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    sizes = set()
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        if isinstance(target, ast.Name) and _A_SIZE.match(target.id) and isinstance(node.value, ast.Constant):
            sizes.add(node.value)
    return [
        f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{node.lineno}: {node.value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value in HTTP_STATUSES
        if node not in sizes
    ]


def test_no_http_status_number_in_the_domain():
    assert [found for path in sorted((ROOT / "domain").rglob("*.py")) for found in status_numbers(path)] == []


@pytest.mark.parametrize(
    ("planted", "caught"),
    [
        ("ACCEPTED, DUPLICATE, INVALID = 202, 200, 422\n", [202, 200, 422]),
        ("def answer(receipt):\n    return receipt.status == 422\n", [422]),
        ("def keep(save):\n    save(status_code=200)\n", [200]),
        ("STATUS_BATCH = (200,)\n", [200]),  # a size is one number, not a tuple of statuses
        ("BATCH = 200\nDECISIONS_LISTED: int = 500\n", []),
        ('"""Answered 412 when the tag is stale."""\n# a 409 means another writer won\n', []),
    ],
)
def test_a_status_number_is_caught_and_a_size_or_a_sentence_is_not(tmp_path, planted, caught):
    module = tmp_path / "planted.py"
    module.write_text(planted)
    assert [int(found.rsplit(": ", 1)[1]) for found in status_numbers(module)] == caught
