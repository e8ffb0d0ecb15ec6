"""SQLite's group commit: units of work from many threads share commits; none is answered before its commit,
and a unit that fails takes only itself back."""

import threading

import pytest

from storage import db as storage_db
from storage.db import connection, transaction, write
from storage.models import Setting

from processes import wait_until

pytestmark = [
    pytest.mark.both_backends,
    pytest.mark.skipif(
        __import__("os").environ.get("SVC_TEST_DATABASE", "sqlite") != "sqlite",
        reason="group commit is SQLite's; PostgreSQL groups commits itself",
    ),
]


def until(condition, what: str) -> None:
    wait_until(condition, timeout=10, interval=0.001, what=what)


def queued() -> int:
    group = storage_db._group
    return group._queue.qsize() if group is not None else 0


def put(key: str):
    def unit():
        with transaction():
            Setting.insert(key=key, value={"v": key}, updated_at="2026-11-20 10:00:00").execute()
            return key

    return unit


def stored() -> set[str]:
    with connection():
        return {row.key for row in Setting.select(Setting.key)}


def test_units_from_many_threads_share_commits(app):
    commits: list[str] = []
    gate, gate_reached = threading.Event(), threading.Event()

    def first():
        # On the writer thread: count the COMMITs its connection sends, then hold the writer while others queue.
        storage_db.db.connection().set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
        gate_reached.set()
        gate.wait(10)
        return "first"

    results: list[str] = []
    starter = threading.Thread(target=lambda: results.append(write(first)))
    starter.start()
    until(lambda: gate_reached.is_set(), "the writer to hold")
    waiting = [threading.Thread(target=lambda n=n: results.append(write(put(f"k{n}")))) for n in range(20)]
    for thread in waiting:
        thread.start()
    until(lambda: queued() == 20, "all twenty queued behind the held writer")
    gate.set()
    for thread in [starter, *waiting]:
        thread.join(10)
    assert sorted(results) == sorted(["first", *(f"k{n}" for n in range(20))])
    assert stored() == {f"k{n}" for n in range(20)}
    assert 1 <= len(commits) <= 3  # twenty-one units, a commit or two, not twenty-one


def test_a_failing_unit_takes_only_itself_back(app):
    def broken():
        with transaction():
            Setting.insert(key="broken", value={}, updated_at="2026-11-20 10:00:00").execute()
            raise ValueError("the unit's own bug")

    assert write(put("before")) == "before"
    with pytest.raises(ValueError, match="own bug"):
        write(broken)
    assert write(put("after")) == "after"
    assert stored() == {"before", "after"}


def _batch(units: dict) -> dict[str, object]:
    """Run `units` (name: fn) as one batch: the first holds the writer until the others are queued behind it."""
    gate, holding = threading.Event(), threading.Event()
    outcomes: dict[str, object] = {}
    (first_name, first_fn), *rest = units.items()

    def held():
        holding.set()
        gate.wait(10)
        return first_fn()

    def run(name, fn):
        try:
            outcomes[name] = write(fn)
        except Exception as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=run, args=(first_name, held))]
    threads[0].start()
    until(holding.is_set, "the writer to hold the first unit")
    for n, (name, fn) in enumerate(rest, start=1):
        threads.append(threading.Thread(target=run, args=(name, fn)))
        threads[-1].start()
        until(lambda n=n: queued() == n, f"unit {name} queued")
    gate.set()
    for thread in threads:
        thread.join(10)
    return outcomes


def broken(key: str):
    def unit():
        with transaction():
            Setting.insert(key=key, value={}, updated_at="2026-11-20 10:00:00").execute()
            raise ValueError(f"{key}: the unit's own bug")

    return unit


def test_a_failing_unit_inside_a_batch_takes_only_itself_back(app):
    outcomes = _batch({"a": put("a"), "b": broken("b"), "c": put("c")})
    assert outcomes["a"] == "a" and outcomes["c"] == "c"
    assert isinstance(outcomes["b"], ValueError)
    assert stored() == {"a", "c"}


def test_the_first_unit_of_a_batch_failing_takes_only_itself_back(app):
    # The first unit runs without a savepoint: its failure rolls the (otherwise empty) transaction back and
    # begins a new one for the units queued behind it.
    outcomes = _batch({"a": broken("a"), "b": put("b"), "c": broken("c"), "d": put("d")})
    assert isinstance(outcomes["a"], ValueError) and isinstance(outcomes["c"], ValueError)
    assert outcomes["b"] == "b" and outcomes["d"] == "d"
    assert stored() == {"b", "d"}
    assert write(put("after")) == "after"


def test_a_retried_attempt_leaves_nothing_of_the_attempt_before(app):
    from domain import units

    attempts: list[str] = []

    def retried(prefix: str):
        def work():
            attempts.append(prefix)
            tried = attempts.count(prefix)
            Setting.insert(key=f"{prefix}{tried}", value={}, updated_at="2026-11-20 10:00:00").execute()
            if tried == 1:
                raise units.StaleRead("lost the compare-and-swap")
            return "done"

        return lambda: units.run(work)

    # first in its batch (no savepoint), then behind another unit (a savepoint)
    outcomes = _batch({"first": retried("first"), "second": put("second")})
    assert outcomes == {"first": "done", "second": "second"}
    outcomes = _batch({"zero": put("zero"), "later": retried("later")})
    assert outcomes == {"zero": "zero", "later": "done"}
    assert stored() == {"first2", "second", "zero", "later2"}


def test_a_transaction_sqlite_ended_fails_every_unit_of_its_batch(app):
    gate, holding = threading.Event(), threading.Event()
    outcomes: dict[str, object] = {}

    def hold():
        holding.set()
        gate.wait(10)
        with transaction():
            Setting.insert(key="held", value={}, updated_at="2026-11-20 10:00:00").execute()
        return "held"

    def ends_the_transaction():
        storage_db.db.execute_sql("ROLLBACK")  # what SQLite does itself on a full disk or an I/O error
        raise OSError("disk full")

    def run(name, fn):
        try:
            outcomes[name] = write(fn)
        except Exception as exc:
            outcomes[name] = exc

    first = threading.Thread(target=run, args=("held", hold))
    first.start()
    until(holding.is_set, "the writer to hold the first unit")
    second = threading.Thread(target=run, args=("lost", ends_the_transaction))
    third = threading.Thread(target=run, args=("later", put("later")))
    second.start()
    until(lambda: queued() == 1, "the second unit queued")
    third.start()
    until(lambda: queued() == 2, "the third unit queued")
    gate.set()
    for thread in (first, second, third):
        thread.join(10)
    # "lost" and "later" were queued while "held" ran, so they joined its commit, which SQLite ended: none of
    # the three is answered as written (none was), and nothing of them was stored.
    assert all(isinstance(outcomes[name], Exception) for name in ("held", "lost", "later")), outcomes
    assert stored() == set()
    assert write(put("after")) == "after"  # the writer carries on with a fresh transaction


def test_rebinding_ends_the_old_writer_and_writes_go_to_the_new_database(app, tmp_path):
    write(put("old"))
    old_writer = storage_db._group.thread
    fresh = storage_db.open_database(f"sqlite:///{tmp_path / 'other.sqlite3'}")
    storage_db.bind(fresh)
    assert not old_writer.is_alive()
    from storage import migrations

    migrations.migrate()
    assert write(put("new")) == "new"
    assert stored() == {"new"}
