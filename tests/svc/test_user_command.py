"""`svc user add|passwd|role|remove|list`, run in this process (`svc.cli.main`) with the password on a standard input
of the test's and the output captured: what each command changes and says, and every refusal, one line that says why
and changes nothing. tests/end_to_end/test_accounts_processes.py runs the installed `svc user` as a script does (the
password piped in, the exit codes) and what servers make of it."""

from __future__ import annotations

import io

import pytest

from svc.cli import main

from conftest import CHEAP_PASSWORD_HASHING

SERVER_ENV = {
    "SVC_BASIC_AUTH": "admin:correct-horse-battery",
    "SVC_CI_WEBHOOK_SECRET": "user-test-ci-secret-0123456789",
}


@pytest.fixture
def svc_user(monkeypatch, capsys, tmp_path, database_url):
    """`svc user ARGS...` in this process: (exit code, standard output, standard error). The password, when given, is
    the one line of a standard input that is not a terminal, as when a script pipes it."""
    from storage import db as storage_db

    for name, value in {**CHEAP_PASSWORD_HASHING, **SERVER_ENV}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SVC_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DATABASE_URL", database_url)

    def run(*args: str, password: str | None = None, database: str | None = None) -> tuple[int, str, str]:
        if database is not None:
            monkeypatch.setenv("DATABASE_URL", database)
        monkeypatch.setattr("sys.stdin", io.StringIO("" if password is None else password + "\n"))
        try:
            code = main(["user", *args])
        except SystemExit as exc:  # argparse refusing the command line
            code = exc.code
        finally:
            close(storage_db.db.obj)
        out, err = capsys.readouterr()
        return code, out, err

    return run


def close(database) -> None:
    if database is not None:
        database.close_all() if hasattr(database, "close_all") else database.close()


def listed(svc_user) -> list[tuple[str, str]]:
    code, out, err = svc_user("list")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["name", "role"] and "bootstrap operator 'admin'" in lines[-1]
    return [tuple(line.split()[:2]) for line in lines[1:-1]]


def test_each_command_changes_what_it_says(svc_user):
    code, out, _ = svc_user("list")
    assert code == 0 and out.startswith("svc user: no accounts yet; add one with: svc user add NAME --role")
    code, out, err = svc_user("add", "alice", "--role", "operator", password="alice-password-1")
    assert (code, err) == (0, "") and out.startswith("svc user: added alice (operator")
    assert svc_user("add", "bob", "--role", "viewer", password="bob-password-12")[0] == 0
    assert listed(svc_user) == [("alice", "operator"), ("bob", "viewer")]

    code, out, _ = svc_user("passwd", "alice", password="alice-password-2")
    assert code == 0 and "changed the password of alice" in out
    code, out, _ = svc_user("role", "bob", "operator")
    assert code == 0 and out.startswith("svc user: bob is now operator")
    assert listed(svc_user) == [("alice", "operator"), ("bob", "operator")]
    code, out, _ = svc_user("remove", "bob")
    assert code == 0 and "removed bob" in out
    assert listed(svc_user) == [("alice", "operator")]


@pytest.mark.parametrize(
    ("args", "password", "reason"),
    [
        (("add", "alice", "--role", "viewer"), "whatever-123", "exists already"),
        (("add", "carol", "--role", "viewer"), "short", "at least 8 characters"),
        (("add", "carol", "--role", "viewer"), "", "no password was given on standard input"),
        (("add", "carol", "--role", "viewer"), None, "no password was given on standard input"),
        (("add", "Carol Smith", "--role", "viewer"), "carol-password", "cannot be an account name"),
        (("add", "ci", "--role", "viewer"), "carol-password", "built-in credentials"),
        (("add", "admin", "--role", "viewer"), "carol-password", "built-in credentials"),  # the bootstrap user
        # A name that would read as a machine's or the bootstrap user's once its trailing line break is lost in a
        # page or a terminal ("by ci").
        (("add", "ci\n", "--role", "operator"), "carol-password", "cannot be an account name"),
        (("add", "admin\n", "--role", "operator"), "carol-password", "cannot be an account name"),
        (("passwd", "carol"), "carol-password", "no account called 'carol'"),
        (("passwd", "alice"), "short", "at least 8 characters"),
        (("role", "carol", "operator"), None, "no account called 'carol'"),
        (("remove", "carol"), None, "no account called 'carol'"),
    ],
)
def test_a_refusal_is_one_line_saying_why_and_nothing_changes(svc_user, args, password, reason):
    assert svc_user("add", "alice", "--role", "operator", password="alice-password-1")[0] == 0
    code, out, err = svc_user(*args, password=password)
    assert (code, out) == (1, ""), (args, out, err)
    assert err.startswith("svc user: ") and reason in err and err.count("\n") == 1, err
    assert listed(svc_user) == [("alice", "operator")]


def test_a_password_is_never_taken_from_the_command_line(svc_user):
    """There is no way to give it there: it would stay in the shell's history and in every `ps`."""
    code, _, err = svc_user("add", "carol", "--role", "viewer", "--password", "carol-password")
    assert code == 2 and "unrecognized arguments: --password carol-password" in err
    assert svc_user("list")[1].startswith("svc user: no accounts yet")


def test_the_user_commands_say_plainly_when_the_database_cannot_be_used(svc_user, tmp_path):
    (tmp_path / "a-directory").mkdir()
    for database, described in [
        ("postgresql://svc@127.0.0.1:1/svc", "PostgreSQL at 127.0.0.1:1/svc"),  # nothing listens on port 1
        (f"sqlite:///{tmp_path / 'a-directory'}", f"SQLite at {tmp_path / 'a-directory'}"),
    ]:
        for args, password in [(("list",), None), (("add", "alice", "--role", "viewer"), "alice-password-1")]:
            code, out, err = svc_user(*args, password=password, database=database)
            assert code == 1, (database, args, out, err)
            assert err.startswith(f"svc user: cannot use the database ({described}): "), err
            assert "Traceback" not in err and "alice-password-1" not in err


def test_svc_user_add_gives_a_worker_its_bay_and_refuses_a_control_character_in_a_name_or_a_bay(svc_user):
    code, out, err = svc_user("add", "runner", "--role", "worker", "--bay", "bay-9", password="pass-word-1")
    assert code == 0, err
    assert out.startswith("svc user: added runner (worker, in bay bay-9:")
    code, out, _ = svc_user("add", "bay-1", "--role", "worker", password="pass-word-1")
    assert out.startswith("svc user: added bay-1 (worker, in bay bay-1:")
    for refused in (
        ("add", "nl\n", "--role", "worker"),
        ("add", "nl", "--role", "worker", "--bay", "bay-2\n"),
        ("add", "nl", "--role", "worker", "--bay", "bay 2"),
        ("add", "ada", "--role", "viewer", "--bay", "bay-3"),
        ("add", "ada@home", "--role", "worker"),  # a worker named so needs a bay: "@" is no bay's
    ):
        code, _, err = svc_user(*refused, password="pass-word-1")
        assert code == 1 and err.startswith("svc user: "), (refused, err)
    code, out, _ = svc_user("list")
    lines = out.splitlines()
    assert [line.split()[:3] for line in lines[1:-1]] == [["bay-1", "worker", "bay-1"], ["runner", "worker", "bay-9"]]
