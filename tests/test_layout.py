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
    """domain's modules by dotted name (`domain.router.routing`), `planted` standing in for some of them."""
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
    assert "domain.router.scorecard" in graph["domain.router.routing"]  # the graph is read, not empty
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


# -- no peewee internals ---------------------------------------------------------------------------------------------

# peewee's own double-underscore names (from its source): its instances' row data and relations, the way it builds
# an instance without defaults, the context that turns driver errors into its own, its SQL hook. None is documented;
# the project uses what is (`Model._meta`, the query builder, `Database.execute_sql`, `atomic`).
PEEWEE_INTERNALS = (
    "__data__",
    "__rel__",
    "__no_default__",
    "__exception_wrapper__",
    "__sql__",
    "__bind_database__",
    "__scope_context__",
    "__sql_selection__",
    "__compound_select__",
    "__composite_key__",
)
_INTERNAL = re.compile("|".join(re.escape(name) for name in PEEWEE_INTERNALS))


def peewee_internals_in(path: Path) -> list[str]:
    return [
        f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{number} uses {found.group()}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for found in _INTERNAL.finditer(line)
    ]


def files_of_ours() -> list[Path]:
    """Every Python file of the checkout, the tests, the benchmarks and the scripts included."""
    skipped = {".venv", "build", "node_modules"}
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if not skipped & set(path.relative_to(ROOT).parts) and not path.relative_to(ROOT).parts[0].startswith(".")
    )


def test_the_internals_listed_are_peewee_s_own():
    import peewee

    source = Path(peewee.__file__).read_text()
    assert [name for name in PEEWEE_INTERNALS if name not in source] == []


def test_no_file_of_ours_uses_peewee_internals():
    """No double-underscore name of peewee's appears anywhere in our Python, comments included (this file names them
    to look for them)."""
    found = [hit for path in files_of_ours() if path != Path(__file__) for hit in peewee_internals_in(path)]
    assert found == []


@pytest.mark.parametrize(
    "line",
    [
        "row.__data__['stage'] = 'done'",
        "instance = Ticket(__no_default__=True)",
        "from peewee import __exception_wrapper__",
        "known = dict(row.__data__)  # the row as read",
    ],
)
def test_a_peewee_internal_is_caught(tmp_path, line):
    planted = tmp_path / "planted.py"
    planted.write_text((ROOT / "storage/statements.py").read_text() + f"\n{line}\n")
    found = peewee_internals_in(planted)
    assert len(found) == 1 and found[0].startswith(f"{planted}:")


# -- no module-level cache outside storage/ -----------------------------------------------------------------------

_CONTAINERS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "WeakValueDictionary"}
_MUTATORS = {
    "clear",
    "pop",
    "popitem",
    "update",
    "setdefault",
    "append",
    "appendleft",
    "extend",
    "insert",
    "remove",
    "discard",
    "add",
    "move_to_end",
}
_MEMOS = {"cache", "lru_cache"}

# Module-level state outside storage/ that functions change, and why it is not a cache a writer can fool.
STATE = {
    ("svc/cli.py", "COMMANDS"): "the sub-commands, registered by `@command` as the module is imported",
}
# `functools.cache`/`lru_cache` with arguments outside storage/, and why every argument is a declaration.
MEMOS = {
    ("contracts/__init__.py", "load"): "the name of a schema file shipped in the package",
    ("contracts/__init__.py", "compiled"): "the name of a schema file shipped in the package",
    ("contracts/__init__.py", "validator"): "the name of a schema file shipped in the package",
    ("machines/ticket.py", "_menu"): "a stage of the ticket machine's own declaration",
    ("api/proxies.py", "__init__"): "a peer address, judged against the trusted networks the app was built with",
}


def _name(node: ast.AST) -> str | None:
    """`x` for a name, `C.x` for an attribute of a name (`self.x` and `cls.x` as `self.x`, `cls.x`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _is_container(value: ast.AST | None) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    if isinstance(value, ast.Call):
        return _name(value.func) in _CONTAINERS or (
            isinstance(value.func, ast.Attribute) and value.func.attr in _CONTAINERS
        )
    return False


def _assignments(body: list[ast.stmt]) -> list[tuple[str, ast.AST | None]]:
    found = []
    for node in body:
        if isinstance(node, ast.Assign):
            found += [(target.id, node.value) for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.append((node.target.id, node.value))
    return found


def caches_in(path: Path) -> list[tuple[int, str, str]]:
    """(line, name, how) of every place a function changes state the module holds: a module-level or class-level
    dict/list/set changed by item or by a mutating method, a module name rebound through `global`, a class
    attribute rebound at run time; and every `functools.cache`/`lru_cache` whose function takes arguments."""
    tree = ast.parse(path.read_text(), filename=str(path))
    containers = {name for name, value in _assignments(tree.body) if _is_container(value)}
    attributes: set[str] = set()  # class attributes, as `Class.attr`
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for name, value in _assignments(node.body):
                attributes.add(f"{node.name}.{name}")
                if _is_container(value):
                    containers |= {f"{node.name}.{name}", f"self.{name}", f"cls.{name}"}
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Global):
                found += [(node.lineno, name, "rebound through global") for name in node.names]
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
                for target in node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]:
                    if isinstance(target, ast.Subscript) and _name(target.value) in containers:
                        found.append((node.lineno, _name(target.value), "changed by item"))
                    elif isinstance(target, ast.Attribute) and _name(target) in attributes:
                        found.append((node.lineno, _name(target), "class attribute rebound"))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATORS
                and _name(node.func.value) in containers
            ):
                found.append((node.lineno, _name(node.func.value), f".{node.func.attr}()"))
        for decorator in function.decorator_list:
            memo = decorator.func if isinstance(decorator, ast.Call) else decorator
            arguments = function.args
            if (_name(memo) or "").split(".")[-1] in _MEMOS and (
                arguments.args or arguments.posonlyargs or arguments.kwonlyargs or arguments.vararg
            ):
                found.append((function.lineno, function.name, "memo with arguments"))
        for node in ast.walk(function):
            # A memo made by calling it on a function (`lru_cache(maxsize=...)(self.method)`): named by where it is.
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Call)
                and (_name(node.func.func) or "").split(".")[-1] in _MEMOS
            ):
                found.append((node.lineno, function.name, "memo with arguments"))
    return sorted(set(found))


def caches_outside_storage(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        if where.startswith("storage/"):
            continue
        for line, name, how in caches_in(path):
            known = MEMOS if how == "memo with arguments" else STATE
            if (where, name.split(".")[-1] if how == "memo with arguments" else name) not in known:
                found.append(f"{where}:{line} {name}: {how}")
    return found


def test_no_module_level_cache_outside_storage():
    """State a module keeps and its functions change is a cache a second writer can fool: it may live only in
    `storage/`, scoped to one unit of work and dropped on rollback (or derived from the models alone). A memo of
    what derives once from a declaration cannot go stale: `functools.cache` on a function without arguments (the
    machines' tables, the OpenAPI document's components, the templates' environment) is one; one with arguments
    must be in MEMOS, saying why its arguments are declarations; other module state changed at run time must be in
    STATE, saying why it is no cache. Instances (a resource's remembered credentials) are outside this test."""
    assert caches_outside_storage([path for path in modules()]) == []


def test_the_exceptions_are_still_where_they_say():
    """Each entry of STATE and MEMOS names something the scan still finds, so none outlives its reason."""
    found = {
        (str(path.relative_to(ROOT)), name if how != "memo with arguments" else name.split(".")[-1])
        for path in modules()
        for _, name, how in caches_in(path)
    }
    assert set(STATE) - found == set()
    assert set(MEMOS) - found == set()


@pytest.mark.parametrize(
    ("planted", "name"),
    [
        ("_seen: dict[int, str] = {}\n\ndef shown(key):\n    _seen[key] = str(key)\n", "_seen"),
        ("_rows = {}\n\ndef forget():\n    _rows.clear()\n", "_rows"),
        ("_last = None\n\ndef remember(value):\n    global _last\n    _last = value\n", "_last"),
        (
            "class Field:\n    _last = (None, None)\n\n    def convert(self, v):\n        Field._last = (v, v)\n",
            "Field._last",
        ),
        ("class Seen:\n    keys = set()\n\n    def see(self, key):\n        self.keys.add(key)\n", "self.keys"),
        ("import functools\n\n@functools.lru_cache(maxsize=64)\ndef shown(moment):\n    return f'{moment}'\n", "shown"),
        ("from functools import cache\n\n@cache\ndef read(key):\n    return key\n", "read"),
    ],
)
def test_a_cache_outside_storage_is_caught(tmp_path, planted, name):
    module = tmp_path / "planted.py"
    module.write_text(f'"""A planted module."""\n\n{planted}')
    found = caches_outside_storage([module])
    assert len(found) == 1 and f" {name}: " in found[0]


@pytest.mark.parametrize(
    "planted",
    [
        "_TABLE = {'a': 1}\n\ndef look(key):\n    return _TABLE.get(key)\n",
        "import functools\n\n@functools.cache\ndef document():\n    return {'openapi': '3.1.0'}\n",
        "def fresh():\n    found = {}\n    found['a'] = 1\n    return found\n",
    ],
)
def test_a_constant_a_memo_of_nothing_and_a_local_are_not_caches(tmp_path, planted):
    module = tmp_path / "planted.py"
    module.write_text(f'"""A planted module."""\n\n{planted}')
    assert caches_outside_storage([module]) == []
