"""The writing automation toggle and the content repository's config, through HTTP: the seed's ON/OFF table."""

import pytest

from storage import outbox
from storage.db import connection

AUTOMATION = "/api/v1/agents/writing/automation"
CONFIG = "/api/v1/agents/writing/config"
NOTIFY = "/api/v1/agents/writing/notify"


def needs_you(api):
    return [t["key"] for t in api.get("/api/v1/tickets?needs_you=true").json["tickets"]]


def test_automation_is_on_by_default_and_never_changed(api):
    assert api.get(AUTOMATION).json == {"enabled": True, "updated_at": None, "updated_by": None}
    assert api.get(CONFIG, auth="ci").json["automation_enabled"] is True


def test_on_the_report_updates_ticket_agents_strip_and_chat(api):
    result = api.post(NOTIFY, auth="ci", json={"status": "BACKFILL_READY", "missing": 1})
    assert result.json["ticket"]["needs_you"] is True
    assert needs_you(api) == ["WRITING-DAILY"]
    strip = {a["agent_id"]: a for a in api.get("/api/v1/agents").json["agents"]}
    assert strip["writing-daily"]["last_status"] == "BACKFILL_READY"
    with connection():
        assert [m.payload["source"] for m in outbox.recent(kind="chat")] == ["BACKFILL_READY"]


def test_off_hides_the_writing_ticket_from_needs_you_and_tells_the_content_repository(api, clock):
    api.post(NOTIFY, auth="ci", json={"status": "BACKFILL_READY", "missing": 1})

    turned = api.post(AUTOMATION, json={"enabled": False})

    assert turned.status_code == 200
    assert turned.json == {"enabled": False, "updated_at": "2026-11-20T10:00:00.000000Z", "updated_by": "admin"}
    assert api.get(AUTOMATION, auth="ci").json == turned.json
    assert needs_you(api) == []
    assert api.get("/api/v1/tickets/WRITING-DAILY").json["needs_you"] is False
    assert api.get(CONFIG, auth="ci").json["automation_enabled"] is False
    # the scheduled job reports AUTOMATION_DISABLED: a run and a receipt, nothing moves, no chat
    disabled = api.post(NOTIFY, auth="ci", json={"status": "AUTOMATION_DISABLED"}).json
    assert disabled["chat"] == "none" and disabled["ticket"]["stage"] == "execute"
    assert disabled["ticket"]["needs_you"] is False
    strip = {a["agent_id"]: a for a in api.get("/api/v1/agents").json["agents"]}
    assert strip["writing-daily"]["last_status"] == "AUTOMATION_DISABLED"


def test_off_a_manual_finalize_batch_still_works(api):
    api.post(AUTOMATION, json={"enabled": False})
    result = api.post(NOTIFY, auth="ci", json={"status": "SUCCESS", "items": [{"slug": "x", "title": "X"}]})
    assert result.json["ticket"]["stage"] == "done" and result.json["chat"] == "queued"


def test_on_again_puts_the_writing_ticket_back_on_needs_you(api, clock):
    api.post(NOTIFY, auth="ci", json={"status": "STOP_NEED_TOPICS"})
    api.post(AUTOMATION, json={"enabled": False})
    clock.advance(minutes=5)
    back = api.post(AUTOMATION, json={"enabled": True})
    assert back.json == {"enabled": True, "updated_at": "2026-11-20T10:05:00.000000Z", "updated_by": "admin"}
    assert needs_you(api) == ["WRITING-DAILY"]
    assert api.get(CONFIG, auth="ci").json["automation_enabled"] is True


def test_each_change_is_audited_on_the_writing_timeline_and_a_repeat_changes_nothing(api, clock):
    api.post(AUTOMATION, json={"enabled": False})
    clock.advance(minutes=1)
    repeat = api.post(AUTOMATION, json={"enabled": False})
    assert repeat.json["updated_at"] == "2026-11-20T10:00:00.000000Z"  # the first change stands
    api.post(AUTOMATION, json={"enabled": True})
    entries = api.get("/api/v1/tickets/WRITING-DAILY/timeline").json["entries"]
    assert [(e["kind"], e["data"]["enabled"], e["data"]["actor"]) for e in entries] == [
        ("automation_changed", True, "admin"),
        ("automation_changed", False, "admin"),
    ]
    assert entries[1]["summary"].startswith("writing automation turned off by admin")


@pytest.mark.parametrize("body", [{}, {"enabled": "no"}, {"enabled": 0}, {"enabled": False, "why": "x"}])
def test_a_bad_toggle_body_is_422_and_changes_nothing(api, body):
    assert api.post(AUTOMATION, json=body).status_code == 422
    assert api.get(AUTOMATION).json["enabled"] is True


def test_the_toggle_credentials(api):
    assert api.get(AUTOMATION, auth="ci").status_code == 200
    assert api.get(AUTOMATION, auth="basic").status_code == 200
    assert api.get(AUTOMATION, auth=None).status_code == 401
    refused = api.post(AUTOMATION, auth="ci", json={"enabled": False})  # people change it, not CI scripts
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Basic")
    assert api.get(AUTOMATION).json["enabled"] is True


def test_the_config_for_the_content_repository(app_factory, config_factory):
    from conftest import BASIC, CI_SECRET
    from testclient import ApiClient

    config = config_factory(base_url="https://svc.example", site_url="https://example.org")
    api = ApiClient(app_factory(config), basic=BASIC, ci_secret=CI_SECRET)
    assert api.get(CONFIG, auth="ci").json == {
        "automation_enabled": True,
        "articles_per_day": 1,
        "notify_url": "https://svc.example/api/v1/agents/writing/notify",
        "poll_schedule": "0 9,18 * * *",
        "site_url": "https://example.org",
    }
    assert api.get(CONFIG, auth="basic").status_code == 401  # the CI secret only, as the seed says


def test_the_config_says_so_when_the_site_url_is_unset(api):
    assert api.get(CONFIG, auth="ci").json["site_url"] is None


def test_the_poll_schedule_given_out_is_the_one_the_agents_strip_monitors(api):
    strip = {a["agent_id"]: a for a in api.get("/api/v1/agents").json["agents"]}
    assert api.get(CONFIG, auth="ci").json["poll_schedule"] == strip["writing-daily"]["schedule"]


def test_while_automation_is_off_the_writing_ticket_lists_as_not_needing_anyone(api):
    api.post("/api/v1/agents/writing/notify", auth="ci", json={"status": "BACKFILL_READY"})
    api.post("/api/v1/agents/writing/automation", json={"enabled": False})
    not_needing = [t["key"] for t in api.get("/api/v1/tickets?needs_you=false").json["tickets"]]
    assert "WRITING-DAILY" in not_needing
    assert "WRITING-DAILY" not in [t["key"] for t in api.get("/api/v1/tickets?needs_you=true").json["tickets"]]
    api.post("/api/v1/agents/writing/automation", json={"enabled": True})
    assert "WRITING-DAILY" not in [t["key"] for t in api.get("/api/v1/tickets?needs_you=false").json["tickets"]]
