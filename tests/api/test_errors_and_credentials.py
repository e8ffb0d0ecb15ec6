"""Bad input and missing credentials: a clear problem+json answer, and nothing changes."""

import base64
import json

import pytest

from api.auth import FAILURE_LIMIT, FailedCredentials

BODY = {"key": "PORT-1", "initiative_id": "port", "title": "x"}


@pytest.fixture
def initiative(api):
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port"})


def nothing_created(api):
    return api.get("/api/v1/tickets").json["tickets"] == []


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Basic " + base64.b64encode(b"admin:wrong").decode()},
        {"Authorization": "Bearer token"},
        {"Authorization": "Basic !!!not-base64"},
        {"X-Svc-CI-Secret": "test-ci-secret-0123456789abcdef"},  # the CI secret does not open basic endpoints
    ],
)
def test_basic_endpoints_refuse_missing_or_wrong_credentials(api, initiative, headers):
    result = api.post("/api/v1/tickets", json=BODY, auth=None, headers=headers)
    assert result.status_code == 401
    assert result.headers["www-authenticate"].startswith('Basic realm="svc"')
    assert result.headers["content-type"] == "application/problem+json"
    assert result.json["status"] == 401
    assert nothing_created(api)


def test_not_json_is_400_and_wrong_media_type_is_415(api, initiative):
    broken = api.post("/api/v1/tickets", body=b'{"key": ', headers={"Content-Type": "application/json"})
    assert broken.status_code == 400
    typed = api.post(
        "/api/v1/tickets", body=b"key=PORT-1", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert typed.status_code == 415
    assert nothing_created(api)


def test_invalid_utf8_is_400(api, initiative):
    result = api.post("/api/v1/tickets", body=b'{"key": "\xff\xfe"}', headers={"Content-Type": "application/json"})
    assert result.status_code == 400
    assert "UTF-8" in result.json["detail"]


def test_deep_json_is_400_not_a_crash(api, initiative):
    for depth in (40, 100_000):
        body = b"[" * depth + b"]" * depth
        result = api.post("/api/v1/tickets", body=body, headers={"Content-Type": "application/json"})
        assert result.status_code == 400
        assert "nested deeper" in result.json["detail"]


def test_nan_is_not_json(api):
    result = api.put(
        "/api/v1/wallet",
        body=b'{"budget": NaN, "spent": 0, "locked": false}',
        headers={"Content-Type": "application/json"},
    )
    assert result.status_code == 400


def test_a_body_over_the_limit_is_413_problem_json(app_factory, config_factory):
    from fakes import FakeClock
    from testclient import ApiClient

    app = app_factory(config_factory(max_body_bytes=2048), clock=FakeClock())
    api = ApiClient(app, basic="admin:correct-horse-battery", ci_secret="test-ci-secret-0123456789abcdef")
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port"})
    result = api.post("/api/v1/tickets", json={**BODY, "title": "x" * 4096})
    assert result.status_code == 413
    assert result.headers["content-type"] == "application/problem+json"
    assert nothing_created(api)


def test_unknown_routes_and_methods_are_problem_json(api):
    assert api.get("/api/v1/nothing-here").status_code == 404
    result = api.delete("/api/v1/tickets")
    assert result.status_code == 405
    assert result.headers["content-type"] == "application/problem+json"


def test_health_and_openapi_need_no_credentials(api):
    health = api.get("/healthz", auth=None)
    # "degraded": no jobs process runs beside this app; it serves all the same.
    assert (health.status_code, health.json["status"]) == (200, "degraded")
    assert api.get("/api/v1/openapi.json", auth=None).json["openapi"] == "3.1.0"


def test_a_request_id_is_returned_and_a_sane_one_is_kept(api):
    assert len(api.get("/healthz").headers["x-request-id"]) == 32
    assert api.get("/healthz", headers={"X-Request-Id": "abc-123"}).headers["x-request-id"] == "abc-123"
    assert api.get("/healthz", headers={"X-Request-Id": "bad id\n"}).headers["x-request-id"] != "bad id\n"


def test_repeated_failed_credentials_are_slowed_with_429(app_factory, config):
    from fakes import FakeClock
    from testclient import ApiClient

    ticks = [1000.0]
    failures = FailedCredentials(monotonic=lambda: ticks[0])
    app = app_factory(config, failures=failures, clock=FakeClock())
    api = ApiClient(app, basic="admin:correct-horse-battery", ci_secret="x" * 20)
    wrong = {"Authorization": "Basic " + base64.b64encode(b"admin:guess").decode()}
    for _ in range(10):
        assert api.get("/api/v1/wallet", auth=None, headers=wrong).status_code == 401
    locked = api.get("/api/v1/wallet")  # even the right credentials wait out the minute
    assert locked.status_code == 429
    assert locked.headers["retry-after"] == "60"  # the failures came at this very tick: a whole minute to wait
    ticks[0] += 61
    assert api.get("/api/v1/wallet").status_code == 200


NO_CREDENTIALS = [
    ("GET", "/api/v1/wallet", {}),  # basic
    ("GET", "/api/v1/wallet", {"X-Svc-CI-Secret": ""}),  # an empty header gives nothing
    ("GET", "/api/v1/agents/writing/config", {}),  # the CI secret
    ("GET", "/api/v1/agents/runs", {}),  # either
    ("POST", "/api/v1/webhooks/forge", {"X-GitHub-Event": "ping", "Content-Type": "application/json"}),
    ("POST", "/api/v1/webhooks/tracker", {"Content-Type": "application/json"}),
]


@pytest.mark.parametrize(("method", "path", "headers"), NO_CREDENTIALS, ids=lambda v: str(v))
def test_a_request_without_credentials_is_challenged_and_never_counted(app_factory, config, method, path, headers):
    # A browser asks without credentials first, for the page and for every file it loads: challenges are not
    # guesses. Three times the limit, and the right credentials still go through.
    from fakes import FakeClock
    from testclient import ApiClient

    app = app_factory(config, failures=FailedCredentials(monotonic=lambda: 1000.0), clock=FakeClock())
    api = ApiClient(app, basic="admin:correct-horse-battery", ci_secret="x" * 20)
    for _ in range(3 * FAILURE_LIMIT):
        challenged = api.request(method, path, auth=None, headers=headers, body=b"{}" if method == "POST" else None)
        assert challenged.status_code == 401
        assert challenged.json["detail"].startswith(("no credentials:", "no signature:")), challenged.json["detail"]
    assert api.get("/api/v1/wallet").status_code == 200


def test_no_password_and_a_wrong_password_say_which(api):
    none = api.get("/api/v1/wallet", auth=None)
    wrong = api.get("/api/v1/wallet", auth=None, headers=basic("admin:guess"))
    unknown = api.get("/api/v1/wallet", auth=None, headers=basic("nobody:guess"))
    bearer = api.get("/api/v1/wallet", auth=None, headers={"Authorization": "Bearer token"})
    assert [r.status_code for r in (none, wrong, unknown, bearer)] == [401] * 4
    assert all(r.headers["www-authenticate"].startswith('Basic realm="svc"') for r in (none, wrong, unknown, bearer))
    assert none.json["detail"] == (
        "no credentials: this endpoint needs HTTP basic credentials (a person's account, or SVC_BASIC_AUTH)"
    )
    assert wrong.json["detail"] == (
        "wrong credentials: the user name or the password is wrong (or the account was removed). "
        "This endpoint needs HTTP basic credentials (a person's account, or SVC_BASIC_AUTH)"
    )
    assert unknown.json["detail"] == wrong.json["detail"]  # which account names exist is not given away
    assert bearer.json["detail"].startswith(
        "wrong credentials: the Authorization header does not carry HTTP basic credentials."
    )


def test_no_ci_secret_and_a_wrong_one_say_which(api):
    none = api.get("/api/v1/agents/writing/config", auth=None)
    wrong = api.get("/api/v1/agents/writing/config", auth=None, headers={"X-Svc-CI-Secret": "guess-guess-guess"})
    assert (none.status_code, wrong.status_code) == (401, 401)
    needed = "the X-Svc-CI-Secret header with the CI webhook secret (SVC_CI_WEBHOOK_SECRET)"
    assert none.json["detail"] == f"no credentials: this endpoint needs {needed}"
    assert wrong.json["detail"] == (
        f"wrong credentials: the X-Svc-CI-Secret header is not the CI webhook secret. This endpoint needs {needed}"
    )
    on_basic = api.get("/api/v1/wallet", auth=None, headers={"X-Svc-CI-Secret": "guess-guess-guess"})
    assert "the X-Svc-CI-Secret header does not open it" in on_basic.json["detail"]


def basic(user_password: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(user_password.encode()).decode()}


def test_secrets_are_not_echoed_in_error_bodies(api):
    result = api.get("/api/v1/wallet", auth=None, headers={"X-Svc-CI-Secret": "guess-guess-guess"})
    assert "guess-guess-guess" not in result.text
    assert "correct-horse" not in json.dumps(result.json)


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        (
            {"Origin": "https://evil.example"},
            "its Origin https://evil.example is not this Host (falconframework.org); behind a reverse proxy, pass on "
            "the Host the browser sent, port included (nginx: proxy_set_header Host $http_host)",
        ),
        (
            {"Sec-Fetch-Site": "cross-site"},
            "the browser marked it cross-site (Sec-Fetch-Site: cross-site; Origin not sent)",
        ),
        ({"Origin": "null"}, "its Origin is null"),
        # What a proxy that drops the port does (nginx's `Host $host` behind https://host:8443): said so.
        (
            {"Origin": "https://svc.example:8443", "Host": "svc.example"},
            "its Origin https://svc.example:8443 is not this Host (svc.example)",
        ),
    ],
)
def test_cross_site_requests_cannot_ride_on_cached_basic_credentials(api, initiative, headers, why):
    api.post("/api/v1/tickets", json=BODY)
    result = api.post("/api/v1/tickets/PORT-1/cancel", headers=headers)
    assert result.status_code == 403
    assert result.json["detail"].startswith("requests from another site may not change anything here: " + why)
    assert api.get("/api/v1/tickets/PORT-1").json["stage"] == "agreement"


def test_a_change_through_a_proxy_that_keeps_the_port_is_same_site(api, initiative):
    api.post("/api/v1/tickets", json=BODY)
    through = {"Origin": "https://svc.example:8443", "Host": "svc.example:8443", "Sec-Fetch-Site": "same-origin"}
    assert api.post("/api/v1/tickets/PORT-1/cancel", headers=through).status_code == 200


def test_same_origin_browser_requests_are_allowed(api, initiative):
    api.post("/api/v1/tickets", json=BODY)
    same = {"Origin": "http://falconframework.org", "Sec-Fetch-Site": "same-origin"}
    assert api.post("/api/v1/tickets/PORT-1/cancel", headers=same).status_code == 200


def test_nul_in_a_json_string_is_400_and_records_nothing(api, initiative):
    # Found by the schemathesis run on PostgreSQL, whose text cannot hold U+0000: such a name was a 500 there
    # (and stored on SQLite). Now it is refused on both, naming where it is.
    body = b'{"key": "PORT-1", "initiative_id": "port", "title": "a\\u0000b", "x\\u0000": 1}'
    result = api.post("/api/v1/tickets", body=body, headers={"Content-Type": "application/json"})
    assert result.status_code == 400
    assert result.headers["content-type"] == "application/problem+json"
    assert [e["path"] for e in result.json["errors"]] == ["/title", "/x\\u0000"]
    assert nothing_created(api)
    escaped = api.post("/api/v1/tickets", json={**BODY, "title": "a backslash-u: \\u0000 is fine"})
    assert escaped.status_code == 201


def test_an_unpaired_surrogate_in_a_json_string_is_400_and_records_nothing(api, initiative):
    # JSON lets a string escape half of a UTF-16 pair; no UTF-8 text can hold it, so neither a database nor the
    # validator (jsonschema-rs) can take it: refused, naming where it is, instead of failing inside.
    body = b'{"key": "PORT-1", "initiative_id": "port", "title": "a\\ud800b", "x\\uDFFF": 1}'
    result = api.post("/api/v1/tickets", body=body, headers={"Content-Type": "application/json"})
    assert result.status_code == 400
    assert result.headers["content-type"] == "application/problem+json"
    assert [e["path"] for e in result.json["errors"]] == ["/title", "/x\\udfff"]
    assert nothing_created(api)
    event = b'{"schema": "svc.normalized-event/v0", "id": "e-\\ud800", "source": "ci"}'
    refused = api.post("/api/v1/events", body=event, headers={"Content-Type": "application/json"}, auth="ci")
    assert refused.status_code == 400
    assert api.get("/api/v1/router/decisions").json["decisions"] == []
    paired = api.post(
        "/api/v1/tickets",
        body=body.replace(b"\\ud800", b"\\ud83d\\ude00").replace(b"\\uDFFF", b""),
        headers={"Content-Type": "application/json"},
    )
    assert paired.status_code == 422  # a whole pair is one character (and "x" is no field of a ticket)


def test_a_whole_surrogate_pair_is_an_ordinary_character_and_half_of_one_is_refused(api, initiative):
    # JSON's \\uXXXX escapes can name half of a UTF-16 surrogate pair alone; no UTF-8 text holds one, so storing
    # it (or hashing a webhook's body) failed with a 500. A whole pair is an ordinary character.
    body = b'{"key": "PORT-1", "initiative_id": "port", "title": "a\\ud800b"}'
    result = api.post("/api/v1/tickets", body=body, headers={"Content-Type": "application/json"})
    assert result.status_code == 400
    assert result.headers["content-type"] == "application/problem+json"
    assert [e["path"] for e in result.json["errors"]] == ["/title"]
    assert nothing_created(api)
    paired = b'{"key": "PORT-1", "initiative_id": "port", "title": "a \\ud83d\\ude80 b"}'
    created = api.post("/api/v1/tickets", body=paired, headers={"Content-Type": "application/json"})
    assert created.status_code == 201 and created.json["title"] == "a \U0001f680 b"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/api/v1/tickets/PORT-%00", 400),
        ("PATCH", "/api/v1/initiatives/%00", 400),
        ("GET", "/api/v1/tickets?initiative_id=%00", 400),
        ("GET", "/api/v1/router/decisions?subject_id=a%00b", 400),
        ("GET", "/api/v1/dispatch/jobs/1%00", 404),
    ],
)
def test_nul_in_a_path_or_query_parameter_is_refused(api, initiative, method, path, status):
    # Also found on PostgreSQL: a key or filter holding U+0000 made the query itself fail (500). A job's id is a
    # number, and anything but ASCII digits names no job.
    result = api.request(method, path, json={"stage": "active"} if method == "PATCH" else None)
    assert result.status_code == status
    assert result.headers["content-type"] == "application/problem+json"
    assert "U+0000" in result.json["detail"] or status == 404
