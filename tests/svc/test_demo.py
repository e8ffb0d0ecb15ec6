"""`svc demo`'s story, read back the way a person reads it: through the API and the web board.

The demo is filled once for this module (it walks two weeks of the board through the real units of work), at a
fixed end time, so what is late and what is due does not depend on when the suite runs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from conftest import BASIC, CI_SECRET
from fakes import FakeClock
from testclient import ApiClient

END = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # a Friday, noon UTC


@pytest.fixture(scope="module")
def demo(tmp_path_factory, module_database_url):
    from api import create_app
    from domain.config import Config
    from storage import db as storage_db
    from svc import demo as demo_story

    folder = tmp_path_factory.mktemp("demo")
    # As docs/board.md starts it: the demo sets the router's policy itself.
    config = Config(data_dir=folder, database_url=module_database_url, ci_webhook_secret=CI_SECRET, basic_auth=BASIC)
    app = create_app(config, clock=FakeClock(END + timedelta(minutes=2)))
    filled = demo_story.fill(config, end=END)
    yield SimpleNamespace(api=ApiClient(app, basic=BASIC, ci_secret=CI_SECRET), filled=filled, config=config)
    obj = storage_db.db.obj
    if hasattr(obj, "close_all"):
        obj.close_all()


def tickets(api) -> list[dict]:
    return api.get("/api/v1/tickets?limit=500").json["tickets"]


def test_tickets_stand_in_every_stage_waiting_on_every_kind_of_thing(demo):
    from machines.stages import STAGES, WAITING_ON

    board = tickets(demo.api)
    assert {t["stage"] for t in board} == set(STAGES)
    # Every wait but a failed forge write, which only live dispatch makes (the demo's rules stay in shadow mode).
    assert {t["waiting_on"] for t in board} - {None} == set(WAITING_ON) - {"forge_failed"}
    assert [t["key"] for t in board if t["assigned_slot"]]
    writing = next(t for t in board if t["key"] == "WRITING-DAILY")
    assert (writing["stage"], writing["waiting_on"]) == ("execute", "agent")
    assert writing["link"].startswith("https://") and "/writing/" in writing["link"]


def test_every_agent_has_a_history_some_failing_and_only_the_poller_late(demo):
    agents = {a["agent_id"]: a for a in demo.api.get("/api/v1/agents").json["agents"]}
    assert all(a["last_run_at"] is not None for a in agents.values()), agents
    assert [name for name, a in agents.items() if a["late"]] == ["poller"]
    failing = set()
    for name in agents:
        runs = demo.api.get(f"/api/v1/agents/runs?agent_id={name}&limit=500").json["runs"]
        assert len(runs) >= 2, name
        if any(not r["ok"] for r in runs):
            failing.add(name)
    assert {"writing-daily", "slot-steward"} <= failing


def test_the_router_recorded_every_outcome_from_every_source(demo):
    from domain.router.routing import OUTCOMES, SOURCES

    # Every outcome but `stuck`, which only a live fixer's jobs make (the demo's rules stay in shadow mode).
    assert set(demo.filled.outcomes) == set(OUTCOMES) - {"stuck"}
    decisions = demo.api.get("/api/v1/router/decisions?limit=500&include=own").json["decisions"]
    assert len(decisions) == sum(demo.filled.outcomes.values())
    assert {d["source"] for d in decisions} == set(SOURCES)
    assert {d["role"] for d in decisions if d["outcome"] == "would_dispatch"} == {"coder", "fixer"}
    assert not any(d["dispatched"] for d in decisions)


def test_the_policy_it_judged_with_is_the_policy_in_force_under_which_nothing_flips(demo):
    from svc.demo import DEMO_ALLOWLIST, policy_in_force

    in_force = demo.api.get("/api/v1/router/policy").json
    assert demo.filled.policy.version == policy_in_force(demo.config).version == in_force["version"]
    assert set(in_force["policy"]["allowlist"]) == DEMO_ALLOWLIST and in_force["set_by"] == "svc demo"
    today = demo.api.post("/api/v1/router/backtest", json={})
    assert today.status_code == 200, today.text
    assert today.json["flipped"] == 0 and today.json["evaluated"] > 50
    # "Try a policy" opens at today's policy: nothing flips.
    page = demo.api.get("/decisions/try")
    assert f"0 of {today.json['evaluated']} decisions would flip" in page.text


@pytest.mark.process
def test_the_suggested_backtest_flips_what_the_advice_says(demo):
    import json
    import subprocess

    from processes import SVC, svc_env

    suggestion = demo.filled.suggestion
    assert suggestion.command.startswith("svc backtest --allowlist ") and "svc:grace" in suggestion.command
    env = svc_env(DATABASE_URL=demo.config.database_url, SVC_DATA_DIR=str(demo.config.data_dir))
    ran = subprocess.run(
        [SVC, *suggestion.command.split()[1:], "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    found = json.loads(ran.stdout)
    # Letting Grace through lets through what the authorization gate held of hers, and nothing else changes.
    assert found["flipped"] > 0 and found["flips_by_gate"]["authorization"] == found["flipped"]
    assert {gate for gate, n in found["flips_by_gate"].items() if n} == {"authorization"}
    assert suggestion.words() == (
        f"`{suggestion.command}` flips {found['flipped']} of the {found['evaluated']} decisions, "
        "all on the authorization gate"
    )


def test_timelines_show_slot_releases_and_tracker_close_results(demo):
    def kinds(key):
        return [e["kind"] for e in demo.api.get(f"/api/v1/tickets/{key}/timeline?limit=500").json["entries"]]

    assert {"slot_wipe_failed", "slot_released", "tracker_close_failed", "marked_done"} <= set(kinds("PORT-9"))
    assert {"slot_released", "tracker_closed"} <= set(kinds("PORT-10"))
    assert {"slot_released", "cancelled"} <= set(kinds("PORT-13"))
    writing = kinds("WRITING-DAILY")
    assert {"writing_report", "automation_changed"} <= set(writing)

    page = demo.api.get("/tickets/PORT-9").text
    for label in ("Bay wipe failed; slot kept", "Slot released", "Tracker close failed; the ticket stays done"):
        assert label in page
    assert "Tracker issue closed" in demo.api.get("/tickets/PORT-10").text


def test_every_kind_of_timeline_entry_has_words_on_the_ticket_page(demo):
    from api.web.timeline import KINDS
    from storage.db import connection
    from storage.models import TimelineEntry

    with connection():
        written = {row.kind for row in TimelineEntry.select(TimelineEntry.kind).distinct()}
    assert written <= set(KINDS)
    # Everything but a slot release whose handler crashed (it needs a bug to happen) is in the story, and but the
    # entries of dispatch jobs: the demo's rules stay in shadow mode (each job entry is read on a ticket's page by
    # tests/api/web/test_job_pages.py).
    jobs = {"job_claimed", "job_succeeded", "job_failed", "job_requeued", "job_cancelled", "pull_request"}
    jobs |= {"job_retried", "forge_failed", "forge_retried"}
    assert set(KINDS) - written == {"slot_release_failed", *jobs}


def test_chat_posts_are_recorded_and_never_sent(demo):
    from storage.db import connection
    from storage.models import OutboxMessage

    with connection():
        chat = [m.status for m in OutboxMessage.select().where(OutboxMessage.kind == "chat")]
    assert chat and set(chat) == {"skipped"}


def test_every_page_of_the_board_shows_the_demo(demo):
    board = demo.api.get("/")
    assert board.status_code == 200
    assert board.text.count('class="needs-item"') >= 5
    assert "! late" in board.text
    decisions = demo.api.get("/decisions").text
    assert "Older decisions" in decisions
    for ticket in tickets(demo.api):
        assert demo.api.get(f"/tickets/{ticket['key']}").status_code == 200, ticket["key"]


def test_it_refuses_a_database_that_holds_tickets(demo):
    from svc import demo as demo_story

    before = demo.api.get("/api/v1/router/decisions?limit=500").json["decisions"]
    with pytest.raises(demo_story.AlreadyFilled, match="already holds 18 ticket"):
        demo_story.fill(demo.config, end=END + timedelta(days=1))
    assert demo.api.get("/api/v1/router/decisions?limit=500").json["decisions"] == before


def test_the_installed_examples_are_the_repositorys_examples():
    # One copy: `examples/` is shipped inside the package as `svc/examples`, which the demo reads.
    from importlib import resources

    from events_kit import EXAMPLES

    shipped = resources.files("svc") / "examples"
    originals = sorted(
        path.relative_to(EXAMPLES)
        for folder in ("payloads", "envelopes")
        for path in (EXAMPLES / folder).rglob("*.json")
    )
    assert len(originals) > 40
    for relative in originals:
        assert shipped.joinpath(*relative.parts).read_bytes() == (EXAMPLES / relative).read_bytes(), relative
