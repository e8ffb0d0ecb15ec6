"""The GitHub and GitLab API modules against local servers shaped like them: paging, rate limits, pacing, and
failures told apart without a token in their words."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
import requests

from integrations.github import GitHub
from integrations.gitlab import GitLab
from integrations.transport import TransportError

from servers.forges import GITHUB_TOKEN, GITLAB_TOKEN, FakeGitHub, FakeGitLab

HOOK = "repos/acme/portfolio/hooks/1"
LAB_HOOK = "projects/15/hooks/7"


def test_deliveries_are_read_newest_first_across_pages_until_the_moment_asked_for():
    with FakeGitHub() as fake:
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=5)
        for n in range(150):
            fake.hook(HOOK).sent[f"g{n}"] = None
            fake.log_attempt(HOOK, f"g{n}", 503 if n % 2 else 200, at=start + timedelta(minutes=n))
        log = GitHub(fake.url, GITHUB_TOKEN).deliveries_since(HOOK, start + timedelta(minutes=20))
    assert [d.guid for d in log.deliveries] == [f"g{n}" for n in range(149, 19, -1)]
    assert sum(1 for c in fake.calls if "/deliveries" in c["path"]) == 2  # two pages of 100, via the Link header
    assert all(c["headers"]["Authorization"] == f"Bearer {GITHUB_TOKEN}" for c in fake.calls)


def test_a_github_403_that_is_a_rate_limit_is_transient_with_its_wait_and_another_is_permanent():
    with FakeGitHub() as fake:
        fake.hook(HOOK)
        reset = int((datetime.now(UTC) + timedelta(seconds=120)).timestamp())
        fake.answer_next(
            403,
            {"message": "API rate limit exceeded"},
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
        )
        client = GitHub(fake.url, GITHUB_TOKEN, tries=1)
        with pytest.raises(TransportError) as limited:
            client.deliveries_since(HOOK, datetime.now(UTC))
        fake.forbidden.add(HOOK)
        with pytest.raises(TransportError) as refused:
            client.deliveries_since(HOOK, datetime.now(UTC))
    assert limited.value.permanent is False and 100 < limited.value.retry_after <= 120
    assert refused.value.permanent is True and refused.value.status == 403
    for error in (limited.value, refused.value):
        assert GITHUB_TOKEN not in str(error) and "Bearer" not in str(error)


def test_a_github_429_is_tried_again_after_its_retry_after():
    with FakeGitHub() as fake:
        fake.hook(HOOK)
        fake.answer_next(429, {"message": "secondary rate limit"}, {"Retry-After": "0"})
        log = GitHub(fake.url, GITHUB_TOKEN, tries=2).deliveries_since(HOOK, datetime.now(UTC))
    assert log.deliveries == [] and len(fake.calls) == 2


class Ticking:
    """A monotonic clock that moves only when slept on."""

    def __init__(self):
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_gitlab_resends_never_a_sixth_to_one_hook_within_a_minute():
    ticking = Ticking()
    with FakeGitLab(lambda headers, body: 200, monotonic=ticking) as fake:
        for n in range(7):
            fake.send(LAB_HOOK, "merge_request_hooks", {"Idempotency-Key": f"k{n}"}, b"{}")
        client = GitLab(fake.url, GITLAB_TOKEN, monotonic=ticking, sleep=ticking.sleep)
        for event in fake.hook(LAB_HOOK).log[:7]:
            client.resend(LAB_HOOK, event["id"])
    assert ticking.slept == [60.0]  # the sixth waited for the first to be a minute old; the seventh did not wait
    assert all(c["headers"]["PRIVATE-TOKEN"] == GITLAB_TOKEN for c in fake.calls)
    assert [c for c in fake.calls if c["method"] == "POST"] and len(fake.asked_again()) == 7


def test_gitlab_answers_429_past_its_limit_and_the_client_waits_its_retry_after_once():
    ticking = Ticking()
    with FakeGitLab(lambda headers, body: 200, monotonic=ticking) as fake:
        fake.send(LAB_HOOK, "merge_request_hooks", {"Idempotency-Key": "k"}, b"{}")
        fake.answer_next(429, {"message": "too many requests"}, {"Retry-After": "7"})
        GitLab(fake.url, GITLAB_TOKEN, monotonic=ticking, sleep=ticking.sleep).resend(LAB_HOOK, 1000)
    assert ticking.slept == [7.0] and len(fake.asked_again()) == 2


def test_gitlab_events_are_paged_by_x_next_page_and_filtered_by_status():
    with FakeGitLab(lambda headers, body: 500) as fake:
        for n in range(130):
            fake.send(LAB_HOOK, "merge_request_hooks", {"Idempotency-Key": f"k{n}"}, b"{}")
        log = GitLab(fake.url, GITLAB_TOKEN).hook_events(LAB_HOOK, status="server_failure")
        none = GitLab(fake.url, GITLAB_TOKEN).hook_events(LAB_HOOK, status="client_failure")
    assert [e.guid for e in log.events] == [f"k{n}" for n in range(129, -1, -1)]
    assert none.events == [] and log.malformed == []


# -- the forges' dialects (CONTRACT.md, "Speaking the forges' dialects") -----------------------------------------


def test_githubs_secondary_rate_limit_is_transient_and_waits_at_least_a_minute_not_refused_credentials():
    with FakeGitHub() as fake:
        fake.hook(HOOK)
        fake.secondary_rate_limit()
        with pytest.raises(TransportError) as limited:
            GitHub(fake.url, GITHUB_TOKEN, tries=1).deliveries_since(HOOK, datetime.now(UTC))
    error = limited.value
    assert (error.permanent, error.status, error.retry_after) == (False, 403, 60.0)
    assert "secondary rate limit" in error.detail and "credentials" not in error.detail


def test_a_github_403_with_retry_after_waits_it_and_a_plain_403_is_refused_credentials():
    with FakeGitHub() as fake:
        fake.hook(HOOK)
        fake.answer_next(403, {"message": "Forbidden"}, {"retry-after": "90"})
        fake.answer_next(403, {"message": "Resource not accessible by personal access token"})
        client = GitHub(fake.url, GITHUB_TOKEN, tries=1)
        errors = []
        for _ in range(2):
            with pytest.raises(TransportError) as caught:
                client.deliveries_since(HOOK, datetime.now(UTC))
            errors.append(caught.value)
    assert (errors[0].permanent, errors[0].retry_after) == (False, 90.0)
    assert errors[1].permanent and "credentials were refused" in errors[1].detail
    assert "Resource not accessible" in errors[1].detail


def test_a_github_reading_that_reaches_its_page_cap_says_truncated():
    with FakeGitHub() as fake:
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=5)
        for n in range(250):
            fake.hook(HOOK).sent[f"g{n}"] = None
            fake.log_attempt(HOOK, f"g{n}", 503, at=start + timedelta(minutes=n))
        capped = GitHub(fake.url, GITHUB_TOKEN).deliveries_since(HOOK, start, max_pages=2)
        whole = GitHub(fake.url, GITHUB_TOKEN).deliveries_since(HOOK, start, max_pages=3)
    assert capped.truncated and len(capped.deliveries) == 200
    assert not whole.truncated and len(whole.deliveries) == 250


def test_gitlab_hook_events_are_asked_20_a_page_and_the_fake_refuses_more_as_gitlab_does():
    with FakeGitLab(lambda headers, body: 500) as fake:
        for n in range(45):
            fake.send(LAB_HOOK, "merge_request_hooks", {"Idempotency-Key": f"k{n}"}, b"{}")
        log = GitLab(fake.url, GITLAB_TOKEN).hook_events(LAB_HOOK, status="server_failure")
        asked = [c["path"] for c in fake.calls]
        refused = requests.get(
            f"{fake.url}/{LAB_HOOK}/events?status=server_failure&per_page=21",
            headers={"PRIVATE-TOKEN": GITLAB_TOKEN},
            timeout=5,
        )
    assert len(log.events) == 45 and not log.truncated
    assert len(asked) == 3 and all("per_page=20" in path for path in asked)
    assert (refused.status_code, refused.json()) == (400, {"error": "per_page does not have a valid value"})


def test_a_gitlab_reading_that_reaches_its_page_cap_says_truncated():
    with FakeGitLab(lambda headers, body: 500) as fake:
        for n in range(50):
            fake.send(LAB_HOOK, "merge_request_hooks", {"Idempotency-Key": f"k{n}"}, b"{}")
        log = GitLab(fake.url, GITLAB_TOKEN).hook_events(LAB_HOOK, status="server_failure", max_pages=2)
    assert log.truncated and len(log.events) == 40


def test_gitlab_paces_resends_per_project_so_two_hooks_of_one_project_never_get_a_429():
    ticking = Ticking()
    other = "projects/15/hooks/8"
    with FakeGitLab(lambda headers, body: 200, monotonic=ticking) as fake:
        for hook in (LAB_HOOK, other):
            for n in range(3):
                fake.send(hook, "merge_request_hooks", {"Idempotency-Key": f"{hook}-{n}"}, b"{}")
        client = GitLab(fake.url, GITLAB_TOKEN, monotonic=ticking, sleep=ticking.sleep)
        for hook in (LAB_HOOK, other):
            for event in list(fake.hook(hook).log):  # each resend logs an attempt more
                client.resend(hook, event["id"])
    assert ticking.slept == [60.0]  # the sixth of the project waited, whichever hook it was for
    assert len(fake.asked_again()) == 6  # a 429 would have been asked again: a seventh


def test_gitlab_resend_pacing_holds_no_lock_while_it_waits():
    """A thread waiting for its project's next slot does not hold up another project's resend."""

    slept = threading.Event()
    release = threading.Event()

    def sleep(seconds: float) -> None:
        slept.set()
        release.wait(10)

    with FakeGitLab(lambda headers, body: 200) as fake:
        for n in range(6):
            fake.send(LAB_HOOK, "merge_request_hooks", {"Idempotency-Key": f"a{n}"}, b"{}")
        fake.send("projects/16/hooks/1", "merge_request_hooks", {"Idempotency-Key": "b"}, b"{}")
        client = GitLab(fake.url, GITLAB_TOKEN, sleep=sleep)
        for event in fake.hook(LAB_HOOK).log[:5]:
            client.resend(LAB_HOOK, event["id"])
        sixth = fake.hook(LAB_HOOK).log[5]["id"]
        # The fake counts real time, which the stand-in sleep does not pass: its 429 to the sixth is expected.
        outcome: list[Exception] = []

        def resend_sixth() -> None:
            try:
                client.resend(LAB_HOOK, sixth)
            except TransportError as exc:
                outcome.append(exc)

        waiting = threading.Thread(target=resend_sixth)
        waiting.start()
        assert slept.wait(5)
        elsewhere = ("projects/16/hooks/1", fake.hook("projects/16/hooks/1").log[0]["id"])
        done = threading.Thread(target=client.resend, args=elsewhere)
        done.start()
        done.join(5)
        assert not done.is_alive()  # another project's resend went while the first thread slept
        release.set()
        waiting.join(5)


def test_a_gitlab_429_waits_retry_after_else_ratelimit_reset_else_a_minute():
    with FakeGitLab(lambda headers, body: 200) as fake:
        fake.hook(LAB_HOOK)
        reset = int(datetime.now(UTC).timestamp()) + 40
        fake.answer_next(429, {"message": "Too many"}, {"Retry-After": "7"})
        fake.answer_next(429, {"message": "Too many"}, {"RateLimit-Reset": str(reset)})
        fake.answer_next(429, {"message": "Too many"})
        client = GitLab(fake.url, GITLAB_TOKEN, tries=1)
        waits = []
        for _ in range(3):
            with pytest.raises(TransportError) as caught:
                client.default_branch("15")
            waits.append(caught.value.retry_after)
    assert waits[0] == 7.0 and 30 < waits[1] <= 40 and waits[2] == 60.0
