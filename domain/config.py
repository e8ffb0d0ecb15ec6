"""Configuration, read from the environment in exactly one place.

`Config.from_env()` checks every variable and raises `ConfigError` naming each bad one, so a
misconfigured service stops at start-up instead of failing on the first request that needs it.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import re
import secrets
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

CREDENTIALS_FILE = "credentials.env"
# What waitress's proxy-header parser understands; `forwarded` (RFC 7239) excludes the X-Forwarded-* ones.
PROXY_HEADERS = frozenset(
    {"x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port", "x-forwarded-by", "forwarded"}
)
DEFAULT_PROXY_HEADERS = frozenset({"x-forwarded-for", "x-forwarded-proto"})
DEFAULT_TRACKER_API_URL = "https://api.linear.app/graphql"
DEFAULT_GITHUB_API_URL = "https://api.github.com"
DEFAULT_GITLAB_API_URL = "https://gitlab.com/api/v4"
# The hooks the reconciler reads, by their API paths (SVC_GITHUB_HOOKS, SVC_GITLAB_HOOKS).
_GITHUB_HOOK = re.compile(r"^(?:repos/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|orgs/[A-Za-z0-9_.-]+)/hooks/[0-9]{1,19}$")
_GITLAB_HOOK = re.compile(r"^projects/[0-9]{1,19}/hooks/[0-9]{1,19}$")
MIN_SECRET_LENGTH = 16
_KEY_PREFIX = re.compile(r"^[A-Z][A-Z0-9]{0,31}$")


# What a first start generates when neither the environment nor the credentials file has it: variable, the
# Config field it fills, how a fresh value is made.
_GENERATED = {
    "SVC_CI_WEBHOOK_SECRET": ("ci_webhook_secret", lambda: secrets.token_urlsafe(32)),
    "SVC_BASIC_AUTH": ("basic_auth", lambda: "svc:" + secrets.token_urlsafe(18)),
    "SVC_GITHUB_WEBHOOK_SECRET": ("github_webhook_secret", lambda: secrets.token_hex(32)),
    "SVC_GITLAB_WEBHOOK_TOKEN": ("gitlab_webhook_token", lambda: secrets.token_urlsafe(32)),
    "SVC_TRACKER_WEBHOOK_SECRET": ("tracker_webhook_secret", lambda: secrets.token_hex(32)),
}


class ConfigError(Exception):
    """One or more environment variables hold a value the service cannot run with."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  {p}" for p in problems))


# The most days detail is kept before the archivist moves it out (SVC_KEEP_DAYS): a year, and a month to look back.
DETAIL_AGE_MAX = 400


@dataclass(frozen=True)
class Config:
    """Everything the service reads from its environment; defaults match the README."""

    data_dir: Path = Path("var")
    database_url: str = ""
    host: str = "127.0.0.1"
    port: int = 8080
    base_url: str = "http://127.0.0.1:8080"
    threads: int = 8
    ci_webhook_secret: str | None = None
    basic_auth: str | None = None
    discord_webhook_url: str | None = None
    ops_pulse_always: bool = False
    site_url: str | None = None
    staging_url: str | None = None
    # PEM file of extra CAs the staging check trusts (a staging site behind an internal CA); None: the system store.
    staging_ca_file: Path | None = None
    tracker_api_url: str = DEFAULT_TRACKER_API_URL
    tracker_api_key: str | None = None
    # Each forge sender has its own credential: GitHub's HMAC key, and the token GitLab sends in plaintext.
    github_webhook_secret: str | None = None
    gitlab_webhook_token: str | None = None
    # Older installs' one value for both; stands in for whichever of the two above is unset (see forge_secret_check).
    forge_webhook_secret: str | None = None
    tracker_webhook_secret: str | None = None
    # GitHub's and GitLab's REST APIs: the reconciler reads the hooks named here (and the forge writes use them).
    github_api_url: str = DEFAULT_GITHUB_API_URL
    github_api_token: str | None = None
    gitlab_api_url: str = DEFAULT_GITLAB_API_URL
    gitlab_api_token: str | None = None
    github_hooks: tuple[str, ...] = ()
    gitlab_hooks: tuple[str, ...] = ()
    # Redeliveries (and resends) one reconciler run asks for, at most.
    reconcile_max: int = 50
    # argon2id's cost for people's passwords (domain/accounts.py's Passwords): argon2-cffi's defaults, RFC 9106's
    # second recommended profile. A hash names its own parameters, so changing these leaves every stored hash working.
    password_time_cost: int = 3
    password_memory_kib: int = 65536
    password_parallelism: int = 4
    # A claimed job's lease, renewed by each heartbeat; how many times it may run out before the job fails (3: the
    # contract's "the retry budget + 1" with the first policy's budget of 2); the branches a worker's output may name.
    worker_lease_seconds: int = 300
    worker_lease_attempts: int = 3
    worker_branch_prefix: str = "svc/"
    # An event older than this (by its `occurred_at`) is routed but never dispatched: the gate `fresh`.
    dispatch_max_age_seconds: int = 3600
    router_allowlist: frozenset[str] = field(default_factory=frozenset)
    # Which of SVC_ROUTER_ALLOWLIST and SVC_RETRY_BUDGET the environment set. They seed the first policy only; once
    # the database has one, a start whose environment sets them otherwise says so (`domain/router/policy_versions`).
    policy_variables_set: frozenset[str] = field(default_factory=frozenset)
    # Seconds a signed delivery time (Linear's webhookTimestamp) may be from now; Linear's own SDK allows 60.
    webhook_tolerance_seconds: float = 60.0
    # Ticket-key prefixes recognised in branches and titles beside those of the board's tickets (PORT, BILL).
    ticket_prefixes: frozenset[str] = field(default_factory=frozenset)
    bay_wipe_command: tuple[str, ...] | None = None
    bay_wipe_timeout: float = 120.0
    max_body_bytes: int = 1_048_576
    # What one slow or crowding client may hold (svc/server.py): open connections per client address (trusted
    # proxies exempt), seconds for a request's headers, bytes a second for its body after that grace.
    max_connections_per_client: int = 20
    request_header_timeout: float = 10.0
    request_body_min_rate: float = 500.0
    # /healthz fails (503) when the file system of SQLite's file has less than this left.
    min_free_disk_mb: int = 64
    # Reverse proxies whose forwarding headers say who the client is (a lone address is a /32 or /128 network);
    # empty: no forwarding header is ever believed, the client is the connection's peer.
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    # How many proxies in a row append to X-Forwarded-For (a CDN in front of a load balancer is 2).
    trusted_proxy_count: int = 1
    trusted_proxy_headers: frozenset[str] = DEFAULT_PROXY_HEADERS
    stuck_after_hours: float = 48.0
    retry_budget_per_day: int = 2
    # What a rule must have earned before a policy change may make it live (`domain/router/policy_versions.judge`):
    # over this many days of its decisions under its version, this many settled and this low end of the agreement.
    promotion_days: int = 14
    promotion_min_settled: int = 20
    promotion_min_agreement: float = 0.8
    poller_window_minutes: int = 30
    snapshot_max_age: float = 2.0
    # How long detail (decisions, finished tickets' timelines, runs, sent messages, finished jobs, settled gaps) is
    # kept before the archivist moves it into SVC_DATA_DIR/archive/ (`domain/ops/archivist.py`).
    keep_days: int = DETAIL_AGE_MAX
    log_level: str = "INFO"
    # "jobs": `svc jobs` starts the ops agents on their UTC schedules; "external": a CI cron calls `svc ops ...`.
    ops_scheduler: str = "jobs"
    # Shifts the jobs process's clock (seconds) to rehearse a schedule, e.g. make 08:00 UTC come now in a test.
    jobs_clock_offset: float = 0.0

    def __post_init__(self) -> None:
        if not self.database_url:
            url = f"sqlite:///{(self.data_dir / 'svc.sqlite3').as_posix()}"
            object.__setattr__(self, "database_url", url)

    @property
    def basic_user(self) -> str | None:
        return self.basic_auth.split(":", 1)[0] if self.basic_auth else None

    @property
    def writing_notify_url(self) -> str:
        return self.base_url.rstrip("/") + "/api/v1/agents/writing/notify"

    @property
    def github_secret(self) -> str | None:
        """The key GitHub deliveries are verified with: its own, else the older shared forge secret."""
        return self.github_webhook_secret or self.forge_webhook_secret

    @property
    def gitlab_token(self) -> str | None:
        """The token GitLab deliveries must carry: its own, else the older shared forge secret."""
        return self.gitlab_webhook_token or self.forge_webhook_secret

    def forge_secret_check(self) -> tuple[bool, str]:
        """Whether GitHub and GitLab have credentials of their own (`ok`), and what to change when not.

        Not ok when both senders are verified with one value: GitLab sends its token in plaintext on every
        delivery, so whoever sees it once (a proxy log, a debugging dump) could sign GitHub deliveries with it."""
        legacy = "SVC_FORGE_WEBHOOK_SECRET"
        standing_in = [
            name
            for name, own in (
                ("SVC_GITHUB_WEBHOOK_SECRET", self.github_webhook_secret),
                ("SVC_GITLAB_WEBHOOK_TOKEN", self.gitlab_webhook_token),
            )
            if own is None and self.forge_webhook_secret
        ]
        if self.github_secret and self.gitlab_token and self.github_secret == self.gitlab_token:
            cause = f"{legacy} is both" if len(standing_in) == 2 else "they are set to one value"
            return False, (
                f"GitHub's HMAC key and GitLab's token are one value ({cause}): GitLab sends its token in plaintext "
                "on every delivery, so whoever sees it can sign GitHub deliveries; set SVC_GITHUB_WEBHOOK_SECRET and "
                "SVC_GITLAB_WEBHOOK_TOKEN to two different values (each forge's webhook to its own) and unset "
                f"{legacy}"
            )
        if standing_in:
            return True, (
                f"{legacy} stands in for {' and '.join(standing_in)}: set that instead and unset {legacy}, which a "
                "later release stops reading"
            )
        if self.forge_webhook_secret:
            return True, (
                f"{legacy} is set but unused (SVC_GITHUB_WEBHOOK_SECRET and SVC_GITLAB_WEBHOOK_TOKEN are both set): "
                "unset it"
            )
        return True, "GitHub and GitLab each have a credential of their own"

    def with_generated_credentials(self) -> Config:
        """Fill missing secrets and basic credentials from the data directory, generating them once.

        A fresh install never runs open: the first start writes the CI secret, the bootstrap operator's
        credentials and each webhook sender's secret to `SVC_DATA_DIR/credentials.env` (mode 0600), and later
        starts read them back. Values set in the environment always win; GitHub's and GitLab's are not generated
        where the older `SVC_FORGE_WEBHOOK_SECRET` stands in for them, so an install that sets only that keeps
        working as it did.
        """
        missing = {
            name: field_name for name, (field_name, _) in _GENERATED.items() if getattr(self, field_name) is None
        }
        if self.forge_webhook_secret:
            missing.pop("SVC_GITHUB_WEBHOOK_SECRET", None)
            missing.pop("SVC_GITLAB_WEBHOOK_TOKEN", None)
        if not missing:
            return self
        path = self.credentials_path
        # Two processes starting at once (`svc serve` and `svc jobs` side by side) take turns: the second reads what
        # the first generated instead of generating secrets of its own that the file would then not hold.
        with _credentials_lock(path):
            stored = read_credentials_file(path)
            generated = not missing.keys() <= stored.keys()
            if generated:
                for name in missing:
                    stored.setdefault(name, _GENERATED[name][1]())
                write_credentials_file(path, stored)
        if generated:
            print(f"svc: generated credentials in {path} (mode 0600); read them with: cat {path}")
        else:
            # Every later start says where they are too: the first start's output is long gone by then.
            print(f"svc: credentials from {path}; read them with: cat {path}")
        return replace(self, **{field_name: stored[name] for name, field_name in missing.items()})

    @property
    def credentials_path(self) -> Path:
        return self.data_dir / CREDENTIALS_FILE

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        """Build the configuration from `environ` (default: the process environment)."""
        env = _Reader(os.environ if environ is None else environ)
        data_dir = Path(env.text("SVC_DATA_DIR") or "var")
        values = dict(
            data_dir=data_dir,
            database_url=env.database_url("DATABASE_URL"),
            host=env.text("SVC_HOST") or "127.0.0.1",
            port=env.integer("SVC_PORT", 8080, low=1, high=65535),
            base_url=env.url("SVC_BASE_URL") or "http://127.0.0.1:8080",
            threads=env.integer("SVC_THREADS", 8, low=1, high=256),
            ci_webhook_secret=env.secret("SVC_CI_WEBHOOK_SECRET"),
            basic_auth=env.basic_auth("SVC_BASIC_AUTH"),
            discord_webhook_url=env.webhook_url("DISCORD_WEBHOOK_URL"),
            ops_pulse_always=env.flag("OPS_PULSE_ALWAYS"),
            site_url=env.url("SVC_SITE_URL"),
            staging_url=env.url("SVC_STAGING_URL", https_only=True),
            staging_ca_file=env.existing_file("SVC_STAGING_CA_FILE"),
            tracker_api_url=env.url("SVC_TRACKER_API_URL") or DEFAULT_TRACKER_API_URL,
            tracker_api_key=env.text("SVC_TRACKER_API_KEY"),
            github_webhook_secret=env.secret("SVC_GITHUB_WEBHOOK_SECRET"),
            gitlab_webhook_token=env.secret("SVC_GITLAB_WEBHOOK_TOKEN"),
            forge_webhook_secret=env.secret("SVC_FORGE_WEBHOOK_SECRET"),
            tracker_webhook_secret=env.secret("SVC_TRACKER_WEBHOOK_SECRET"),
            github_api_url=env.url("SVC_GITHUB_API_URL") or DEFAULT_GITHUB_API_URL,
            github_api_token=env.text("SVC_GITHUB_TOKEN"),
            gitlab_api_url=env.url("SVC_GITLAB_API_URL") or DEFAULT_GITLAB_API_URL,
            gitlab_api_token=env.text("SVC_GITLAB_TOKEN"),
            github_hooks=env.hooks("SVC_GITHUB_HOOKS", _GITHUB_HOOK, "repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID"),
            gitlab_hooks=env.hooks("SVC_GITLAB_HOOKS", _GITLAB_HOOK, "projects/ID/hooks/ID"),
            reconcile_max=env.integer("SVC_RECONCILE_MAX", 50, low=1, high=1000),
            password_time_cost=env.integer("SVC_PASSWORD_TIME_COST", 3, low=1, high=100),
            password_memory_kib=env.integer("SVC_PASSWORD_MEMORY_KIB", 65536, low=8, high=4 * 1024 * 1024),
            password_parallelism=env.integer("SVC_PASSWORD_PARALLELISM", 4, low=1, high=64),
            worker_lease_seconds=env.integer("SVC_WORKER_LEASE_SECONDS", 300, low=1, high=86400),
            worker_lease_attempts=env.integer("SVC_WORKER_LEASE_ATTEMPTS", 3, low=1, high=100),
            dispatch_max_age_seconds=env.integer("SVC_DISPATCH_MAX_AGE_SECONDS", 3600, low=1, high=366 * 86400),
            worker_branch_prefix=env.text("SVC_WORKER_BRANCH_PREFIX") or "svc/",
            router_allowlist=env.id_list("SVC_ROUTER_ALLOWLIST"),
            webhook_tolerance_seconds=env.number("SVC_WEBHOOK_TOLERANCE_SECONDS", 60.0, low=1, high=3600),
            ticket_prefixes=env.key_prefixes("SVC_TICKET_PREFIXES"),
            bay_wipe_command=env.command("SVC_BAY_WIPE_COMMAND"),
            bay_wipe_timeout=env.number("SVC_BAY_WIPE_TIMEOUT", 120.0, low=1, high=3600),
            max_body_bytes=env.integer("SVC_MAX_BODY_BYTES", 1_048_576, low=1024, high=64 * 1_048_576),
            max_connections_per_client=env.integer("SVC_MAX_CONNECTIONS_PER_CLIENT", 20, low=1, high=10_000),
            request_header_timeout=env.number("SVC_REQUEST_HEADER_TIMEOUT", 10.0, low=1, high=600),
            request_body_min_rate=env.number("SVC_REQUEST_BODY_MIN_RATE", 500.0, low=1, high=1e9),
            min_free_disk_mb=env.integer("SVC_MIN_FREE_DISK_MB", 64, low=0, high=1 << 40),
            trusted_proxies=env.networks("SVC_TRUSTED_PROXY"),
            trusted_proxy_count=env.integer("SVC_TRUSTED_PROXY_COUNT", 1, low=1, high=10),
            trusted_proxy_headers=env.proxy_headers("SVC_TRUSTED_PROXY_HEADERS"),
            stuck_after_hours=env.number("SVC_STUCK_AFTER_HOURS", 48.0, low=0.1, high=24 * 365),
            retry_budget_per_day=env.integer("SVC_RETRY_BUDGET", 2, low=0, high=1000),
            promotion_days=env.integer("SVC_PROMOTION_DAYS", 14, low=1, high=366),
            promotion_min_settled=env.integer("SVC_PROMOTION_MIN_SETTLED", 20, low=1, high=1_000_000),
            promotion_min_agreement=env.number("SVC_PROMOTION_MIN_AGREEMENT", 0.8, low=0, high=1),
            poller_window_minutes=env.integer("SVC_POLLER_WINDOW_MINUTES", 30, low=1, high=7 * 24 * 60),
            snapshot_max_age=env.number("SVC_SNAPSHOT_MAX_AGE", 2.0, low=0, high=300),
            keep_days=env.integer("SVC_KEEP_DAYS", DETAIL_AGE_MAX, low=1, high=100 * 366),
            log_level=env.choice("SVC_LOG_LEVEL", "INFO", {"DEBUG", "INFO", "WARNING", "ERROR"}),
            ops_scheduler=env.choice("SVC_OPS_SCHEDULER", "JOBS", {"JOBS", "EXTERNAL"}).lower(),
            jobs_clock_offset=env.number("SVC_JOBS_CLOCK_OFFSET", 0.0, low=-10 * 366 * 86400, high=10 * 366 * 86400),
        )
        for hooks, token in (("SVC_GITHUB_HOOKS", "SVC_GITHUB_TOKEN"), ("SVC_GITLAB_HOOKS", "SVC_GITLAB_TOKEN")):
            # Hooks the reconciler could never read would fail every run: say so at start instead.
            if env.text(hooks) is not None and env.text(token) is None:
                env.problems.append(f"{hooks}: needs {token} (a token that may read the hooks' deliveries)")
        if values["password_memory_kib"] < 8 * values["password_parallelism"]:
            # argon2 itself refuses less, at the first password hashed: say so at start instead.
            env.problems.append(
                f"SVC_PASSWORD_MEMORY_KIB: must be at least 8 KiB per lane of SVC_PASSWORD_PARALLELISM "
                f"({8 * values['password_parallelism']}), got {values['password_memory_kib']}"
            )
        if not values["trusted_proxies"]:
            # Without a trusted proxy these would silently do nothing; say so instead (waitress refuses them too).
            for name in ("SVC_TRUSTED_PROXY_COUNT", "SVC_TRUSTED_PROXY_HEADERS"):
                if env.text(name) is not None:
                    env.problems.append(f"{name}: has no meaning without SVC_TRUSTED_PROXY")
        values["policy_variables_set"] = frozenset(
            name for name in ("SVC_ROUTER_ALLOWLIST", "SVC_RETRY_BUDGET") if env.text(name) is not None
        )
        if env.problems:
            raise ConfigError(env.problems)
        return cls(**values)


class _Reader:
    """Parses one variable at a time and collects every problem instead of stopping at the first."""

    def __init__(self, environ: Mapping[str, str]):
        self.environ = environ
        self.problems: list[str] = []

    def _raw(self, name: str) -> str | None:
        value = self.environ.get(name)
        if value is None or value.strip() == "":
            return None
        return value.strip()

    def _bad(self, name: str, why: str) -> None:
        self.problems.append(f"{name}: {why}")

    def text(self, name: str) -> str | None:
        return self._raw(name)

    def integer(self, name: str, default: int, *, low: int, high: int) -> int:
        raw = self._raw(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            self._bad(name, f"expected a whole number, got {raw!r}")
            return default
        if not low <= value <= high:
            self._bad(name, f"must be between {low} and {high}, got {value}")
        return value

    def number(self, name: str, default: float, *, low: float, high: float) -> float:
        raw = self._raw(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            self._bad(name, f"expected a number, got {raw!r}")
            return default
        if not low <= value <= high:
            self._bad(name, f"must be between {low} and {high}, got {raw}")
        return value

    def flag(self, name: str) -> bool:
        raw = self._raw(name)
        if raw is None:
            return False
        lowered = raw.lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        self._bad(name, f"expected 1 or 0, got {raw!r}")
        return False

    def choice(self, name: str, default: str, options: set[str]) -> str:
        raw = self._raw(name)
        if raw is None:
            return default
        if raw.upper() not in options:
            self._bad(name, f"expected one of {', '.join(sorted(options))}, got {raw!r}")
            return default
        return raw.upper()

    def url(self, name: str, *, https_only: bool = False) -> str | None:
        raw = self._raw(name)
        if raw is None:
            return None
        parts = urlsplit(raw)
        allowed = {"https"} if https_only else {"http", "https"}
        if parts.scheme not in allowed or not parts.hostname:
            want = "an https:// URL" if https_only else "an http:// or https:// URL"
            self._bad(name, f"expected {want}, got {_redact_url(raw)!r}")
            return None
        return raw.rstrip("/")

    def webhook_url(self, name: str) -> str | None:
        # The chat webhook URL carries a token: https only, or plain http to this machine (tests, a local relay).
        raw = self._raw(name)
        if raw is None:
            return None
        from integrations import discord  # here, not above: reading the configuration needs no HTTP client

        try:
            discord.check_url(raw)
        except ValueError:
            self._bad(name, f"expected an https:// URL (or http:// to a loopback address), got {_redact_url(raw)!r}")
            return None
        return raw

    def secret(self, name: str) -> str | None:
        raw = self._raw(name)
        if raw is None:
            return None
        if len(raw) < MIN_SECRET_LENGTH:
            self._bad(name, f"must be at least {MIN_SECRET_LENGTH} characters long")
            return None
        return raw

    def basic_auth(self, name: str) -> str | None:
        raw = self._raw(name)
        if raw is None:
            return None
        user, sep, password = raw.partition(":")
        if not sep or not user or not password:
            self._bad(name, "expected the form user:password")
            return None
        if len(password) < 8:
            self._bad(name, "the password must be at least 8 characters long")
            return None
        return raw

    def existing_file(self, name: str) -> Path | None:
        raw = self._raw(name)
        if raw is None:
            return None
        path = Path(raw)
        if not path.is_file():
            self._bad(name, f"no such file: {raw}")
            return None
        return path

    def hooks(self, name: str, pattern: re.Pattern[str], form: str) -> tuple[str, ...]:
        """Comma-separated API paths of hooks, each of the form `form`; in the order given, without repeats."""
        raw = self._raw(name)
        if raw is None:
            return ()
        found: list[str] = []
        for part in (p.strip().strip("/") for p in raw.split(",")):
            if not part:
                continue
            if not pattern.match(part):
                self._bad(name, f"expected API paths of the form {form}, got {part!r}")
                continue
            if part not in found:
                found.append(part)
        return tuple(found)

    def id_list(self, name: str) -> frozenset[str]:
        raw = self._raw(name)
        if raw is None:
            return frozenset()
        return frozenset(part.strip() for part in raw.split(",") if part.strip())

    def networks(self, name: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """Comma-separated IP addresses or networks (CIDR), e.g. `10.0.0.5, 10.1.0.0/16, ::1`."""
        raw = self._raw(name)
        if raw is None:
            return ()
        found = []
        for part in (p.strip() for p in raw.split(",")):
            if not part:
                continue
            try:
                found.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                self._bad(
                    name,
                    f"expected IP addresses or networks, comma-separated (e.g. 10.0.0.5 or 10.0.0.0/24), got {part!r}",
                )
        return tuple(found)

    def proxy_headers(self, name: str) -> frozenset[str]:
        raw = self._raw(name)
        if raw is None:
            return DEFAULT_PROXY_HEADERS
        headers = frozenset(p.strip().lower() for p in raw.split(",") if p.strip())
        unknown = headers - PROXY_HEADERS
        if unknown:
            self._bad(
                name,
                f"unknown header {', '.join(sorted(unknown))}; expected some of {', '.join(sorted(PROXY_HEADERS))}",
            )
        elif "forwarded" in headers and len(headers) > 1:
            self._bad(name, "forwarded (RFC 7239) cannot be trusted together with the X-Forwarded-* headers")
        elif not headers & {"x-forwarded-for", "forwarded"}:
            self._bad(name, "must include x-forwarded-for or forwarded: the client's address is what the proxy tells")
        else:
            return headers
        return DEFAULT_PROXY_HEADERS

    def key_prefixes(self, name: str) -> frozenset[str]:
        # `PORT, bill` -> {"PORT", "BILL"}: the part of a ticket key before its dash (keys are upper case).
        raw = self._raw(name)
        if raw is None:
            return frozenset()
        prefixes = set()
        for part in (p.strip() for p in raw.split(",")):
            if not part:
                continue
            if not _KEY_PREFIX.match(part.upper()):
                self._bad(name, f"{part!r} is not a ticket-key prefix (a letter, then letters or digits, e.g. PORT)")
                continue
            prefixes.add(part.upper())
        return frozenset(prefixes)

    def command(self, name: str) -> tuple[str, ...] | None:
        raw = self._raw(name)
        if raw is None:
            return None
        try:
            argv = tuple(shlex.split(raw))
        except ValueError as exc:
            self._bad(name, f"cannot be split into arguments: {exc}")
            return None
        if not argv:
            return None
        if not any("{slot}" in arg for arg in argv):
            self._bad(name, "must contain {slot}, which is replaced by the slot's name")
        return argv

    def database_url(self, name: str) -> str:
        raw = self._raw(name)
        if raw is None:
            return ""
        scheme = urlsplit(raw).scheme
        if scheme not in {"sqlite", "postgres", "postgresql"}:
            self._bad(name, f"expected sqlite:///path or postgresql://host/db, got scheme {scheme!r}")
            return ""
        return raw


def _redact_url(url: str) -> str:
    """A URL with its path and query hidden, for messages: webhook URLs carry tokens."""
    parts = urlsplit(url)
    if not parts.scheme:
        return "<not a URL>"
    return f"{parts.scheme}://{parts.hostname or ''}/…"


def read_credentials_file(path: Path) -> dict[str, str]:
    """Read `NAME=value` lines; a missing file reads as empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    values = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() and not name.lstrip().startswith("#"):
            values[name.strip()] = value.strip()
    return values


@contextlib.contextmanager
def _credentials_lock(path: Path) -> Iterator[None]:
    """An exclusive lock beside the credentials file, held while one process reads, generates and writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def write_credentials_file(path: Path, values: Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "# Generated by svc on first start. Keep this file private.\n"
    body += "".join(f"{name}={value}\n" for name, value in values.items())
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # this process's own: never renamed away by another
    # Created 0600 from the first byte, then renamed into place so a crash never leaves half a file.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(body)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
