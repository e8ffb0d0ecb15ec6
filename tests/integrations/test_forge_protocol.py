"""One interface for both forges (`integrations/forges.py`): GitHub and GitLab behind the same `Forge` calls, against
local servers that answer as they document, and the service's own account on each (`GET /user`), read once."""

from __future__ import annotations

import threading

import pytest

from domain.dispatch.forge import OwnForgeUsers
from integrations.forges import GitHubForge, GitLabForge, adapters, web_url

from servers.forges import GITHUB_TOKEN, GITLAB_TOKEN, FakeGitHub, FakeGitLab


@pytest.fixture
def github():
    with FakeGitHub() as fake:
        fake.add_repo("acme/portfolio", branches={"svc/port-7"})
        yield fake


@pytest.fixture
def gitlab():
    with FakeGitLab() as fake:
        fake.add_project("acme/web/portfolio", project_id=15)
        yield fake


def forges(github, gitlab):
    return (
        (GitHubForge(github.url, GITHUB_TOKEN), "acme/portfolio"),
        (GitLabForge(gitlab.url, GITLAB_TOKEN), "acme/web/portfolio"),
    )


def test_both_forges_open_one_draft_find_it_open_and_take_a_comment_the_same_way(github, gitlab):
    for forge, repo in forges(github, gitlab):
        assert forge.find_open(repo, "svc/port-7") is None
        made = forge.open_draft(repo, branch="svc/port-7", title="PORT-7: the change", body="Why.")
        assert made.created and made.number == 1 and made.url.startswith("https://")
        again = forge.open_draft(repo, branch="svc/port-7", title="PORT-7: again", body="Why.")
        assert (again.number, again.url, again.created) == (made.number, made.url, False)  # never two for a branch
        assert forge.find_open(repo, "svc/port-7") == again
        assert forge.comment(repo, made.number, "Ready.").startswith(made.url)
        assert forge.own_login() == "svc-bot"
        forge.close()
    assert github.pull_requests("acme/portfolio")[0]["draft"] is True
    assert gitlab.merge_requests("acme/web/portfolio")[0]["title"].startswith("Draft: ")


def test_adapters_are_made_for_the_forges_with_a_token_only(github):
    found = adapters(github_api_url=github.url, github_token=GITHUB_TOKEN, gitlab_api_url="x", gitlab_token=None)
    assert list(found) == ["github"] and found["github"].name == "github"


@pytest.mark.parametrize(
    ("forge", "api", "expected"),
    [
        ("github", "https://api.github.com", "https://github.com/acme/app/pull/12"),
        ("github", "https://ghe.example.com/api/v3", "https://ghe.example.com/acme/app/pull/12"),
        ("gitlab", "https://gitlab.com/api/v4", "https://gitlab.com/acme/app/-/merge_requests/12"),
        (
            "gitlab",
            "https://git.example.com/gitlab/api/v4",
            "https://git.example.com/gitlab/acme/app/-/merge_requests/12",
        ),
    ],
)
def test_a_pull_requests_address_is_where_a_person_finds_it(forge, api, expected):
    assert web_url(forge, api, "acme/app", 12) == expected


def test_the_services_own_forge_user_is_asked_once_and_again_only_a_while_after_a_failure(github):
    ticks = [0.0]
    own = OwnForgeUsers({"github": GitHubForge(github.url, GITHUB_TOKEN)}, monotonic=lambda: ticks[0])
    github.fail(503, path="/user")
    own.learn("github")
    assert own.ids() == frozenset()
    own.learn("github")  # it would not say a moment ago: not asked again yet
    ticks[0] += 301
    own.learn("github")
    own.learn("github")
    own.learn("gitlab")  # no token for GitLab: nothing to ask
    assert own.ids() == {"github:svc-bot"}
    assert [c["path"] for c in github.calls] == ["/user", "/user"]


class SlowForge:
    """A forge whose `GET /user` answers only when the test lets it (a forge retrying, or slow to answer)."""

    def __init__(self, login: str):
        self.login = login
        self.go = threading.Event()
        self.asked = 0

    def own_login(self) -> str:
        self.asked += 1
        assert self.go.wait(timeout=30), "the test never let the forge answer"
        return self.login


def test_a_slow_forge_is_asked_once_and_holds_up_no_other_forge():
    slow = SlowForge("svc-bot")
    own = OwnForgeUsers({"github": slow, "gitlab": SlowForge("svc-gl")})
    own.forges["gitlab"].go.set()
    first = threading.Thread(target=own.learn, args=("github",))
    second = threading.Thread(target=own.learn, args=("github",))
    first.start()
    while slow.asked == 0:  # the first asker is in its call
        first.join(0.01)
    second.start()
    own.learn("gitlab")  # another forge is asked meanwhile: nothing waits for GitHub's answer
    assert own.ids() == {"gitlab:svc-gl"} and second.is_alive()  # the second GitHub asker waits for the first's answer
    slow.go.set()
    first.join(30)
    second.join(30)
    assert own.ids() == {"github:svc-bot", "gitlab:svc-gl"}
    assert slow.asked == 1
