"""Each sender's normalizer on realistic payloads: the envelope it makes, and that the envelope keeps the contract."""

from datetime import UTC, datetime

import pytest

from contracts.envelope import envelope_violations
from domain.router.board_view import TicketState
from domain.router.senders import github, gitlab, linear
from domain.router.senders.payloads import PayloadError, Unmappable, known_prefixes, ticket_key_in, utc_timestamp

from events_kit import EXAMPLES, example

# What a board of PORT tickets recognises in branches and titles.
PORT = known_prefixes({"PORT"})


def conforming(envelope):
    assert envelope_violations(envelope) == []
    return envelope


GITHUB = [
    ("pull_request", "pull_request.opened.json", "forge", "opened", None, "open", "await_ci"),
    ("pull_request", "pull_request.synchronize.json", "forge", "synchronized", None, None, "await_ci"),
    ("pull_request", "pull_request.ready_for_review.json", "forge", "ready_for_review", "draft", "open", "await_ci"),
    ("pull_request", "pull_request.closed-merged.json", "forge", "merged", "open", "merged", None),
    ("pull_request", "pull_request.closed-unmerged.json", "forge", "closed", "open", "closed", None),
    ("workflow_run", "workflow_run.requested.json", "ci", "pipeline_started", None, "pending", "await_ci"),
    ("workflow_run", "workflow_run.in_progress.json", "ci", "pipeline_started", "pending", "running", "await_ci"),
    ("workflow_run", "workflow_run.completed-failure.json", "ci", "pipeline_failed", "running", "failure", None),
    ("workflow_run", "workflow_run.completed-success.json", "ci", "pipeline_passed", "running", "success", None),
    ("workflow_run", "workflow_run.completed-cancelled.json", "ci", "pipeline_skipped", "running", "canceled", None),
]


@pytest.mark.parametrize(("event", "file", "source", "kind", "from_", "to", "blocked"), GITHUB)
def test_github_payloads(event, file, source, kind, from_, to, blocked):
    envelope = conforming(github.normalize(event, "github:d-1", example("payloads/github/" + file), known=PORT))
    assert (envelope["source"], envelope["id"]) == (source, "github:d-1")
    assert envelope["transition"] == {"kind": kind, "from": from_, "to": to}
    assert envelope["subject"] == {"type": "ticket", "id": "PORT-12", "repo": "acme/portfolio"}
    assert envelope["dispatch_hints"]["blocked_reason"] == blocked
    assert envelope["forge"]["pr_number"] == 42
    assert envelope["forge"]["branch"] == "port-12-login-email"
    if source == "ci":
        assert envelope["actor"] == {"kind": "system", "id": "github:github-actions", "roles": []}
        assert envelope["forge"]["pipeline_id"] == 11893154871
        assert envelope["forge"]["pipeline_status"] == to
    failed = kind == "pipeline_failed"
    assert envelope["dispatch_hints"]["eligible_for_worker"] is failed
    assert envelope["dispatch_hints"]["suggested_role"] == ("fixer" if failed else None)


def test_github_times_and_actors():
    merged = github.normalize(
        "pull_request", "github:x", example("payloads/github/pull_request.closed-merged.json"), known=PORT
    )
    assert merged["occurred_at"] == "2026-11-20T15:30:01.000000Z"
    assert merged["actor"] == {"kind": "human", "id": "github:mona", "roles": []}
    opened = github.normalize(
        "pull_request", "github:y", example("payloads/github/pull_request.opened.json"), known=PORT
    )
    assert opened["actor"]["kind"] == "agent"  # a Bot account


def test_a_pr_that_names_no_ticket_is_about_the_pull_request_itself():
    payload = example("payloads/github/pull_request.opened.json")
    payload["pull_request"]["head"]["ref"] = "try-new-fonts"
    payload["pull_request"]["title"] = "Try new fonts"
    envelope = conforming(github.normalize("pull_request", "github:z", payload, known=PORT))
    assert envelope["subject"] == {"type": "pull_request", "id": "acme/portfolio#42", "repo": "acme/portfolio"}


@pytest.mark.parametrize(
    ("event", "file", "reason"),
    [
        ("ping", "ping.json", "ping: the webhook is set up; nothing to route"),
        ("pull_request", "pull_request.labeled.json", "pull_request action labeled is not routed"),
        ("issues", "ping.json", "GitHub event issues is not routed"),
    ],
)
def test_github_deliveries_that_map_to_no_event(event, file, reason):
    with pytest.raises(Unmappable, match=reason):
        github.normalize(event, "github:x", example("payloads/github/" + file), known=PORT)


GITLAB = [
    ("merge_request.open.json", "forge", "opened", None, "open", "await_ci"),
    ("merge_request.update-push.json", "forge", "synchronized", None, None, "await_ci"),
    ("merge_request.update-ready.json", "forge", "ready_for_review", "draft", "open", "await_ci"),
    ("merge_request.merge.json", "forge", "merged", "open", "merged", None),
    ("merge_request.close.json", "forge", "closed", "open", "closed", None),
    ("pipeline.running.json", "ci", "pipeline_started", "pending", "running", "await_ci"),
    ("pipeline.failed.json", "ci", "pipeline_failed", "running", "failure", None),
    ("pipeline.success.json", "ci", "pipeline_passed", "running", "success", None),
    ("pipeline.canceled.json", "ci", "pipeline_skipped", "running", "canceled", None),
]


@pytest.mark.parametrize(("file", "source", "kind", "from_", "to", "blocked"), GITLAB)
def test_gitlab_payloads(file, source, kind, from_, to, blocked):
    envelope = conforming(gitlab.normalize("gitlab:u-1", example("payloads/gitlab/" + file), known=PORT))
    assert envelope["source"] == source
    assert envelope["transition"] == {"kind": kind, "from": from_, "to": to}
    assert envelope["subject"] == {"type": "ticket", "id": "PORT-12", "repo": "acme/portfolio"}
    assert envelope["dispatch_hints"]["blocked_reason"] == blocked
    assert envelope["forge"]["pr_number"] == 7
    if source == "ci":
        assert envelope["actor"]["id"] == "gitlab:gitlab-ci"
        assert envelope["forge"]["pipeline_id"] == 8201


def test_gitlab_times_are_utc_with_a_z():
    failed = gitlab.normalize("gitlab:u", example("payloads/gitlab/pipeline.failed.json"), known=PORT)
    assert failed["occurred_at"] == "2026-11-20T10:04:19.000000Z"
    assert utc_timestamp("2026-11-20 11:04:19 +0100", path="/x") == "2026-11-20T10:04:19.000000Z"
    with pytest.raises(PayloadError):
        utc_timestamp("yesterday", path="/x")


def test_gitlab_actors():
    merged = gitlab.normalize("gitlab:u", example("payloads/gitlab/merge_request.merge.json"), known=PORT)
    assert merged["actor"] == {"kind": "human", "id": "gitlab:ada", "roles": []}
    opened = gitlab.normalize("gitlab:u", example("payloads/gitlab/merge_request.open.json"), known=PORT)
    assert opened["actor"]["kind"] == "agent"  # a project access-token bot


def test_a_gitlab_update_that_is_neither_a_push_nor_ready_is_not_routed():
    with pytest.raises(Unmappable, match="merge_request action update is not routed"):
        gitlab.normalize("gitlab:u", example("payloads/gitlab/merge_request.update-title.json"), known=PORT)


def tracked(issue_id, identifier):
    assert issue_id == "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"
    return TicketState("PORT-12", "queued", "portfolio")


@pytest.mark.parametrize(
    ("file", "to", "eligible"),
    [
        ("issue.update-state-started.json", "execute", True),
        ("issue.update-state-in-review.json", "human_test", False),
        ("issue.update-state-done.json", "done", False),
    ],
)
def test_linear_state_changes(file, to, eligible):
    envelope = conforming(linear.normalize("linear:d", example("payloads/linear/" + file), tracked))
    assert envelope["source"] == "tracker"
    assert envelope["transition"] == {"kind": "state_changed", "from": "queued", "to": to}
    assert envelope["subject"] == {
        "type": "ticket",
        "id": "PORT-12",
        "tracker_issue_id": "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9",
        "initiative_id": "portfolio",
    }
    assert envelope["actor"] == {"kind": "human", "id": "linear:6d3a8c8e-3b1f-4b9e-a2c4-9f7d1e2b3c4d", "roles": []}
    assert envelope["dispatch_hints"] == {
        "eligible_for_worker": eligible,
        "blocked_reason": None,
        "suggested_role": "coder" if eligible else None,
    }


def test_a_linear_payload_with_no_actor_maps_to_actor_kind_unknown():
    envelope = conforming(linear.normalize("linear:d", example("payloads/linear/issue.update-state-no-actor.json")))
    assert envelope["actor"] == {"kind": "unknown", "id": None, "roles": []}
    # Without a board ticket tracking the issue, the subject is the issue's identifier and `from` is unknown.
    assert envelope["subject"]["id"] == "PORT-12"
    assert envelope["transition"]["from"] is None


@pytest.mark.parametrize("file", ["issue.update-title.json", "comment.create.json"])
def test_linear_deliveries_that_are_not_state_changes_are_not_routed(file):
    with pytest.raises(Unmappable):
        linear.normalize("linear:d", example("payloads/linear/" + file))


@pytest.mark.parametrize(
    ("branch", "title", "key"),
    [
        ("port-12-login-email", None, "PORT-12"),
        ("feature/PORT-7", None, "PORT-7"),
        ("fix_port-3_typo", None, "PORT-3"),
        ("main", "[PORT-9] Fix it", "PORT-9"),
        ("release-2026", "Bump deps", None),
        ("try-new-fonts", "try fonts", None),
        # WORD-NUMBERs whose prefix the board does not know: no ticket.
        ("dependabot/npm_and_yarn/lodash-4.17.21", "Bump lodash from 4.17.20 to 4.17.21", None),
        ("renovate/node-18.x", "Update dependency node to v18", None),
        ("gh-readonly-queue/main/pr-42-6dcb09b5b57875f334f61aebed695e2e4193db5e", "Merge queue", None),
        ("fix-encoding", "Fix UTF-8 handling", None),
        ("hashing", "Upgrade to SHA-256", None),
        # An unknown candidate first does not hide a known one after it.
        ("renovate/node-18.x", "Node 18 for PORT-12", "PORT-12"),
    ],
)
def test_ticket_keys_in_branches_and_titles(branch, title, key):
    assert ticket_key_in(branch=branch, title=title, known=PORT) == key


def test_the_board_is_asked_only_about_candidates_in_order():
    asked = []

    def board(candidates):
        asked.append(list(candidates))
        return {"NODE-18"}

    assert ticket_key_in(branch="renovate/node-18.x", title="Upgrade to SHA-256", known=board) == "NODE-18"
    assert asked == [["NODE-18", "SHA-256"]]
    assert ticket_key_in(branch="main", title="Tidy up", known=board) is None
    assert len(asked) == 1  # no candidate, no question


def test_a_workflow_run_waiting_for_approval_is_manual():
    payload = example("payloads/github/workflow_run.requested-action_required.json")
    envelope = conforming(github.normalize("workflow_run", "github:w", payload, known=PORT))
    assert envelope["transition"] == {"kind": "pipeline_started", "from": None, "to": "manual"}
    assert envelope["forge"]["pipeline_status"] == "manual"
    assert envelope["dispatch_hints"] == {
        "eligible_for_worker": False,
        "blocked_reason": "await_ci",
        "suggested_role": None,
    }


@pytest.mark.parametrize(
    ("remove", "identifier"),
    [
        ((), "PORT-14"),  # data.team.key + data.number
        (("team",), "PORT-14"),  # the url
    ],
)
def test_an_older_linear_delivery_names_its_issue_without_an_identifier(remove, identifier):
    payload = example("payloads/linear/issue.update-state-started.2023.json")
    assert "identifier" not in payload["data"]
    for member in remove:
        del payload["data"][member]
    envelope = conforming(linear.normalize("linear:d", payload))
    assert envelope["subject"] == {
        "type": "ticket",
        "id": identifier,
        "tracker_issue_id": "8c1f0e52-6b3d-4a7e-9d21-f4a5b6c7d8e9",
    }
    assert envelope["actor"] == {"kind": "unknown", "id": None, "roles": []}


def test_a_linear_delivery_naming_its_issue_nowhere_is_a_payload_error():
    payload = example("payloads/linear/issue.update-state-started.2023.json")
    del payload["data"]["team"], payload["url"]
    with pytest.raises(PayloadError) as caught:
        linear.normalize("linear:d", payload)
    assert caught.value.path == "/data/identifier"


def test_every_raw_payload_example_normalizes_or_is_deliberately_unrouted():
    for path in sorted((EXAMPLES / "payloads").rglob("*.json")):
        document = example(str(path.relative_to(EXAMPLES)))
        source = path.parent.name
        try:
            if source == "github":
                event = path.name.split(".")[0]
                envelope = github.normalize(event, "github:x", document, known=PORT)
            elif source == "gitlab":
                envelope = gitlab.normalize("gitlab:x", document, known=PORT)
            else:
                envelope = linear.normalize("linear:x", document)
        except Unmappable:
            continue
        assert envelope_violations(envelope) == [], path


def test_the_clock_of_the_examples_is_the_tests_clock():
    # The payload examples happen on the fake clock's day, so the retry window and the poller see them as recent.
    assert (
        datetime(2026, 11, 20, tzinfo=UTC).date().isoformat()
        in example("payloads/gitlab/pipeline.failed.json")["object_attributes"]["created_at"]
    )
