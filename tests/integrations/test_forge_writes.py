"""The forge writes of a dispatched job (CONTRACT.md, "The forge writes") against local servers shaped like GitHub's
and GitLab's REST APIs: a draft pull (merge) request made once per head, found again rather than made twice, a
comment (note) on it, and failures told apart (try later, give up) without a token in their words."""

from __future__ import annotations

import pytest
import requests

from integrations.github import GitHub, PullRequest
from integrations.gitlab import GitLab, MergeRequest
from integrations.transport import TransportError

from servers.forges import GITHUB_TOKEN, GITLAB_TOKEN, FakeGitHub, FakeGitLab

REPO = "acme/portfolio"
BRANCH = "svc/port-12"
PROJECT = "acme/web/portfolio"


def github(fake: FakeGitHub, **kwargs) -> GitHub:
    return GitHub(fake.url, GITHUB_TOKEN, **{"tries": 1, **kwargs})


def gitlab(fake: FakeGitLab, **kwargs) -> GitLab:
    return GitLab(fake.url, GITLAB_TOKEN, **{"tries": 1, **kwargs})


# -- GitHub ------------------------------------------------------------------------------------------------------


def test_a_draft_pull_request_is_made_from_the_branch_into_the_default_branch_with_the_contracts_headers():
    with FakeGitHub() as fake:
        fake.add_repo(REPO, default_branch="trunk")
        made = github(fake).draft_pull_request(REPO, branch=BRANCH, title="PORT-12: fix", body="Why.\n\n-- svc")
    (pull,) = fake.pull_requests(REPO)
    assert made == PullRequest(number=pull["number"], html_url=f"https://github.com/{REPO}/pull/1", created=True)
    assert (pull["title"], pull["body"], pull["draft"]) == ("PORT-12: fix", "Why.\n\n-- svc", True)
    assert (pull["head"]["ref"], pull["base"]["ref"]) == (BRANCH, "trunk")
    assert [(c["method"], c["path"].split("?")[0]) for c in fake.calls] == [
        ("GET", f"/repos/{REPO}"),
        ("GET", f"/repos/{REPO}/pulls"),
        ("POST", f"/repos/{REPO}/pulls"),
    ]
    assert "head=acme%3Asvc%2Fport-12" in fake.calls[1]["path"] and "state=open" in fake.calls[1]["path"]
    for call in fake.calls:
        assert call["headers"]["Authorization"] == f"Bearer {GITHUB_TOKEN}"
        assert call["headers"]["Accept"] == "application/vnd.github+json"
        assert call["headers"]["X-GitHub-Api-Version"] == "2022-11-28"
    assert fake.header_faults == []


def test_a_ready_pull_request_is_asked_for_with_draft_false():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        github(fake).draft_pull_request(REPO, branch=BRANCH, title="t", body="b", draft=False)
    assert fake.pull_requests(REPO)[0]["draft"] is False and fake.written()[0]["json"]["draft"] is False


def test_an_open_pull_request_for_the_head_is_returned_and_no_second_one_is_made():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        client = github(fake)
        first = client.draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
        again = client.draft_pull_request(REPO, branch=BRANCH, title="t, again", body="b")
        other = client.draft_pull_request(REPO, branch="svc/port-13", title="t", body="b")
    assert again == PullRequest(number=first.number, html_url=first.html_url, created=False)
    assert len(fake.pull_requests(REPO, head=BRANCH)) == 1 and fake.pull_requests(REPO, head=BRANCH)[0]["title"] == "t"
    assert other.created is True and other.number != first.number
    assert len(fake.written()) == 2


def test_a_closed_pull_request_for_the_head_does_not_count_a_new_one_is_made():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        client = github(fake)
        first = client.draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
        fake.close_pull(REPO, first.number)
        second = client.draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
    assert second.created is True and second.number == first.number + 1


def test_a_422_already_exists_race_returns_the_open_pull_request_created_false():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        opened = github(fake).draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
        # Between our look and our POST someone opened it: the listing we get still shows none.
        fake.answer_when(200, [], method="GET", path="/pulls")
        raced = github(fake).draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
    assert raced == PullRequest(number=opened.number, html_url=opened.html_url, created=False)
    assert len(fake.pull_requests(REPO)) == 1
    assert [c["method"] for c in fake.calls[-4:]] == ["GET", "GET", "POST", "GET"]  # refused 422, then read again


def test_a_comment_on_the_pull_request_answers_its_html_url():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        client = github(fake)
        pull = client.draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
        url = client.comment(REPO, pull.number, "CI is running.")
    (comment,) = fake.comments
    assert url == comment["html_url"] and url.startswith(f"https://github.com/{REPO}/pull/{pull.number}#issuecomment-")
    assert (comment["number"], comment["body"]) == (pull.number, "CI is running.")


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_github_5xx_is_transient_and_nothing_is_written(status):
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        fake.fail(status, method="POST")
        with pytest.raises(TransportError) as failed:
            github(fake).draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
    assert failed.value.permanent is False and failed.value.status == status
    assert fake.pull_requests(REPO) == []


def test_a_github_429_is_transient_with_its_retry_after_and_tries_again_within_the_budget():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        fake.fail(429, retry_after=30, method="POST")
        with pytest.raises(TransportError) as limited:
            github(fake).draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
        fake.fail(429, retry_after=0, method="POST")
        made = github(fake, tries=2).draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
    assert limited.value.permanent is False and limited.value.retry_after == 30
    assert made.created is True and len(fake.pull_requests(REPO)) == 1


def test_a_github_500_then_success_with_tries_makes_one_pull_request():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        fake.fail(500, times=2)
        made = github(fake, tries=3, budget=30).draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
    assert made.created is True and len(fake.pull_requests(REPO)) == 1


@pytest.mark.parametrize("status", [401, 403, 404, 422])
def test_a_github_4xx_is_permanent_and_never_carries_the_token(status):
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        fake.fail(status, method="POST")
        with pytest.raises(TransportError) as refused:
            github(fake, tries=3).draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
    assert refused.value.permanent is True and refused.value.status == status
    assert len(fake.written()) == 1  # a permanent refusal is not tried again
    assert GITHUB_TOKEN not in str(refused.value) and "Bearer" not in str(refused.value)


def test_a_wrong_github_token_is_refused_permanently_without_its_text():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        with pytest.raises(TransportError) as refused:
            GitHub(fake.url, "ghp_wrong_token_value", tries=1).comment(REPO, 1, "x")
    assert refused.value.permanent is True and refused.value.status == 401
    assert "ghp_wrong_token_value" not in str(refused.value) and "credentials were refused" in str(refused.value)


def test_githubs_422_words_are_in_the_error():
    with FakeGitHub() as fake:
        fake.add_repo(REPO, default_branch="main")
        fake.answer_when(
            422, {"message": "Validation Failed", "errors": [{"message": "No commits between main and svc/port-12"}]}
        )
        with pytest.raises(TransportError) as refused:
            github(fake).draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
    assert "No commits between main and svc/port-12" in str(refused.value)


@pytest.mark.parametrize("repo", ["acme", "acme/portfolio/extra", "../etc", "acme/..", "", "acme/por tfolio"])
def test_a_repository_name_github_cannot_have_is_refused_before_any_call(repo):
    with FakeGitHub() as fake, pytest.raises(TransportError) as refused:
        github(fake).draft_pull_request(repo, branch=BRANCH, title="t", body="b")
    assert refused.value.permanent is True and fake.calls == []


def test_the_fake_answers_400_when_the_contracts_headers_are_missing():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        bearer = {"Authorization": f"Bearer {GITHUB_TOKEN}"}
        answer = requests.get(f"{fake.url}/repos/{REPO}", headers=bearer, timeout=10)
    assert answer.status_code == 400 and len(fake.header_faults) == 1


# -- GitLab ------------------------------------------------------------------------------------------------------


def test_a_draft_merge_request_is_made_on_the_url_encoded_project_path_with_a_draft_title():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT, project_id=15, default_branch="main")
        made = gitlab(fake).draft_merge_request(PROJECT, branch=BRANCH, title="PORT-12: fix", body="Why.")
    (mr,) = fake.merge_requests(PROJECT)
    assert made == MergeRequest(iid=1, web_url=f"https://gitlab.example/{PROJECT}/-/merge_requests/1", created=True)
    assert (mr["title"], mr["description"], mr["draft"]) == ("Draft: PORT-12: fix", "Why.", True)
    assert (mr["source_branch"], mr["target_branch"]) == (BRANCH, "main")
    assert mr["sent_draft_attribute"] is False  # GitLab's create call has none: the title says it
    paths = [c["path"].split("?")[0] for c in fake.calls]
    assert (
        paths
        == ["/api/v4/projects/acme%2Fweb%2Fportfolio"] + ["/api/v4/projects/acme%2Fweb%2Fportfolio/merge_requests"] * 2
    )
    assert "source_branch=svc%2Fport-12" in fake.calls[1]["path"] and "state=opened" in fake.calls[1]["path"]
    assert all(c["headers"]["PRIVATE-TOKEN"] == GITLAB_TOKEN for c in fake.calls)


def test_a_ready_merge_request_keeps_its_title_and_a_draft_title_is_not_prefixed_twice():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT)
        client = gitlab(fake)
        client.draft_merge_request(PROJECT, branch="svc/a-1", title="ready", body="b", draft=False)
        client.draft_merge_request(PROJECT, branch="svc/a-2", title="Draft: already", body="b")
    assert [(m["title"], m["draft"]) for m in fake.merge_requests(PROJECT)] == [
        ("ready", False),
        ("Draft: already", True),
    ]


def test_a_numeric_project_id_is_used_as_it_is():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT, project_id=15)
        made = gitlab(fake).draft_merge_request("15", branch=BRANCH, title="t", body="b")
    assert made.created is True and fake.calls[0]["path"] == "/api/v4/projects/15"


def test_an_unencoded_project_path_is_not_found_by_gitlab():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT)
        answer = requests.get(f"{fake.url}/projects/{PROJECT}", headers={"PRIVATE-TOKEN": GITLAB_TOKEN}, timeout=10)
    assert answer.status_code == 404  # which is why the client encodes it


def test_an_open_merge_request_for_the_branch_is_returned_and_no_second_one_is_made():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT)
        client = gitlab(fake)
        first = client.draft_merge_request(PROJECT, branch=BRANCH, title="t", body="b")
        again = client.draft_merge_request(PROJECT, branch=BRANCH, title="t", body="b")
    assert again == MergeRequest(iid=first.iid, web_url=first.web_url, created=False)
    assert len(fake.merge_requests(PROJECT, source_branch=BRANCH)) == 1


def test_a_409_race_returns_the_open_merge_request_created_false():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT)
        opened = gitlab(fake).draft_merge_request(PROJECT, branch=BRANCH, title="t", body="b")
        fake.answer_when(200, [], method="GET", path="/merge_requests")
        raced = gitlab(fake).draft_merge_request(PROJECT, branch=BRANCH, title="t", body="b")
    assert raced == MergeRequest(iid=opened.iid, web_url=opened.web_url, created=False)
    assert len(fake.merge_requests(PROJECT)) == 1


def test_a_note_answers_the_merge_requests_web_url_with_the_notes_anchor():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT)
        client = gitlab(fake)
        mr = client.draft_merge_request(PROJECT, branch=BRANCH, title="t", body="b")
        url = client.note(PROJECT, mr.iid, "CI is running.")
    (note,) = fake.notes
    assert url == f"{mr.web_url}#note_{note['id']}" and note["body"] == "CI is running."


def test_a_gitlab_5xx_or_429_is_transient_and_a_4xx_permanent_without_the_token():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT)
        client = gitlab(fake)
        errors = {}
        for status in (500, 429, 401, 403, 404, 422):
            fake.fail(status, method="POST", retry_after=5 if status == 429 else None)
            with pytest.raises(TransportError) as failed:
                client.draft_merge_request(PROJECT, branch=BRANCH, title="t", body="b")
            errors[status] = failed.value
    assert {s: e.permanent for s, e in errors.items()} == {
        500: False,
        429: False,
        401: True,
        403: True,
        404: True,
        422: True,
    }
    assert errors[429].retry_after == 5
    assert fake.merge_requests(PROJECT) == []
    assert all(GITLAB_TOKEN not in str(e) for e in errors.values())


def test_gitlab_failing_for_a_time_then_answering():
    now = [100.0]
    with FakeGitLab(monotonic=lambda: now[0]) as fake:
        fake.add_project(PROJECT)
        fake.fail(503, seconds=10)
        with pytest.raises(TransportError) as failed:
            gitlab(fake).draft_merge_request(PROJECT, branch=BRANCH, title="t", body="b")
        now[0] += 10
        made = gitlab(fake).draft_merge_request(PROJECT, branch=BRANCH, title="t", body="b")
    assert failed.value.permanent is False and made.created is True


def test_a_project_without_a_default_branch_is_a_permanent_error():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT, default_branch=None)
        with pytest.raises(TransportError) as failed:
            gitlab(fake).draft_merge_request(PROJECT, branch=BRANCH, title="t", body="b")
    assert failed.value.permanent is True and "default branch" in str(failed.value)


# -- the forges' dialects (CONTRACT.md, "Speaking the forges' dialects") -----------------------------------------


def test_a_renamed_repository_is_followed_to_its_new_name_on_the_same_host():
    with FakeGitHub() as fake:
        fake.add_repo("acme/old-name", default_branch="main")
        fake.rename_repo("acme/old-name", "acme/portfolio")
        made = github(fake).draft_pull_request("acme/old-name", branch=BRANCH, title="t", body="b")
        comment = github(fake).comment("acme/old-name", made.number, "c")
    assert made.created and fake.pull_requests("acme/portfolio", head=BRANCH)[0]["draft"] is True
    assert comment.startswith("https://github.com/acme/portfolio/pull/")
    assert {c["path"].split("?")[0] for c in fake.calls if c["path"].startswith("/repositories/")} >= {
        f"/repositories/{fake.repos['acme/portfolio']['id']}/pulls"
    }


def test_a_repository_without_draft_support_fails_the_write_with_githubs_words_and_never_opens_a_ready_one():
    with FakeGitHub() as fake:
        fake.add_repo(REPO, drafts=False)
        with pytest.raises(TransportError) as refused:
            github(fake).draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
    assert refused.value.permanent and refused.value.status == 422
    assert "Draft pull requests are not supported in this repository." in refused.value.detail
    assert [c["json"]["draft"] for c in fake.written()] == [True] and fake.pull_requests(REPO) == []


def test_a_refusal_carries_githubs_field_names_and_codes():
    with FakeGitHub() as fake:
        fake.add_repo(REPO, branches={"svc/other"})
        with pytest.raises(TransportError) as refused:
            github(fake).draft_pull_request(REPO, branch=BRANCH, title="t", body="b")
    assert refused.value.permanent and "Validation Failed; head: invalid" in refused.value.detail


def test_the_github_fake_refuses_a_title_over_256_characters_as_github_does():
    with FakeGitHub() as fake:
        fake.add_repo(REPO)
        with pytest.raises(TransportError) as refused:
            github(fake).draft_pull_request(REPO, branch=BRANCH, title="x" * 257, body="b")
    assert "title: custom (title is too long (maximum is 256 characters))" in refused.value.detail


@pytest.mark.parametrize("length", [248, 249, 300])
def test_a_gitlab_draft_title_is_cut_to_255_characters_in_all(length):
    with FakeGitLab() as fake:
        fake.add_project(PROJECT, project_id=15)
        gitlab(fake).draft_merge_request(PROJECT, branch=BRANCH, title="t" * length, body="b")
    title = fake.merge_requests(PROJECT)[0]["title"]
    assert title.startswith("Draft: ") and len(title) == min(length + 7, 255)


def test_the_gitlab_fake_refuses_a_title_over_255_characters_with_gitlabs_words():
    with FakeGitLab() as fake:
        fake.add_project(PROJECT, project_id=15)
        refused = requests.post(
            f"{fake.url}/projects/15/merge_requests",
            json={"source_branch": BRANCH, "target_branch": "main", "title": "t" * 256},
            headers={"PRIVATE-TOKEN": GITLAB_TOKEN},
            timeout=5,
        )
    assert refused.status_code == 400
    assert refused.json() == {"message": {"title": ["is too long (maximum is 255 characters)"]}}


def test_both_fakes_answer_the_tokens_own_user():
    with FakeGitHub() as hub, FakeGitLab() as lab:
        github_user = requests.get(
            f"{hub.url}/user",
            headers={"Authorization": f"Bearer {GITHUB_TOKEN}", "Accept": "application/vnd.github+json"},
            timeout=5,
        ).json()
        gitlab_user = requests.get(f"{lab.url}/user", headers={"PRIVATE-TOKEN": GITLAB_TOKEN}, timeout=5).json()
    assert (github_user["login"], gitlab_user["username"]) == ("svc-bot", "svc-bot")
