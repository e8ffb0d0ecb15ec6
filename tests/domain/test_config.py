import stat

import pytest

from domain.config import Config, ConfigError, read_credentials_file


def test_defaults_match_the_readme():
    config = Config.from_env({})
    assert config.host == "127.0.0.1"
    assert config.port == 8080
    assert config.base_url == "http://127.0.0.1:8080"
    assert config.database_url == "sqlite:///var/svc.sqlite3"
    assert config.max_body_bytes == 1_048_576
    assert config.tracker_api_url == "https://api.linear.app/graphql"
    assert config.router_allowlist == frozenset()
    assert config.ci_webhook_secret is None and config.basic_auth is None


def test_every_bad_value_is_named_at_once():
    with pytest.raises(ConfigError) as caught:
        Config.from_env(
            {
                "SVC_PORT": "eighty",
                "SVC_BASIC_AUTH": "no-colon",
                "DISCORD_WEBHOOK_URL": "http://discord.example/api/webhooks/1/token",
                "SVC_STAGING_URL": "http://staging.example",
                "DATABASE_URL": "mysql://x/y",
                "OPS_PULSE_ALWAYS": "sometimes",
                "SVC_CI_WEBHOOK_SECRET": "short",
                "SVC_BAY_WIPE_COMMAND": "wipe-bay",
            }
        )
    named = {p.split(":", 1)[0] for p in caught.value.problems}
    assert named == {
        "SVC_PORT",
        "SVC_BASIC_AUTH",
        "DISCORD_WEBHOOK_URL",
        "SVC_STAGING_URL",
        "DATABASE_URL",
        "OPS_PULSE_ALWAYS",
        "SVC_CI_WEBHOOK_SECRET",
        "SVC_BAY_WIPE_COMMAND",
    }


def test_a_chat_webhook_token_never_appears_in_the_error():
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"DISCORD_WEBHOOK_URL": "http://discord.example/api/webhooks/1/SECRET-TOKEN"})
    assert "SECRET-TOKEN" not in str(caught.value)


def test_http_chat_webhook_is_allowed_only_to_loopback():
    config = Config.from_env({"DISCORD_WEBHOOK_URL": "http://127.0.0.1:9999/api/webhooks/1/t"})
    assert config.discord_webhook_url == "http://127.0.0.1:9999/api/webhooks/1/t"


def test_values_are_parsed():
    config = Config.from_env(
        {
            "SVC_DATA_DIR": "/srv/svc",
            "SVC_PORT": "9000",
            "OPS_PULSE_ALWAYS": "1",
            "SVC_ROUTER_ALLOWLIST": "alice, bot-1,,",
            "SVC_BAY_WIPE_COMMAND": "ssh bays wipe {slot}",
            "DATABASE_URL": "postgresql://127.0.0.1:5432/test",
        }
    )
    assert config.port == 9000
    assert config.ops_pulse_always is True
    assert config.router_allowlist == {"alice", "bot-1"}
    assert config.bay_wipe_command == ("ssh", "bays", "wipe", "{slot}")
    assert config.database_url == "postgresql://127.0.0.1:5432/test"


def test_first_start_generates_private_credentials_and_later_starts_reuse_them(tmp_path, capsys):
    config = Config(data_dir=tmp_path / "data")
    first = config.with_generated_credentials()
    path = tmp_path / "data" / "credentials.env"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert str(path) in capsys.readouterr().out
    assert len(first.ci_webhook_secret) >= 32
    user, _, password = first.basic_auth.partition(":")
    assert user == "svc" and len(password) >= 16
    second = config.with_generated_credentials()
    assert (second.ci_webhook_secret, second.basic_auth) == (first.ci_webhook_secret, first.basic_auth)
    # A later start says where they are too (its first start's output is long gone).
    assert capsys.readouterr().out == f"svc: credentials from {path}; read them with: cat {path}\n"


def test_processes_starting_at_once_agree_on_the_credentials_they_generate(tmp_path):
    """`svc serve` and `svc jobs` started side by side on a fresh data directory: the second to get there reads what
    the first generated, so both use the secrets the file holds (the lock is per open file, so threads show it)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        configs = list(pool.map(lambda _: Config(data_dir=tmp_path).with_generated_credentials(), range(8)))
    stored = read_credentials_file(tmp_path / "credentials.env")
    assert {c.ci_webhook_secret for c in configs} == {stored["SVC_CI_WEBHOOK_SECRET"]}
    assert {c.basic_auth for c in configs} == {stored["SVC_BASIC_AUTH"]}
    assert not list(tmp_path.glob("*.tmp"))


def test_a_fresh_install_generates_a_credential_of_its_own_for_each_webhook_sender(tmp_path):
    first = Config(data_dir=tmp_path).with_generated_credentials()
    values = (first.github_webhook_secret, first.gitlab_webhook_token, first.tracker_webhook_secret)
    assert all(v and len(v) >= 32 for v in values) and len(set(values)) == 3
    assert (first.github_secret, first.gitlab_token) == values[:2]
    assert first.forge_secret_check()[0] is True
    again = Config(data_dir=tmp_path).with_generated_credentials()
    assert (again.github_webhook_secret, again.gitlab_webhook_token, again.tracker_webhook_secret) == values


def test_the_shared_forge_secret_stands_in_for_whichever_sender_has_none_of_its_own(tmp_path):
    shared = "shared-forge-secret-0123456789"
    only_shared = Config(data_dir=tmp_path, forge_webhook_secret=shared).with_generated_credentials()
    assert (only_shared.github_secret, only_shared.gitlab_token) == (shared, shared)
    ok, detail = only_shared.forge_secret_check()
    assert not ok and "plaintext" in detail
    own_github = Config(github_webhook_secret="github-own-secret-0123456789", forge_webhook_secret=shared)
    assert (own_github.github_secret, own_github.gitlab_token) == ("github-own-secret-0123456789", shared)
    ok, detail = own_github.forge_secret_check()
    assert ok and "stands in for SVC_GITLAB_WEBHOOK_TOKEN" in detail
    # Two variables set to one value share it just the same.
    same = Config(github_webhook_secret=shared, gitlab_webhook_token=shared)
    assert same.forge_secret_check()[0] is False


def test_each_forge_sender_reads_its_own_variable():
    config = Config.from_env(
        {"SVC_GITHUB_WEBHOOK_SECRET": "github-secret-0123456789", "SVC_GITLAB_WEBHOOK_TOKEN": "gitlab-token-0123456789"}
    )
    assert (config.github_secret, config.gitlab_token) == ("github-secret-0123456789", "gitlab-token-0123456789")
    assert config.forge_webhook_secret is None


def test_environment_secrets_win_over_the_generated_file(tmp_path):
    Config(data_dir=tmp_path).with_generated_credentials()
    config = Config(data_dir=tmp_path, basic_auth="ops:from-the-environment").with_generated_credentials()
    assert config.basic_auth == "ops:from-the-environment"


def test_trusted_proxies_are_addresses_or_networks():
    import ipaddress

    config = Config.from_env(
        {
            "SVC_TRUSTED_PROXY": "10.0.0.5, 10.1.0.0/16,::1",
            "SVC_TRUSTED_PROXY_COUNT": "2",
            "SVC_TRUSTED_PROXY_HEADERS": "X-Forwarded-For, x-forwarded-host",
        }
    )
    assert config.trusted_proxies == (
        ipaddress.ip_network("10.0.0.5/32"),
        ipaddress.ip_network("10.1.0.0/16"),
        ipaddress.ip_network("::1/128"),
    )
    assert config.trusted_proxy_count == 2
    assert config.trusted_proxy_headers == {"x-forwarded-for", "x-forwarded-host"}


def test_unset_no_proxy_is_trusted_and_the_defaults_are_what_a_proxy_sends():
    config = Config.from_env({})
    assert config.trusted_proxies == ()
    assert config.trusted_proxy_count == 1
    assert config.trusted_proxy_headers == {"x-forwarded-for", "x-forwarded-proto"}


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"SVC_TRUSTED_PROXY": "nginx"}, "SVC_TRUSTED_PROXY: expected IP addresses or networks"),
        ({"SVC_TRUSTED_PROXY": "10.0.0.0/33"}, "SVC_TRUSTED_PROXY: expected IP addresses or networks"),
        ({"SVC_TRUSTED_PROXY": "*"}, "SVC_TRUSTED_PROXY: expected IP addresses or networks"),
        ({"SVC_TRUSTED_PROXY": "10.0.0.5", "SVC_TRUSTED_PROXY_COUNT": "0"}, "SVC_TRUSTED_PROXY_COUNT: must be"),
        ({"SVC_TRUSTED_PROXY": "10.0.0.5", "SVC_TRUSTED_PROXY_HEADERS": "x-real-ip"}, "unknown header x-real-ip"),
        (
            {"SVC_TRUSTED_PROXY": "10.0.0.5", "SVC_TRUSTED_PROXY_HEADERS": "forwarded,x-forwarded-for"},
            "forwarded (RFC 7239) cannot be trusted together",
        ),
        (
            {"SVC_TRUSTED_PROXY": "10.0.0.5", "SVC_TRUSTED_PROXY_HEADERS": "x-forwarded-proto"},
            "must include x-forwarded-for or forwarded",
        ),
        ({"SVC_TRUSTED_PROXY_COUNT": "2"}, "SVC_TRUSTED_PROXY_COUNT: has no meaning without SVC_TRUSTED_PROXY"),
        ({"SVC_TRUSTED_PROXY_HEADERS": "forwarded"}, "SVC_TRUSTED_PROXY_HEADERS: has no meaning without"),
    ],
)
def test_a_bad_proxy_setting_is_named(environ, message):
    with pytest.raises(ConfigError) as caught:
        Config.from_env(environ)
    assert any(message in problem for problem in caught.value.problems), caught.value.problems


def test_the_replay_window_and_ticket_prefixes():
    defaults = Config.from_env({})
    assert (defaults.webhook_tolerance_seconds, defaults.ticket_prefixes) == (60.0, frozenset())
    config = Config.from_env({"SVC_WEBHOOK_TOLERANCE_SECONDS": "300", "SVC_TICKET_PREFIXES": "web, Bill,,OPS2"})
    assert config.webhook_tolerance_seconds == 300
    assert config.ticket_prefixes == {"WEB", "BILL", "OPS2"}
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"SVC_WEBHOOK_TOLERANCE_SECONDS": "0", "SVC_TICKET_PREFIXES": "PORT, 12, PORT-12"})
    problems = caught.value.problems
    assert [p.split(":", 1)[0] for p in problems] == [
        "SVC_WEBHOOK_TOLERANCE_SECONDS",
        "SVC_TICKET_PREFIXES",
        "SVC_TICKET_PREFIXES",
    ]
    assert "'12' is not a ticket-key prefix" in problems[1]


def test_what_a_rule_must_earn_before_it_goes_live():
    defaults = Config.from_env({})
    assert (defaults.promotion_days, defaults.promotion_min_settled, defaults.promotion_min_agreement) == (14, 20, 0.8)
    given = Config.from_env(
        {"SVC_PROMOTION_DAYS": "7", "SVC_PROMOTION_MIN_SETTLED": "50", "SVC_PROMOTION_MIN_AGREEMENT": "0.9"}
    )
    assert (given.promotion_days, given.promotion_min_settled, given.promotion_min_agreement) == (7, 50, 0.9)
    with pytest.raises(ConfigError) as caught:
        Config.from_env(
            {"SVC_PROMOTION_DAYS": "0", "SVC_PROMOTION_MIN_SETTLED": "many", "SVC_PROMOTION_MIN_AGREEMENT": "1.5"}
        )
    named = {p.split(":", 1)[0] for p in caught.value.problems}
    assert named == {"SVC_PROMOTION_DAYS", "SVC_PROMOTION_MIN_SETTLED", "SVC_PROMOTION_MIN_AGREEMENT"}


def test_the_cost_of_hashing_a_password():
    defaults = Config.from_env({})
    assert (defaults.password_time_cost, defaults.password_memory_kib, defaults.password_parallelism) == (3, 65536, 4)
    given = Config.from_env(
        {"SVC_PASSWORD_TIME_COST": "4", "SVC_PASSWORD_MEMORY_KIB": "262144", "SVC_PASSWORD_PARALLELISM": "2"}
    )
    assert (given.password_time_cost, given.password_memory_kib, given.password_parallelism) == (4, 262144, 2)
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"SVC_PASSWORD_TIME_COST": "0", "SVC_PASSWORD_PARALLELISM": "many"})
    assert {p.split(":", 1)[0] for p in caught.value.problems} == {"SVC_PASSWORD_TIME_COST", "SVC_PASSWORD_PARALLELISM"}
    # argon2 needs 8 KiB per lane; less would fail at the first password hashed, so it stops the start instead.
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"SVC_PASSWORD_MEMORY_KIB": "16", "SVC_PASSWORD_PARALLELISM": "4"})
    assert caught.value.problems == [
        "SVC_PASSWORD_MEMORY_KIB: must be at least 8 KiB per lane of SVC_PASSWORD_PARALLELISM (32), got 16"
    ]
