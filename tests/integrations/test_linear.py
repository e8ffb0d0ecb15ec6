"""The tracker close against a local server shaped like Linear's GraphQL API."""

import json

import pytest

from integrations.linear import LinearTracker
from integrations.transport import TransportError

from servers.linear import API_KEY, FakeLinear


@pytest.fixture
def linear():
    with FakeLinear() as fake:
        team = fake.add_team("ENG")
        fake.add_issue("ENG-12", team)
        yield fake


def tracker(linear, key=API_KEY, **kw) -> LinearTracker:
    return LinearTracker(linear.url, key, **kw)


def test_the_issue_is_set_to_its_teams_completed_state(linear):
    closed = tracker(linear).close_issue("ENG-12")
    assert (closed.issue, closed.state, closed.already) == ("ENG-12", "Done", False)
    assert linear.find("ENG-12").state.type == "completed"
    first, second = linear.calls
    assert first["authorization"] == API_KEY  # the key itself, no "Bearer"
    assert json.loads(first["body"])["variables"] == {"id": "ENG-12", "stateType": "completed"}
    assert json.loads(second["body"])["variables"]["stateId"] == linear.find("ENG-12").state.id


def test_an_issue_already_completed_is_left_alone(linear):
    linear.add_issue("ENG-13", next(iter(linear.teams.values())), state_name="Done")
    closed = tracker(linear).close_issue("ENG-13")
    assert closed.already and closed.state == "Done"
    assert len(linear.calls) == 1


def test_a_wrong_key_is_permanent(linear):
    with pytest.raises(TransportError) as caught:
        tracker(linear, key="lin_api_wrong").close_issue("ENG-12")
    assert caught.value.permanent
    assert "authentication" in caught.value.detail.lower()


def test_an_unknown_issue_is_permanent(linear):
    with pytest.raises(TransportError) as caught:
        tracker(linear).close_issue("ENG-999")
    assert caught.value.permanent
    assert "Could not find referenced Issue" in caught.value.detail


def test_a_team_without_a_completed_state_is_permanent(linear):
    team = linear.add_team("OPS")
    team.states = [s for s in team.states if s.type != "completed"]
    linear.add_issue("OPS-1", team, state_name="Todo")
    with pytest.raises(TransportError) as caught:
        tracker(linear).close_issue("OPS-1")
    assert caught.value.permanent and "no workflow state of type completed" in caught.value.detail


def test_a_server_error_is_transient(linear):
    linear.fail_next(500)
    with pytest.raises(TransportError) as caught:
        tracker(linear).close_issue("ENG-12")
    assert not caught.value.permanent and "500" in caught.value.detail


def test_a_rate_limit_is_transient_and_says_when_to_come_back(linear):
    linear.rate_limit_next(retry_after=42)
    with pytest.raises(TransportError) as caught:
        tracker(linear).close_issue("ENG-12")
    assert not caught.value.permanent
    assert caught.value.retry_after == 42


def test_a_slow_answer_times_out_as_transient(linear):
    linear.hold.clear()
    with pytest.raises(TransportError) as caught:
        tracker(linear, timeout=(1.0, 0.3)).close_issue("ENG-12")
    assert not caught.value.permanent and "no answer from Linear within 0.3 s (timed out)" in caught.value.detail


def test_nothing_listening_is_transient():
    from processes import free_port

    with pytest.raises(TransportError) as caught:
        LinearTracker(f"http://127.0.0.1:{free_port()}/graphql", API_KEY).close_issue("ENG-12")
    assert not caught.value.permanent and "could not connect to Linear" in caught.value.detail
