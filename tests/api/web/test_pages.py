"""The web board's pages as HTML: what a person reads, and what keeps it safe."""

import hashlib
import re

import pytest

from machines.stages import STAGES


@pytest.fixture
def board(api):
    api.post("/api/v1/initiatives", json={"id": "port", "name": "Port", "stage": "active"})
    for key, stage in [("PORT-1", "human_test"), ("PORT-2", "queued"), ("PORT-3", "human_merge")]:
        api.post(
            "/api/v1/tickets", json={"key": key, "initiative_id": "port", "title": f"Title of {key}", "stage": stage}
        )
    return api


def needs_you_keys(html: str) -> list[str]:
    section = html.split('id="needs-you"', 1)[1].split("</section>", 1)[0]
    return re.findall(r'data-key="([^"]+)"', section)


def test_the_board_lists_needs_you_oldest_first_with_what_to_do(board, clock):
    page = board.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert needs_you_keys(page.text) == ["PORT-1", "PORT-3"]
    assert "Test the change on its preview" in page.text
    assert "Review and merge the pull request" in page.text


def test_every_stage_has_a_column_and_live_tickets_have_confirmable_actions(board):
    html = board.get("/").text
    for stage in [
        "agreement",
        "queued",
        "execute",
        "ci",
        "human_test",
        "human_merge",
        "ship",
        "done",
        "blocked",
        "cancelled",
    ]:
        assert f'data-stage="{stage}"' in html
    assert 'data-action="mark_done" data-key="PORT-2"' in html
    assert 'data-action="cancel" data-key="PORT-2"' in html


def test_the_agents_strip_has_the_automation_checkbox_with_a_label(board):
    html = board.get("/").text
    assert '<input type="checkbox" id="writing-automation"' in html
    assert '<label for="writing-automation">' in html
    for agent in ["writing-daily", "ops-daily-pulse", "ops-weekly-digest", "slot-steward", "idle-reclaim", "poller"]:
        assert f'data-agent="{agent}"' in html


def test_the_needs_you_fragment_stands_alone(board):
    fragment = board.get("/fragments/needs-you")
    assert fragment.text.lstrip().startswith('<section id="needs-you"')
    assert needs_you_keys(fragment.text) == ["PORT-1", "PORT-3"]


def test_a_ticket_page_shows_its_timeline(board):
    board.post("/api/v1/tickets/PORT-2/move", json={"to": "execute"})
    html = board.get("/tickets/PORT-2").text
    assert "queued → execute by admin" in html
    assert "created in queued by admin" in html


def test_an_unknown_ticket_is_a_page_that_says_so(board):
    missing = board.get("/tickets/NOPE-1")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("text/html")
    assert "No ticket NOPE-1 on the board" in missing.text
    assert '<a href="/decisions?subject_id=NOPE-1">' in missing.text


def test_pages_escape_what_users_wrote_and_forbid_outside_scripts(board):
    board.post(
        "/api/v1/tickets",
        json={"key": "PORT-9", "initiative_id": "port", "title": '<script>alert("x")</script>', "stage": "human_test"},
    )
    page = board.get("/")
    assert '<script>alert("x")</script>' not in page.text
    assert "&lt;script&gt;" in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'self'" in policy


def test_the_board_needs_credentials(api):
    result = api.get("/", auth=None)
    assert result.status_code == 401
    assert result.headers["www-authenticate"].startswith("Basic")


def test_static_files_are_served_and_nothing_else(api):
    css = api.get("/static/board.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert api.get("/static/board.js").headers["content-type"].startswith("text/javascript")
    assert api.get("/static/secrets.env").status_code == 404


def test_every_page_has_an_icon_and_favicon_ico_answers_it(api):
    icon = api.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert icon.content.startswith(b"<svg") and len(icon.content) < 2048
    # Browsers ask for /favicon.ico whatever the page links: the same icon, not a 404.
    asked = api.get("/favicon.ico")
    assert asked.status_code == 200 and asked.headers["content-type"] == "image/svg+xml"
    assert asked.content == icon.content
    for path in ("/", "/decisions", "/initiatives", "/tickets/NOPE-1"):
        assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in api.get(path).text, path
    # Like the other static files: credentials needed, declared in the OpenAPI document.
    assert api.get("/favicon.ico", auth=None).status_code == api.get("/static/board.css", auth=None).status_code == 401
    paths = api.get("/api/v1/openapi.json").json["paths"]
    assert "get" in paths["/favicon.ico"]
    assert "favicon.svg" in paths["/static/{name}"]["get"]["parameters"][0]["schema"]["enum"]


def test_the_vendored_idiomorph_is_the_released_file_and_says_so(api):
    """The page's one library is served as it was released: its header names the version and the licence, and the
    sha256 it states is that of the rest of the file, so a hand edit shows here."""
    answer = api.get("/static/idiomorph.min.js")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/javascript")
    header, _, released = answer.text.partition(" */\n")
    assert "idiomorph 0.8.0" in header and "Zero-Clause BSD" in header
    stated = re.search(r"sha256 ([0-9a-f]{64})", header).group(1)
    assert hashlib.sha256(released.encode()).hexdigest() == stated
    assert '<script src="/static/idiomorph.min.js" defer></script>' in api.get("/").text


def test_each_agent_tile_says_its_schedule_in_words(board):
    html = board.get("/").text
    # Each tile's text runs from its data-agent to the next one's (the last one's, to the end of the page).
    tiles = {chunk.split('"', 1)[0]: chunk for chunk in html.split('data-agent="')[1:]}
    assert "At 08:00 every day" in tiles["ops-daily-pulse"]
    assert "At 09:00 on Monday" in tiles["ops-weekly-digest"]
    assert "At 09:00 and 18:00 every day" in tiles["writing-daily"]
    assert "At 04:00 every day" in tiles["idle-reclaim"]
    assert "schedule-words" not in tiles["poller"]  # "every 5 minutes" says it already


def move_options(html: str, key: str) -> list[str]:
    """The target stages the page offers in `key`'s move menu (none when it has no menu)."""
    found = re.search(rf'<select id="[^"]*-{re.escape(key)}-to" name="to"[^>]*>(.*?)</select>', html, re.S)
    return re.findall(r'<option value="([^"]+)"', found.group(1)) if found else []


STAGE_LIST = list(STAGES)


@pytest.mark.parametrize("stage", STAGE_LIST)
def test_the_move_menu_offers_exactly_the_moves_the_api_accepts(board, stage):
    key = f"MENU-{STAGE_LIST.index(stage)}"
    board.post("/api/v1/tickets", json={"key": key, "initiative_id": "port", "title": "menu", "stage": stage})
    offered = move_options(board.get("/").text, key)
    assert offered == move_options(board.get(f"/tickets/{key}").text, key)
    accepted = []
    for n, target in enumerate(STAGE_LIST):
        probe = f"{key}{n}"
        board.post("/api/v1/tickets", json={"key": probe, "initiative_id": "port", "title": "probe", "stage": stage})
        answer = board.post(f"/api/v1/tickets/{probe}/move", json={"to": target})
        assert answer.status_code in (200, 409), answer.text
        if answer.status_code == 200:
            accepted.append(target)
    assert offered == accepted


def test_the_writing_ticket_has_no_moves_on_the_page_and_the_api_agrees(board):
    assert board.post("/api/v1/agents/writing/notify", json={"status": "BACKFILL_READY"}, auth="ci").status_code == 200
    html = board.get("/").text
    assert move_options(html, "WRITING-DAILY") == []
    assert 'data-key="WRITING-DAILY" data-endpoint' not in html
    assert "notify reports alone move WRITING-DAILY" in html
    assert board.post("/api/v1/tickets/WRITING-DAILY/move", json={"to": "ci"}).status_code == 409


def test_a_viewer_sees_no_action_control(board, monkeypatch):
    from api.web import render

    board.post("/api/v1/slots/bay-1/claim", json={"ticket": "PORT-2"})
    board.post("/api/v1/tickets", json={"key": "PORT-4", "initiative_id": "port", "title": "t", "stage": "done"})
    before = {path: board.get(path).text for path in ["/", "/initiatives", "/tickets/PORT-2"]}
    assert all('class="api' in html for html in before.values())
    monkeypatch.setattr(render, "can_act", lambda req: False)
    for path in before:
        html = board.get(path).text
        for control in ['class="api', "<form", "<button", "<input", "<select", 'class="menu"', "data-endpoint"]:
            assert control not in html, (path, control)
    # What it shows is all still there: the automation's state, the bays, the wallet, the columns.
    html = board.get("/").text
    assert 'id="writing-automation-state"' in html and 'data-slot="bay-1"' in html and 'id="wallet"' in html


def test_the_initiatives_page_counts_each_initiatives_tickets(board):
    board.post("/api/v1/initiatives", json={"id": "billing", "name": "Billing <b>revamp</b>"})
    board.post("/api/v1/tickets/PORT-2/cancel")
    html = board.get("/initiatives").text
    items = dict(re.findall(r'data-initiative="([^"]+)">(.*?)</li>', html, re.S))
    assert set(items) == {"billing", "port"}
    assert "3 tickets</strong>: 2 open, 0 done, 1 cancelled" in items["port"]
    assert "human_test 1" in items["port"] and "human_merge 1" in items["port"]
    assert "0 tickets</strong>" in items["billing"]
    assert "agreement gate fails" in items["billing"] and "agreement gate passes" in items["port"]
    assert "Billing &lt;b&gt;revamp&lt;/b&gt;" in html
    # The stage menu lists every stage the contract allows, the current one chosen.
    options = re.findall(r'<option value="([^"]+)"( selected)?', items["billing"])
    assert options == [("agree", " selected"), ("active", ""), ("done", ""), ("cancelled", "")]
