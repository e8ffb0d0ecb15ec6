"""People's accounts as a team uses them: `svc user ...` with the password piped in, and what two `svc serve`
processes on one database make of an account being added, given a new password, and removed. Each command's
effects and refusals are tested in-process (tests/svc/test_user_command.py)."""

import base64
import json

import pytest
import requests

from processes import start_service, svc_user, wait_until

pytestmark = pytest.mark.process

BOOTSTRAP = ("admin", "correct-horse-battery")
CI = "accounts-test-ci-secret-0123456789"
SERVER_ENV = {"SVC_BASIC_AUTH": ":".join(BOOTSTRAP), "SVC_CI_WEBHOOK_SECRET": CI}


def listed(tmp_path, database_url) -> list[tuple[str, str]]:
    shown = svc_user(tmp_path, database_url, "list", **SERVER_ENV)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:2] == ["name", "role"] and "bootstrap operator 'admin'" in lines[-1]
    return [tuple(line.split()[:2]) for line in lines[1:-1]]


def test_the_user_commands_as_a_script_runs_them(tmp_path, database_url):
    """The installed `svc user` with the password piped in: what it says on which stream, and its exit codes. What
    each command does and each refusal are tests/svc/test_user_command.py's, in-process."""
    added = svc_user(tmp_path, database_url, "add", "alice", "--role", "operator", password="alice-password-1")
    assert (added.returncode, added.stderr) == (0, ""), added.stderr
    assert added.stdout.startswith("svc user: added alice (operator")
    again = svc_user(tmp_path, database_url, "add", "alice", "--role", "viewer", password="whatever-123", **SERVER_ENV)
    assert (again.returncode, again.stdout) == (1, "") and "exists already" in again.stderr
    # A password is never taken from the command line: there is no way to give it there.
    argument = svc_user(tmp_path, database_url, "add", "carol", "--role", "viewer", "--password", "carol-password")
    assert argument.returncode == 2 and "unrecognized arguments" in argument.stderr
    assert listed(tmp_path, database_url) == [("alice", "operator")]


@pytest.mark.both_backends
def test_removal_and_a_new_password_reach_a_second_server_on_the_same_database(tmp_path, database_url):
    first, one = start_service(tmp_path, database_url, **SERVER_ENV)
    second, two = start_service(tmp_path, database_url, **SERVER_ENV)
    try:
        assert (
            svc_user(tmp_path, database_url, "add", "alice", "--role", "operator", password="alice-pass-1").returncode
            == 0
        )
        assert (
            svc_user(tmp_path, database_url, "add", "bob", "--role", "viewer", password="bob-password-1").returncode
            == 0
        )
        alice, bob = ("alice", "alice-pass-1"), ("bob", "bob-password-1")

        def get(base, auth):
            return requests.get(base + "/api/v1/initiatives", auth=auth, timeout=10).status_code

        for n, base in enumerate((one, two)):
            assert get(base, alice) == 200 and get(base, bob) == 200
            made = requests.post(base + "/api/v1/initiatives", json={"name": f"Port {n}"}, auth=alice, timeout=10)
            assert made.status_code == 201 and made.json()["updated_by"] == "alice"
            refused = requests.post(base + "/api/v1/initiatives", json={"name": "No"}, auth=bob, timeout=10)
            assert refused.status_code == 403 and refused.headers["Content-Type"] == "application/problem+json"
        assert [
            i["name"] for i in requests.get(one + "/api/v1/initiatives", auth=bob, timeout=10).json()["initiatives"]
        ] == ["Port 0", "Port 1"]

        assert svc_user(tmp_path, database_url, "passwd", "alice", password="alice-pass-2").returncode == 0
        renewed = ("alice", "alice-pass-2")
        # Both processes remembered the old password; each drops it once it re-reads alice's row. Each poll
        # tries the old one first, so a wrong try is made at most once per server (the lockout counts them).
        for base in (one, two):
            wait_until(
                lambda base=base: get(base, alice) == 401, timeout=30, interval=0.5, what=f"{base}: old password"
            )
            assert get(base, renewed) == 200

        assert svc_user(tmp_path, database_url, "remove", "bob").returncode == 0
        for base in (one, two):
            wait_until(lambda base=base: get(base, bob) == 401, timeout=30, interval=0.5, what=f"{base}: bob removed")
        assert get(one, BOOTSTRAP) == 200 and get(two, BOOTSTRAP) == 200  # the bootstrap operator is untouched
    finally:
        first.stop()
        second.stop()


def test_account_passwords_and_their_hashes_never_reach_a_log(tmp_path, database_url):
    server, base = start_service(tmp_path, database_url, SVC_LOG_LEVEL="DEBUG", **SERVER_ENV)
    try:
        outputs = []
        for args, password in [
            (("add", "alice", "--role", "operator"), "alice-secret-pass-1"),
            (("add", "vera", "--role", "viewer"), "vera-secret-pass-1"),
            (("passwd", "alice"), "alice-secret-pass-2"),
        ]:
            done = svc_user(tmp_path, database_url, *args, password=password)
            assert done.returncode == 0, done.stderr
            outputs.append(done.stdout + done.stderr)
        tries = [("alice", "alice-secret-pass-2"), ("alice", "alice-secret-pass-1"), ("vera", "vera-secret-pass-1")]
        answers = []
        for auth in tries:
            answers.append(requests.get(base + "/api/v1/tickets", auth=auth, timeout=10))
            answers.append(requests.post(base + "/api/v1/initiatives", json={"name": "X"}, auth=auth, timeout=10))
        assert [a.status_code for a in answers] == [200, 201, 401, 401, 200, 403]
        hashes = stored_hashes(database_url)
    finally:
        server.stop()
    logs = server.output() + "".join(outputs) + "".join(a.text for a in answers)
    secrets = ["alice-secret-pass-1", "alice-secret-pass-2", "vera-secret-pass-1"]
    secrets += [base64.b64encode(f"{name}:{password}".encode()).decode() for name, password in tries]
    secrets += [h for h in hashes] + [h.rsplit("$", 1)[1] for h in hashes]  # the hashes, and their digests
    assert len(hashes) == 2 and all(h.startswith("$argon2id$") for h in hashes)
    access = [line for line in server.output().splitlines() if line.startswith("{") and '"svc.access"' in line]
    assert any(json.loads(line)["logger"] == "svc.access" for line in access)  # the requests were logged
    for secret in secrets:
        assert secret not in logs, f"{secret[:14]}... appears in a log, the CLI's output or an answer"


def stored_hashes(database_url: str) -> list[str]:
    from storage import db as storage_db
    from storage.models import Account

    database = storage_db.open_database(database_url, max_connections=1)
    storage_db.bind(database)
    try:
        with storage_db.connection():
            return [a.password_hash for a in Account.select().order_by(Account.name)]
    finally:
        database.close_all() if hasattr(database, "close_all") else database.close()
