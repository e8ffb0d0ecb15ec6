"""The `svc` command: serve, jobs, run, migrate, backup, the clients (notify, ops, worker), people's accounts (user),
validate, replay, import, backtest, the router's policy (policy), the dispatch switch (dispatch), reconcile, archive."""

from __future__ import annotations

import argparse
import difflib
import errno
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from domain.config import Config, ConfigError

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def register(fn: Callable[[argparse.Namespace], int]):
        COMMANDS[name] = fn
        return fn

    return register


def load_config() -> Config:
    try:
        return Config.from_env()
    except ConfigError as exc:
        print(f"svc: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def server_config(args: argparse.Namespace) -> Config:
    """The configuration of a server process: environment, command-line overrides, generated credentials."""
    from dataclasses import replace

    from svc import logs

    config = load_config()
    overrides = {
        k: v
        for k, v in {"host": getattr(args, "host", None), "port": getattr(args, "port", None)}.items()
        if v is not None
    }
    config = replace(config, **overrides).with_generated_credentials()
    logs.configure(config.log_level, secrets=logs.secrets_of(config))
    warn_about_forge_secret(config)
    return config


def warn_about_forge_secret(config: Config) -> None:
    """At every start while the older SVC_FORGE_WEBHOOK_SECRET is set, or GitHub and GitLab share one value: what to
    change, and why."""
    import logging

    ok, advice = config.forge_secret_check()
    if config.forge_webhook_secret or not ok:
        logging.getLogger("svc.config").warning("forge webhook secret: %s", advice)


@command("serve")
def serve(args: argparse.Namespace) -> int:
    listening(server_config(args), args.command).run()
    return 0


def listening(config: Config, name: str):
    """The API and the web board, listening on their address, the banner printed; `.run()` serves them.

    The address is taken before anything claims to serve: when it cannot be (a second `svc serve` or `svc run` on
    a busy port), one line says so and the command exits 2.
    """
    from api import create_app, proxies
    from svc import server as guarded

    app = proxies.TrustedProxies.from_config(create_app(config), config)
    try:
        server = guarded.create_server(
            app, limits=client_limits(config), host=config.host, port=config.port, **server_settings(config)
        )
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            why = f"port {config.port} is in use (another svc?); set SVC_PORT or --port"
        else:
            why = f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}; set SVC_HOST or --host"
        print(f"svc {name}: {why}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    print(
        f"svc: serving on http://{config.host}:{config.port} (database: {_describe_db(config.database_url)}); "
        f"{proxies.describe(config)}; per client address at most {config.max_connections_per_client} connections, "
        f"headers within {config.request_header_timeout:g} s, bodies at {config.request_body_min_rate:g} B/s or faster",
        flush=True,
    )
    return server


def server_settings(config: Config) -> dict[str, Any]:
    """What `svc serve` tells waitress besides where to listen."""
    return {
        "threads": config.threads,
        "ident": "svc",
        # waitress's own limit sits well above the app's, so even an oversized body gets a problem+json 413.
        "max_request_body_size": max(config.max_body_bytes * 8, 16 * 1024 * 1024),
        "max_request_header_size": 64 * 1024,
        # TrustedProxies reads the forwarding headers of trusted proxies and removes everyone else's; waitress
        # must leave them in place for it (its own trusted_proxy takes a single address, see api/proxies.py).
        "clear_untrusted_proxy_headers": False,
        # An idle kept-alive connection between requests; a request's own deadlines are client_limits' (and the
        # loop looks at them every second).
        "channel_timeout": 60,
        "cleanup_interval": 1,
    }


def client_limits(config: Config):
    """What one client may hold of `svc serve` (svc/server.py); trusted proxies are exempt from the per-address
    cap, since every client behind them shares their address."""
    from svc import server as guarded

    return guarded.limits_of(config, config.trusted_proxies)


@command("jobs")
def jobs(args: argparse.Namespace) -> int:
    from domain.clock import shifted, system_clock
    from domain.router import policy_versions
    from jobs import assembly
    from storage import db, migrations

    config = server_config(args)
    # Every worker may hold a connection at once (one per scheduled agent, one per outbox lane, the heartbeat),
    # a slow bay wipe included; connections are opened only when needed.
    db.bind(db.open_database(config.database_url, max_connections=16))
    migrations.migrate()
    policy_versions.seed(config, system_clock)
    # The offset moves only the clock the schedules are read against: leases, the outbox, runs and the heartbeat
    # keep real time, so a process rehearsing yesterday's 08:00 still delivers what the API queues today.
    process = assembly.build(config, system_clock, schedule_clock=shifted(config.jobs_clock_offset, system_clock))
    process.install_signal_handlers()
    print(f"svc: jobs process running (database: {_describe_db(config.database_url)})", flush=True)
    if config.jobs_clock_offset:
        print(
            f"svc: the schedules are read {config.jobs_clock_offset:+g} s from now (SVC_JOBS_CLOCK_OFFSET); "
            "everything else keeps real time",
            flush=True,
        )
    if config.ops_scheduler == "external":
        print("svc: ops agents are left to an external cron (SVC_OPS_SCHEDULER=external)", flush=True)
    process.run_forever()
    return 0


@command("ops")
def ops(args: argparse.Namespace) -> int:
    """The ops runner: call an ops endpoint of a running service with SVC_BASIC_AUTH at SVC_BASE_URL."""
    from clients import ops_runner

    config = load_config()
    basic = _bootstrap_basic(config)
    return ops_runner.run(args.job, config.base_url, basic, post_to_chat=args.post_to_chat, timeout=args.timeout)


@command("worker")
def worker(args: argparse.Namespace) -> int:
    """The reference worker (`clients/worker.py`, which reads its own environment: SVC_WORKER_AUTH, SVC_BASE_URL)."""
    from clients import worker as reference_worker

    return reference_worker.run(args, os.environ)


@command("migrate")
def migrate(args: argparse.Namespace) -> int:
    from storage import db, migrations

    config = load_config()
    db.bind(db.open_database(config.database_url))
    applied = migrations.migrate()
    print(f"svc: schema at version {migrations.current_version()}; applied now: {applied or 'nothing'}")
    return 0


@command("backup")
def backup(args: argparse.Namespace) -> int:
    """A consistent copy of the SQLite database while the service runs; PostgreSQL is pg_dump's job."""
    from pathlib import Path

    from playhouse.db_url import parse as parse_db_url

    from storage.backup import BackupError, copy_sqlite

    config = load_config()
    scheme = urlsplit(config.database_url).scheme
    if scheme != "sqlite":
        print(
            f"svc backup: the database is {_describe_db(config.database_url)}; svc backup copies SQLite only. "
            "Back PostgreSQL up with its own tools, e.g.\n"
            '  pg_dump --format=custom --file=svc-$(date -u +%Y%m%dT%H%M%SZ).dump "$DATABASE_URL"\n'
            "(restore with pg_restore; see docs/operating.md, Backups)",
            file=sys.stderr,
        )
        return 2
    source = parse_db_url(config.database_url)["database"]
    if source == ":memory:":
        print("svc backup: the database is in memory; there is nothing on disk to copy", file=sys.stderr)
        return 2
    target = Path(args.path)
    if target.resolve() == Path(source).resolve():
        print("svc backup: the backup path is the database itself", file=sys.stderr)
        return 2
    try:
        result = copy_sqlite(Path(source), target)
    except BackupError as exc:
        print(f"svc backup: {exc}", file=sys.stderr)
        return 1
    print(f"svc: backed up {_describe_db(config.database_url)} to {result.target} ({result.bytes} bytes; integrity ok)")
    return 0


@command("run")
def run(args: argparse.Namespace) -> int:
    """Both processes for one machine: the jobs process as a supervised child, the API in this one."""
    import threading
    import time

    # Credentials are generated once, here, before the child reads them. Both processes migrate the schema on
    # start; the migration lock makes that safe. The address is taken first: a second `svc run` on a busy port
    # stops there, before it starts a second jobs process.
    config = server_config(args)
    server = listening(config, args.command)
    stopping = threading.Event()
    child: list[subprocess.Popen] = []

    def supervise() -> None:
        # Restart the jobs process if it dies, at most once every ten seconds.
        while not stopping.is_set():
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, "-m", "svc", "jobs"], env=os.environ.copy())
            child[:] = [proc]
            code = proc.wait()
            if stopping.is_set():
                return
            print(f"svc: the jobs process exited with {code}; restarting it", file=sys.stderr, flush=True)
            stopping.wait(max(0.0, 10 - (time.monotonic() - started)))

    def stop(*_) -> None:
        if not stopping.is_set():
            stopping.set()
            for proc in child:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)

    threading.Thread(target=supervise, name="jobs-supervisor", daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *a: (stop(), sys.exit(0)))
    try:
        server.run()
        return 0
    finally:
        stop()
        for proc in child:
            try:
                proc.wait(timeout=jobs_grace_seconds(config))
            except subprocess.TimeoutExpired:
                proc.kill()


def jobs_grace_seconds(config: Config) -> float:
    """How long `svc run` lets the jobs process finish its work in hand after SIGTERM before killing it: a bay
    wipe may take up to its own time limit, and killing the process mid-wipe would orphan the wipe command."""
    return config.bay_wipe_timeout + 30.0


@command("notify")
def notify(args: argparse.Namespace) -> int:
    """The content repository's notify hook (`clients/notify_hook.py`, which reads its own environment)."""
    from clients import notify_hook

    return notify_hook.run(args, os.environ)


@command("outbox")
def outbox_view(args: argparse.Namespace) -> int:
    """What became of queued side effects: chat posts, slot releases, tracker closes."""
    from domain.clock import iso
    from storage import db, migrations, outbox

    config = load_config()
    db.bind(db.open_database(config.database_url))
    migrations.migrate()
    with db.connection():
        rows = outbox.recent(kind=args.kind, status=args.status, limit=args.limit)
    print(f"{'id':>6}  {'kind':<14} {'status':<8} {'tries':>5}  {'created':<27} {'sent / next try':<27} note")
    for row in rows:
        when = (
            row.sent_at
            if row.status == outbox.SENT
            else (row.next_attempt_at if row.status == outbox.PENDING else None)
        )
        note = (row.last_error or "").replace("\n", " ")[:120]
        print(
            f"{row.id:>6}  {row.kind:<14} {row.status:<8} {row.attempts:>5}  {iso(row.created_at):<27} "
            f"{iso(when) or '-':<27} {note}"
        )
    return 0


@command("reconcile")
def reconcile(args: argparse.Namespace) -> int:
    """Run the reconciler once: ask the senders for what they failed to deliver. Exit 1 when one could not be read."""
    from domain.clock import system_clock
    from domain.ops.runs import Trigger
    from jobs import assembly
    from storage import db, migrations

    config = load_config()
    db.bind(db.open_database(config.database_url))
    migrations.migrate()
    with db.connection():
        report = assembly.reconciler(config, system_clock)(Trigger("command"))
    print(f"svc reconcile: {report.run.summary}")
    return 0 if report.ok else 1


@command("archive")
def archive(args: argparse.Namespace) -> int:
    """Run the archivist once: move detail older than SVC_KEEP_DAYS (or --before) into SVC_DATA_DIR/archive/."""
    from domain.clock import BadTimestamp, parse_timestamp, system_clock
    from domain.ops.runs import Trigger
    from jobs import assembly
    from storage import db, migrations

    config = load_config()
    before = None
    if args.before is not None:
        try:
            before = parse_timestamp(args.before)
        except BadTimestamp:
            print(
                f"svc archive: --before: expected an ISO 8601 time with its zone, like 2025-10-01T00:00:00Z; "
                f"got {args.before!r}",
                file=sys.stderr,
            )
            return 2
    db.bind(db.open_database(config.database_url, max_connections=2))
    migrations.migrate()
    report = assembly.archivist(config, system_clock).run(Trigger("command"), before=before)
    print(f"svc archive: {report.run.summary}")
    for kind, count in report.moved.items():
        print(f"{kind} {count}")
    return 0


@command("user")
def user(args: argparse.Namespace) -> int:
    """People's accounts: add, passwd, role, remove, list. A password is read from a prompt, or from standard
    input when that is not a terminal (so scripts can pipe it), never from the command line."""
    from peewee import InterfaceError, OperationalError

    from domain import accounts
    from domain.errors import Conflict, DomainError, NotFound
    from storage import db, migrations

    config = load_config()
    passwords = accounts.Passwords.from_config(config)
    bootstrap = _bootstrap_user(config)
    reserved = frozenset({bootstrap}) if bootstrap else frozenset()
    try:
        db.bind(db.open_database(config.database_url))
        migrations.migrate()
        if args.action == "add":
            # Everything that can be refused is refused before the password is asked for.
            accounts.check_name(args.name, reserved=reserved)
            if accounts.current(args.name) is not None:
                raise Conflict(f"an account called {args.name!r} exists already (new password: svc user passwd)")
            accounts.bay_of(args.name, args.role, args.bay)
            row = accounts.add(
                args.name,
                args.role,
                _read_password(confirm=True),
                passwords=passwords,
                bay=args.bay,
                reserved=reserved,
            )
            in_bay = f", in bay {row.bay}" if row.bay else ""
            print(f"svc user: added {row.name} ({row.role}{in_bay}: {accounts.ROLE_MEANING[row.role]})")
        elif args.action == "passwd":
            if accounts.current(args.name) is None:
                raise NotFound("account", args.name)
            accounts.change_password(args.name, _read_password(confirm=True), passwords=passwords)
            print(f"svc user: changed the password of {args.name}; the old one stops working within seconds")
        elif args.action == "role":
            accounts.change_role(args.name, args.role, bay=args.bay)
            row = accounts.current(args.name)
            in_bay = f", in bay {row.bay}" if row is not None and row.role == accounts.WORKER and row.bay else ""
            print(f"svc user: {args.name} is now {args.role}{in_bay} ({accounts.ROLE_MEANING[args.role]})")
        elif args.action == "remove":
            accounts.remove(args.name)
            print(f"svc user: removed {args.name}; its credentials stop working within seconds")
        else:
            _list_accounts(accounts.everyone(), bootstrap)
    except NotFound:
        print(f"svc user: no account called {args.name!r} (see: svc user list)", file=sys.stderr)
        return 1
    except DomainError as exc:
        print(f"svc user: {exc}", file=sys.stderr)
        return 1
    except (OperationalError, InterfaceError) as exc:
        # A person typing the command gets the reason, not a traceback (its first line: never a query's values).
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"svc user: cannot use the database ({_describe_db(config.database_url)}): {reason}", file=sys.stderr)
        return 1
    return 0


def _bootstrap_basic(config: Config) -> str | None:
    """The bootstrap operator's `user:password`: SVC_BASIC_AUTH, or else the generated credentials file of a service
    on this machine (never generated here)."""
    from domain.config import read_credentials_file

    return config.basic_auth or read_credentials_file(config.credentials_path).get("SVC_BASIC_AUTH")


def _bootstrap_user(config: Config) -> str | None:
    """The bootstrap operator's name."""
    basic = _bootstrap_basic(config)
    return basic.split(":", 1)[0] if basic else None


def _read_password(*, confirm: bool) -> str:
    """From a prompt (asked twice) on a terminal; else the first line of standard input."""
    import getpass

    from domain.accounts import AccountRefused

    if sys.stdin.isatty():
        password = getpass.getpass("Password: ")
        if not password:
            raise AccountRefused("no password was given; nothing changed")
        if confirm and getpass.getpass("Password again: ") != password:
            raise AccountRefused("the two passwords differ; nothing changed")
        return password
    password = sys.stdin.readline().removesuffix("\n").removesuffix("\r")
    if not password:
        # An empty pipe (or `< /dev/null`) is a forgotten password, not a short one.
        raise AccountRefused(
            "no password was given on standard input; nothing changed "
            "(pipe one line: printf '%s\\n' \"$PASSWORD\" | svc user ...)"
        )
    return password


def _list_accounts(rows, bootstrap: str | None) -> None:
    from domain.clock import iso

    if not rows:
        print("svc user: no accounts yet; add one with: svc user add NAME --role viewer|operator|worker")
    else:
        width = max(len("name"), *(len(r.name) for r in rows))
        bays = max(len("bay"), *(len(r.bay or "-") for r in rows))
        print(f"{'name':<{width}}  {'role':<8}  {'bay':<{bays}}  {'created':<27}  password changed")
        for row in rows:
            created, changed = iso(row.created_at), iso(row.password_changed_at)
            print(f"{row.name:<{width}}  {row.role:<8}  {row.bay or '-':<{bays}}  {created:<27}  {changed}")
    if bootstrap:
        print(f"(and the bootstrap operator {bootstrap!r} of SVC_BASIC_AUTH, which is not an account)")


@command("demo")
def demo(args: argparse.Namespace) -> int:
    """Fill the database with a fortnight of a small team's board, made by the service's own units of work."""
    from domain.clock import system_clock
    from storage import db, migrations
    from svc import demo as demo_story
    from svc import logs

    config = load_config()
    # The story's own failures (a bay wipe, a tracker close) are logged as warnings; only real errors show.
    logs.configure("ERROR", secrets=logs.secrets_of(config))
    db.bind(db.open_database(config.database_url))
    migrations.migrate()
    print(f"svc demo: filling {_describe_db(config.database_url)}", flush=True)
    return demo_story.run(config, force=args.force, end=system_clock(), out=sys.stdout, err=sys.stderr)


@command("validate")
def validate(args: argparse.Namespace) -> int:
    """Check envelope files (or worker output files) against the contract; exit 1 naming each violation."""
    from svc import validation

    return validation.run(args.files, worker_output=args.worker_output, out=sys.stdout)


@command("replay")
def replay(args: argparse.Namespace) -> int:
    """Recorded envelopes through the router's rules and gates offline; one decision per line, then a summary."""
    from svc import replay_command

    allowlist = None
    if args.allowlist is not None:
        allowlist = frozenset(a.strip() for a in args.allowlist.split(",") if a.strip())
    return replay_command.run(
        load_config(),
        args.file,
        snapshot=args.snapshot,
        save_snapshot=args.save_snapshot,
        with_envelope=args.with_envelope,
        out=sys.stdout,
        err=sys.stderr,
        allowlist=allowlist,
        retry_budget=args.retry_budget,
    )


@command("import")
def import_history(args: argparse.Namespace) -> int:
    """Record a history of envelopes as if each had arrived at its occurred_at; never acts on any."""
    from svc import import_command

    return import_command.run(load_config(), args.file, out=sys.stdout, err=sys.stderr)


@command("backtest")
def backtest(args: argparse.Namespace) -> int:
    """Recorded decisions under a candidate policy, against the board as it was then; which flip and why."""
    from svc import backtest_command

    return backtest_command.run(
        load_config(),
        since=args.since,
        until=args.until,
        policy_file=args.policy,
        allowlist=args.allowlist,
        retry_budget=args.retry_budget,
        fleet_size=args.fleet_size,
        max_flips=args.max_flips,
        output=args.format,
        out=sys.stdout,
        err=sys.stderr,
    )


@command("policy")
def policy(args: argparse.Namespace) -> int:
    """The router's policy: show the one in force, set a new version from a file, list the versions."""
    from domain.clock import system_clock
    from domain.router import policy_versions
    from storage import db, migrations
    from svc import policy_command

    config = load_config()
    db.bind(db.open_database(config.database_url))
    migrations.migrate()
    with db.connection():
        if args.action == "show":
            return policy_command.show(output=args.format, out=sys.stdout, err=sys.stderr)
        if args.action == "set":
            return policy_command.set_policy(
                args.file,
                reason=args.reason,
                force=args.force,
                clock=system_clock,
                thresholds=policy_versions.Thresholds.from_config(config),
                out=sys.stdout,
                err=sys.stderr,
            )
        return policy_command.history(limit=args.limit, out=sys.stdout)


@command("dispatch")
def dispatch(args: argparse.Namespace) -> int:
    """The switch over all live dispatch: show it, pause it (with a reason), resume it."""
    from domain.clock import system_clock
    from storage import db, migrations
    from svc import dispatch_command

    config = load_config()
    db.bind(db.open_database(config.database_url))
    migrations.migrate()
    with db.connection():
        if args.action == "show":
            return dispatch_command.show(output=args.format, out=sys.stdout)
        return dispatch_command.change(
            paused=args.action == "pause",
            reason=args.reason,
            config=config,
            clock=system_clock,
            out=sys.stdout,
            err=sys.stderr,
        )


def _describe_db(url: str) -> str:
    if url.startswith("sqlite:///"):
        return f"SQLite at {url.removeprefix('sqlite:///')}"
    parts = urlsplit(url)
    return f"PostgreSQL at {parts.hostname}:{parts.port or 5432}{parts.path}"


class Parser(argparse.ArgumentParser):
    """argparse, saying more of what went wrong: a mistyped command is answered with the nearest one (`svc sever`:
    did you mean serve?), and an unknown option with the usage of the command it was given to, not the top level's.
    Every sub-command's parser is one of these (argparse makes them of the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.commands: argparse.Action | None = None

    def add_subparsers(self, **kwargs: Any):
        self.commands = super().add_subparsers(**kwargs)
        return self.commands

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        self._refuse_unknown_command(args)
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            # Here, in the parser of the command they were given to: its usage is the one that helps.
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras

    def _refuse_unknown_command(self, args: list[str]) -> None:
        # The command is the first word that is not an option: no parser with commands here takes an option with a
        # value before its command.
        word = next((arg for arg in args if not arg.startswith("-")), None)
        if self.commands is None or word is None or word in self.commands.choices:
            return
        names = list(self.commands.choices)
        nearest = difflib.get_close_matches(word, names, n=1)
        hint = f"did you mean {nearest[0]}?" if nearest else f"the commands: {', '.join(names)}"
        self.error(f"unknown command {word!r}; {hint}")


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("svc-delivery")
    except PackageNotFoundError:
        return "(not installed: run from a checkout)"


def build_parser() -> argparse.ArgumentParser:
    from clients import notify_hook
    from clients import worker as reference_worker

    parser = Parser(prog="svc", description="Delivery coordination service")
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("serve", "run"):
        p = sub.add_parser(
            name,
            help="serve the API and the web board"
            if name == "serve"
            else "serve the API and run the jobs process (one machine)",
        )
        p.add_argument("--host", help="listen address (default SVC_HOST or 127.0.0.1)")
        p.add_argument("--port", type=int, help="listen port (default SVC_PORT or 8080)")
    sub.add_parser("jobs", help="run the jobs process: ops agents on their UTC schedules, chat delivery, the poller")
    sub.add_parser("migrate", help="create or upgrade the database schema and exit")
    backup_parser = sub.add_parser(
        "backup",
        help="copy the SQLite database to PATH, consistently, while the service runs (PostgreSQL: use pg_dump)",
    )
    backup_parser.add_argument("path", metavar="PATH", help="where the copy goes (a new file)")
    notify_parser = sub.add_parser(
        "notify", help="report a writing status to the service (the content repository's hook)"
    )
    notify_hook.add_arguments(notify_parser)
    worker_parser = sub.add_parser(
        "worker",
        help="a worker in a bay: claim dispatched jobs, run COMMAND on each (the job as JSON on stdin), send its "
        "output (SVC_WORKER_AUTH, SVC_BASE_URL)",
    )
    reference_worker.add_arguments(worker_parser)
    view = sub.add_parser("outbox", help="show queued side effects and their fate (pending, sent, failed, skipped)")
    view.add_argument("--kind", help="only this kind, e.g. chat")
    view.add_argument("--status", choices=["pending", "sent", "failed", "skipped"], help="only this status")
    view.add_argument("--limit", type=int, default=50, help="how many, newest first (default 50)")
    ops_parser = sub.add_parser(
        "ops",
        help="the ops runner: run an ops agent now through the service's API (SVC_BASE_URL, SVC_BASIC_AUTH)",
    )
    ops_parser.add_argument("job", choices=["pulse", "digest", "slot-steward", "idle-reclaim"])
    ops_parser.add_argument(
        "--post-to-chat",
        choices=["auto", "always", "never"],
        help="pulse only: auto posts when it finds issues (default: the server's, auto or OPS_PULSE_ALWAYS)",
    )
    ops_parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the answer (600)")
    people = sub.add_parser(
        "user",
        help="people's accounts: add, passwd, role, remove, list (passwords from a prompt or piped on stdin)",
    )
    actions = people.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="add an account; the password is asked for (or read from stdin)")
    add.add_argument("name")
    add.add_argument(
        "--role",
        required=True,
        choices=["viewer", "operator", "worker"],
        help="viewer: reads only; operator: everything; worker: a machine in a bay, the dispatch endpoints only",
    )
    add.add_argument("--bay", help="a worker's bay, the only one it may claim jobs into (default: its name)")
    actions.add_parser("passwd", help="set a new password (asked for, or read from stdin)").add_argument("name")
    role = actions.add_parser("role", help="make an account a viewer, an operator or a worker")
    role.add_argument("name")
    role.add_argument("role", choices=["viewer", "operator", "worker"])
    role.add_argument("--bay", help="a worker's bay (default: the one it had, else its name)")
    actions.add_parser("remove", help="delete an account; what it did stays attributed to it").add_argument("name")
    actions.add_parser("list", help="every account with its role")
    demo_parser = sub.add_parser(
        "demo",
        help="fill the database with a demo board: tickets in every stage, two weeks of agent runs, router decisions",
    )
    demo_parser.add_argument(
        "--force",
        action="store_true",
        help="the database already holds tickets: delete EVERYTHING in it first, then fill it with the demo",
    )
    check = sub.add_parser(
        "validate",
        help='check svc.normalized-event/v0 envelope files (.json: one envelope or {"events": [...]}; '
        ".jsonl: one per line); exit 1 naming each violation",
    )
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument(
        "--worker-output",
        action="store_true",
        help="check worker output (svc.worker-output/v0) instead: the gate before any forge write",
    )
    again = sub.add_parser(
        "replay",
        help="run recorded envelopes (JSON lines) through the router's gates offline and print the decisions",
    )
    again.add_argument("file", nargs="?", metavar="FILE.jsonl", help="envelopes, one per line ('-' for stdin)")
    again.add_argument(
        "--snapshot", metavar="SNAPSHOT.json", help="evaluate against this board snapshot instead of the database"
    )
    again.add_argument(
        "--save-snapshot", metavar="SNAPSHOT.json", help="write the database's current board as a snapshot and exit"
    )
    again.add_argument("--allowlist", metavar="IDS", help="comma-separated actor ids (instead of the policy's)")
    again.add_argument(
        "--retry-budget", type=int, metavar="N", help="fixer jobs per ticket since its last green pipeline"
    )
    again.add_argument("--with-envelope", action="store_true", help="print each decision with its envelope")
    history = sub.add_parser(
        "import",
        help="record a history of envelopes (JSON lines) as if each had arrived at its occurred_at, for the "
        "scorecard and the backtest; never acts (exit 1 when a line was rejected)",
    )
    history.add_argument("file", metavar="FILE.jsonl", help="envelopes, one per line ('-' for stdin)")
    archiving = sub.add_parser(
        "archive",
        help="move detail older than SVC_KEEP_DAYS (decisions, finished tickets' timelines, runs, sent messages, "
        "finished jobs, settled gaps) into SVC_DATA_DIR/archive/ as monthly gzip JSON lines, once",
    )
    archiving.add_argument(
        "--before", metavar="ISO-TIME", help="move what is older than this instead, e.g. 2025-10-01T00:00:00Z"
    )
    sub.add_parser(
        "reconcile",
        help="ask GitHub, GitLab and Linear once for the events they failed to deliver (exit 1: one could not be read)",
    )
    trial = sub.add_parser(
        "backtest",
        help="re-evaluate the recorded decisions under a candidate policy, against the board as it was when each "
        "was taken, and say which flip and because of which gate (writes nothing)",
    )
    trial.add_argument("--since", metavar="ISO", help="decisions evaluated at or after, e.g. 2026-11-01T00:00:00Z")
    trial.add_argument("--until", metavar="ISO", help="decisions evaluated before")
    trial.add_argument(
        "--policy",
        metavar="FILE",
        help="a JSON policy (contracts/router-policy.json), whole or partial: the members to change, rules included",
    )
    trial.add_argument("--allowlist", metavar="IDS", help="comma-separated actor ids (instead of the policy's)")
    # Numbers are read by the command itself, so a bad one is one line saying so (exit 2), as for every input.
    trial.add_argument("--retry-budget", metavar="N", help="fixer jobs per ticket since its last green pipeline")
    trial.add_argument("--fleet-size", metavar="N", help="tickets that may hold a slot in execute or ci")
    trial.add_argument("--max-flips", metavar="N", help="exit 1 when more than N decisions flip (for CI)")
    trial.add_argument("--format", choices=("text", "json"), default="text", help="text for people (default), json")
    policy_parser = sub.add_parser(
        "policy", help="the router's policy: its rules and knobs, versioned (show the one in force, set one, history)"
    )
    policy_actions = policy_parser.add_subparsers(dest="action", required=True)
    shown = policy_actions.add_parser("show", help="the policy in force: who set it and why, its knobs, its rules")
    shown.add_argument("--format", choices=("text", "json"), default="text", help="text for people (default), json")
    setting = policy_actions.add_parser(
        "set", help="make the whole policy in FILE the one in force, from the next event on, in every process"
    )
    setting.add_argument("file", metavar="FILE", help="a whole policy (contracts/router-policy.json, $defs/document)")
    setting.add_argument("--reason", required=True, metavar="TEXT", help="why (kept with the version)")
    setting.add_argument(
        "--force",
        metavar="REASON",
        help="the reason to adopt it although a rule it makes live has not earned it (kept with the version)",
    )
    listed = policy_actions.add_parser("history", help="the versions, newest first: who set each, when and why")
    listed.add_argument("--limit", type=int, default=20, help="how many, newest first (default 20)")
    dispatch_parser = sub.add_parser(
        "dispatch", help="the switch over all live dispatch: show it, pause it (with a reason), resume it"
    )
    dispatch_actions = dispatch_parser.add_subparsers(dest="action", required=True)
    shown = dispatch_actions.add_parser("show", help="whether dispatch is paused, why, who changed it and when")
    shown.add_argument("--format", choices=("text", "json"), default="text", help="text for people (default), json")
    pausing = dispatch_actions.add_parser(
        "pause", help="dispatch nothing until resumed: live rules record what they would do, workers claim nothing"
    )
    pausing.add_argument("--reason", required=True, metavar="TEXT", help="why (shown on every page of the board)")
    resuming = dispatch_actions.add_parser("resume", help="dispatch again")
    resuming.add_argument("--reason", metavar="TEXT", help="why (optional; kept with the switch)")
    return parser


def entry() -> int:
    """The installed `svc` command and `python -m svc`: `main`, in a process of its own."""
    leave_out_unused_database_driver(os.environ)
    return main()


def leave_out_unused_database_driver(environ: Mapping[str, str]) -> None:
    """peewee imports psycopg as it is itself imported, whichever database the process uses: about 0.2 s of CPU at
    every start, a third of what `svc serve` takes to start, where SQLite never needs it. A process whose
    DATABASE_URL is not PostgreSQL's marks the driver absent before anything imports peewee: None in `sys.modules`
    makes an import fail as if the module were not installed (the import system's documented meaning of None), and
    peewee takes that as it takes a machine without psycopg. Only for a process of its own, where the URL cannot
    change (`entry`); a process that already holds psycopg keeps it."""
    scheme = urlsplit((environ.get("DATABASE_URL") or "").strip()).scheme
    if scheme not in {"postgres", "postgresql"}:
        sys.modules.setdefault("psycopg", None)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = COMMANDS[args.command](args) or 0
        sys.stdout.flush()  # inside the try: a reader gone before the last lines is a broken pipe here, not at exit
        return code
    except BrokenPipeError:
        # The reader went away (`svc outbox | head`): stop quietly, as a shell tool does. Python would otherwise
        # print a traceback while flushing stdout at exit; pointing it at /dev/null stops that (Python's
        # documented recipe, "Note on SIGPIPE").
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:
        # A schema the code cannot run on is one line, exit 2. Only a command that opened a database can raise it,
        # so the check does not import storage (peewee) for the commands that use none: `--version`, the clients.
        migrations = sys.modules.get("storage.migrations")
        if migrations is None or not isinstance(exc, migrations.MigrationError):
            raise
        print(f"svc {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(entry())
