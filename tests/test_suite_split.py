"""The suite's split between the backends stays honest. `make test` runs every test on SQLite, then on PostgreSQL only
those marked `both_backends` (tests/conftest.py): a storage test left unmarked would never meet PostgreSQL, and a
test that can run on PostgreSQL alone (it skips on SQLite) would run nowhere at all. Read from the test modules'
source, so a new module is held to it the day it is added."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
MARK = "both_backends"
# What a condition on the backend reads; a condition that names none of these is not about the backend.
BACKEND_WORDS = ("is_postgres", "BACKEND", "sqlite", "postgres", "SVC_TEST_DATABASE")


def suite_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def marks_the_module(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        and MARK in ast.unparse(node.value)
        for node in tree.body
    )


def marked(function: ast.FunctionDef) -> bool:
    return any(MARK in ast.unparse(decorator) for decorator in function.decorator_list)


class _OnSQLite:
    """What a backend condition reads, as it reads on a SQLite run: no PostgreSQL anywhere."""

    environ: dict[str, str] = {}

    def is_postgres(self) -> bool:
        return False

    def __getattr__(self, name: str) -> _OnSQLite:
        return self


def skips_on_sqlite(condition: ast.expr) -> bool:
    """Whether `condition` (of a skip) holds on a SQLite run; one it cannot tell counts as holding."""
    source = ast.unparse(condition)
    if not any(word in source for word in BACKEND_WORDS):
        return False
    on_sqlite = _OnSQLite()
    names = {
        "BACKEND": "sqlite",
        "is_postgres": on_sqlite.is_postgres,
        "os": on_sqlite,
        "__import__": lambda _: on_sqlite,
    }
    try:
        return bool(eval(source, {"__builtins__": {}}, _Names(names, on_sqlite)))  # noqa: S307 (our own test files)
    except Exception:
        return True


class _Names(dict):
    def __init__(self, names: dict, fallback: _OnSQLite):
        super().__init__(names)
        self.fallback = fallback

    def __missing__(self, name: str):
        return self.fallback


def skip_conditions(function: ast.FunctionDef) -> list[ast.expr]:
    """The conditions under which `function` skips: its `skipif` marks, and each `if` around a `pytest.skip(...)`."""
    found = [
        decorator.args[0]
        for decorator in function.decorator_list
        if isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith("skipif") and decorator.args
    ]
    for node in ast.walk(function):
        if isinstance(node, ast.If) and any(
            isinstance(inner, ast.Call) and ast.unparse(inner.func) == "pytest.skip"
            for statement in node.body
            for inner in ast.walk(statement)
        ):
            found.append(node.test)
    return found


def module_skip_conditions(tree: ast.Module) -> list[ast.expr]:
    return [
        call.args[0]
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        for call in ast.walk(node.value)
        if isinstance(call, ast.Call) and ast.unparse(call.func).endswith("skipif") and call.args
    ]


def run_nowhere(source: str, where: str) -> list[str]:
    """The tests of the module `source` (at `where`) that skip on SQLite and are not marked to run on PostgreSQL."""
    tree = ast.parse(source, filename=where)
    if marks_the_module(tree):
        return []
    found = [f"{where} (the module)" for c in module_skip_conditions(tree) if skips_on_sqlite(c)]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef)
            and node.name.startswith("test_")
            and not marked(node)
            and any(skips_on_sqlite(condition) for condition in skip_conditions(node))
        ):
            found.append(f"{where}::{node.name}")
    return found


def test_every_storage_module_is_marked_to_run_on_both_backends():
    """`tests/storage/` tests what each backend does with the same models and SQL: every module of it runs on both."""
    unmarked = [
        str(path.relative_to(TESTS.parent))
        for path in suite_modules()
        if path.is_relative_to(TESTS / "storage") and not marks_the_module(ast.parse(path.read_text()))
    ]
    assert unmarked == [], f"add `pytestmark = pytest.mark.{MARK}` to each"


def test_a_test_that_skips_on_sqlite_is_marked_to_run_on_postgresql():
    """Otherwise it runs on neither: skipped on SQLite, deselected from `make test`'s PostgreSQL pass."""
    found = [
        test for path in suite_modules() for test in run_nowhere(path.read_text(), str(path.relative_to(TESTS.parent)))
    ]
    assert found == [], f"mark each @pytest.mark.{MARK}"


@pytest.mark.parametrize(
    ("source", "nowhere"),
    [
        ("def test_a(app):\n    if not is_postgres():\n        pytest.skip('row locks')\n", True),
        ("def test_a(app):\n    if not storage_db.is_postgres():\n        pytest.skip('row locks')\n", True),
        ("@pytest.mark.skipif(BACKEND == 'sqlite', reason='x')\ndef test_a(app):\n    pass\n", True),
        ("@pytest.mark.both_backends\ndef test_a(app):\n    if not is_postgres():\n        pytest.skip('x')\n", False),
        (
            "pytestmark = pytest.mark.both_backends\n"
            "def test_a(app):\n    if not is_postgres():\n        pytest.skip('x')\n",
            False,
        ),
        # SQLite-only tests run on SQLite: nothing to mark.
        ("def test_a(app):\n    if storage_db.is_postgres():\n        pytest.skip('SQLite settings')\n", False),
        ("def test_a(tmp_path):\n    if BACKEND != 'sqlite':\n        pytest.skip('copies SQLite')\n", False),
        (
            "pytestmark = pytest.mark.skipif(__import__('os').environ.get('SVC_TEST_DATABASE', 'sqlite') != 'sqlite',"
            " reason='x')\ndef test_a(app):\n    pass\n",
            False,
        ),
        # A skip that is not about the backend.
        ("def test_a(app):\n    if not shutil.which('make'):\n        pytest.skip('no make')\n", False),
    ],
)
def test_the_scan_finds_a_test_that_would_run_nowhere(source, nowhere):
    found = run_nowhere(source, "tests/test_planted.py")
    assert bool(found) == nowhere, found
