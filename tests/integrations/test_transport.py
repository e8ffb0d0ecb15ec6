"""The one outbound failure type, against a local HTTP server: what is transient (and when to come back) and what is
permanent, the same for every target; `call`'s bounded retries; paging by Link headers; no token in any error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from integrations import transport
from integrations.transport import MAX_RETRY_AFTER, HeaderAuth, TransportError, parse_retry_after

from processes import free_port
from servers.scripted import ScriptedServer

TOKEN = "tok-3f9a-never-in-an-error-0123456789"


@pytest.fixture
def server():
    with ScriptedServer() as scripted:
        yield scripted


def call(url: str, **kwargs):
    """A call as a module makes one: its session, explicit auth, and a token in the path as well (as a webhook's)."""
    return transport.call(
        transport.session("svc-test/1"), "GET", url, target="Target", auth=HeaderAuth(f"Bearer {TOKEN}"), **kwargs
    )


def failure(url: str, **kwargs) -> TransportError:
    with pytest.raises(TransportError) as caught:
        call(url, **kwargs)
    error = caught.value
    # Nothing of the request reaches the error: not the token, not the URL, not a chained requests exception.
    shown = f"{error} {error!r} {error.detail}"
    assert TOKEN not in shown and "/hooks/" not in shown
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
    return error


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


def test_a_429_with_retry_after_in_seconds_is_transient_and_says_when(server):
    server.answer(429, headers={"Retry-After": "7"})
    error = failure(server.url(f"/hooks/{TOKEN}"))
    assert (error.permanent, error.retry_after, error.status, error.rate_limited) == (False, 7.0, 429, True)
    assert error.detail == "Target answered 429 (rate limited); retry after 7 s"


@pytest.mark.parametrize("their_clock", [timedelta(0), timedelta(hours=-1), timedelta(minutes=7)])
def test_a_429_with_an_http_date_counts_from_the_answers_own_date(server, their_clock):
    """The wait is the same whatever the skew between the target's clock and ours."""
    theirs = datetime.now(UTC).replace(microsecond=0) + their_clock
    server.answer(429, headers={"Date": http_date(theirs), "Retry-After": http_date(theirs + timedelta(seconds=90))})
    error = failure(server.url(f"/hooks/{TOKEN}"))
    assert (error.permanent, error.retry_after) == (False, 90.0)


def test_a_5xx_is_transient_with_the_callers_backoff_unless_it_says_when(server):
    server.answer(500, body={"message": "oops"})
    error = failure(server.url(f"/hooks/{TOKEN}"))
    assert (error.permanent, error.retry_after, error.status) == (False, None, 500)
    assert error.detail == "Target answered 500"
    server.answer(503, headers={"Retry-After": "30"})
    assert failure(server.url(f"/hooks/{TOKEN}")).retry_after == 30.0


@pytest.mark.parametrize(
    ("status", "detail"),
    [
        (404, "Target answered 404"),
        (400, "Target answered 400"),
        (401, "Target answered 401 (the credentials were refused)"),
        (403, "Target answered 403 (the credentials were refused)"),
    ],
)
def test_a_4xx_is_permanent_and_refused_credentials_say_so(server, status, detail):
    server.answer(status, headers={"Retry-After": "5"})
    error = failure(server.url(f"/hooks/{TOKEN}"))
    assert (error.permanent, error.retry_after, error.status, error.detail) == (True, None, status, detail)


def test_a_redirect_other_than_301_307_308_is_not_followed_and_is_permanent(server):
    server.answer(302, headers={"Location": server.url("/elsewhere")})
    error = failure(server.url(f"/hooks/{TOKEN}"))
    assert error.permanent and error.detail == "Target answered 302 (a redirect, not followed)"
    assert [r["path"] for r in server.requests] == [f"/hooks/{TOKEN}"]


@pytest.mark.parametrize("status", [301, 307, 308])
def test_a_permanent_or_temporary_redirect_on_the_same_origin_is_followed_with_the_same_request(server, status):
    """A renamed repository answers 301 (GitHub: 307 for a write) to its new address on the same host."""
    server.answer(status, headers={"Location": "/repositories/42/pulls?state=open"})
    server.answer(201, body=b'{"number": 7}')
    response = transport.call(
        transport.session("svc-test/1"),
        "POST",
        server.url("/repos/acme/old/pulls"),
        target="Target",
        auth=HeaderAuth(f"Bearer {TOKEN}"),
        json={"title": "t"},
        params={"ignored": "the new address carries its own query"},
    )
    assert response.status_code == 201 and response.json() == {"number": 7}
    second = server.requests[1]
    assert (second["method"], second["path"]) == ("POST", "/repositories/42/pulls?state=open")
    assert second["headers"]["Authorization"] == f"Bearer {TOKEN}" and b'"title"' in second["body"]


def test_a_redirect_to_another_host_is_never_followed_and_the_credential_stays(server):
    with ScriptedServer() as elsewhere:
        server.answer(301, headers={"Location": elsewhere.url("/repos/acme/new")})
        error = failure(server.url("/repos/acme/old"))
        assert elsewhere.requests == []
    assert error.permanent and error.status == 301
    assert error.detail == "Target answered 301 (a redirect to another host, not followed)"


def test_redirects_in_a_row_stop_after_a_few(server):
    for _ in range(transport.MAX_REDIRECTS + 1):
        server.answer(301, headers={"Location": "/again"})
    error = failure(server.url("/start"))
    assert error.permanent and len(server.requests) == transport.MAX_REDIRECTS + 1


def test_a_slow_answer_is_cut_by_the_timeout_and_is_transient(server):
    server.answer(200, delay=30)
    error = failure(server.url(f"/hooks/{TOKEN}"), timeout=(2.0, 0.2))
    assert (error.permanent, error.status) == (False, None)
    assert error.detail == "no answer from Target within 0.2 s (timed out)"


def test_a_refused_connection_is_transient():
    error = failure(f"http://127.0.0.1:{free_port()}/hooks/{TOKEN}")
    assert (error.permanent, error.status) == (False, None)
    assert error.detail == "could not connect to Target (ConnectionError)"


def test_the_credential_goes_as_given_with_the_sessions_user_agent(server):
    assert call(server.url("/thing")).status_code == 200
    (sent,) = server.requests
    assert sent["headers"]["Authorization"] == f"Bearer {TOKEN}" and sent["headers"]["User-Agent"] == "svc-test/1"
    assert TOKEN not in repr(HeaderAuth(TOKEN, header="PRIVATE-TOKEN"))


def test_retry_after_reads_seconds_or_an_http_date_and_is_capped():
    now = datetime.now(UTC).replace(microsecond=0)
    assert parse_retry_after("120") == 120.0 and parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after(http_date(now + timedelta(seconds=30)), now=now) == 30.0
    assert parse_retry_after(http_date(now - timedelta(seconds=30)), now=now) == 0.0  # already past: at once
    assert parse_retry_after(str(10 * 86400)) == MAX_RETRY_AFTER
    assert parse_retry_after(http_date(now + timedelta(days=3)), now=now) == MAX_RETRY_AFTER
    for unreadable in (None, "", "soon", "-5", "nan", "inf"):
        assert parse_retry_after(unreadable) is None


def test_call_tries_again_in_process_only_when_asked_and_never_after_a_permanent_failure(server):
    server.answer(503, headers={"Retry-After": "0"}, times=2)
    assert call(server.url("/thing"), tries=3).status_code == 200
    assert len(server.requests) == 3

    server.answer(404)  # and 200 after it: a second try would have succeeded
    assert failure(server.url("/thing"), tries=3).status == 404
    assert len(server.requests) == 4  # the 404 once, never again

    server.answer(503)
    assert failure(server.url("/thing")).status == 503  # one try by default: the outbox retries
    assert len(server.requests) == 5


def test_call_gives_up_at_once_when_the_wait_asked_for_is_past_its_budget(server):
    server.answer(429, headers={"Retry-After": "60"}, times=3)
    error = failure(server.url("/thing"), tries=3, budget=15)
    assert error.retry_after == 60.0 and len(server.requests) == 1  # the outbox waits the minute, not a worker


def test_pages_follow_the_link_header_on_the_same_origin(server):
    server.answer(200, body=[1, 2], headers={"Link": f'<{server.url("/items?page=2")}>; rel="next"'})
    server.answer(
        200,
        body=[3],
        headers={"Link": f'<{server.url("/items?page=3")}>; rel="next", <{server.url("/items?page=1")}>; rel="first"'},
    )
    server.answer(200, body=[4], headers={"Link": f'<{server.url("/items?page=1")}>; rel="first"'})
    found = [item for page in _pages(server.url("/items"), params={"per_page": 2}) for item in page.json()]
    assert found == [1, 2, 3, 4]
    assert [r["path"] for r in server.requests] == ["/items?per_page=2", "/items?page=2", "/items?page=3"]


def test_pages_stop_at_the_callers_bound_and_say_they_were_truncated(server):
    for n in range(2, 6):
        server.answer(200, body=[n], headers={"Link": f'<{server.url(f"/items?page={n}")}>; rel="next"'})
    pages = _pages(server.url("/items"), max_pages=2)
    assert len(list(pages)) == 2 and pages.truncated
    assert len(server.requests) == 2


def test_pages_that_end_within_the_bound_are_not_truncated(server):
    server.answer(200, body=[1], headers={"Link": f'<{server.url("/items?page=2")}>; rel="next"'})
    server.answer(200, body=[2])
    pages = _pages(server.url("/items"), max_pages=2)
    assert len(list(pages)) == 2 and not pages.truncated


def test_a_next_page_on_another_host_is_not_followed(server):
    elsewhere = server.url("/items?page=2").replace("127.0.0.1", "localhost")
    server.answer(200, body=[1], headers={"Link": f'<{elsewhere}>; rel="next"'})
    pages = iter(_pages(server.url("/items")))
    assert next(pages).json() == [1]
    with pytest.raises(TransportError) as caught:
        next(pages)
    assert caught.value.permanent and caught.value.detail == "Target's next page is on another host: not followed"
    assert len(server.requests) == 1


def _pages(url: str, **kwargs):
    return transport.pages(
        transport.session("svc-test/1"), url, target="Target", auth=HeaderAuth(f"Bearer {TOKEN}"), **kwargs
    )
