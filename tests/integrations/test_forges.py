"""The GitHub and GitLab API modules against local servers shaped like them: paging, rate limits, pacing, and
failures told apart without a token in their words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

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
