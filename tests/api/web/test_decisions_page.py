"""The router decisions page (`/decisions`): shadow mode said plainly, every gate's verdict in words, filters in a
plain GET form, keyset pages, links to ticket pages; and a ticket page's own recent decisions."""

from __future__ import annotations

import copy
import html
from html.parser import HTMLParser
from urllib.parse import urlencode

import pytest

from events_kit import ALLOWLIST, example, seed_board
from testclient import ApiClient

MAPPING = "envelopes/mapping/"


class Page(HTMLParser):
    """What a person (or a screen reader) finds on the page: the decisions, the gates, the form's controls."""

    def __init__(self, html: str):
        super().__init__()
        self.decisions: list[dict[str, str]] = []
        self.gates: list[list[str]] = []
        self.controls: list[dict[str, str]] = []
        self.labels: set[str] = set()
        self.links: list[str] = []
        self._gate: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "li" and "decision" in classes:
            self.decisions.append(attrs)
            self.gates.append([])
        if tag == "li" and "gate" in classes:
            self._gate = []
        if tag in ("input", "select", "textarea") and attrs.get("type") != "hidden":
            self.controls.append(attrs)
        if tag == "label" and attrs.get("for"):
            self.labels.add(attrs["for"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])

    def handle_data(self, data):
        if self._gate is not None:
            self._gate.append(data)

    def handle_endtag(self, tag):
        if tag == "li" and self._gate is not None:
            self.gates[-1].append(" ".join("".join(self._gate).split()))
            self._gate = None


@pytest.fixture
def api(app_factory, config_factory):
    app = app_factory(config_factory(router_allowlist=ALLOWLIST))
    return ApiClient(app, basic="admin:correct-horse-battery", ci_secret="test-ci-secret-0123456789abcdef")


@pytest.fixture
def routed(api):
    """Decisions of every outcome: a coder and a fixer would be dispatched, a push waits for CI, the poller's
    request, a pull request that is no ticket, and an envelope that breaks the contract."""
    seed_board(api, tickets={"PORT-12": "queued", "PORT-14": "queued"})
    for envelope in (
        example(MAPPING + "1-tracker-state-changed-queued-to-execute.json"),
        example(MAPPING + "2-forge-synchronized-agent-await-ci.json"),
        example(MAPPING + "3-ci-pipeline-failed-fixer.json"),
        example(MAPPING + "4-poller-dispatch-requested.json"),
        example("envelopes/valid/closed.json"),
    ):
        assert api.post("/api/v1/events", json=envelope, auth="ci").status_code == 202
    rejected = api.post("/api/v1/events", json=example("envelopes/invalid/unknown-actor-kind.json"), auth="ci")
    assert rejected.status_code == 422
    return api


def page(api, query: str = "") -> Page:
    result = api.get("/decisions" + query)
    assert result.status_code == 200, result.text
    assert result.headers["content-type"].startswith("text/html")
    return Page(result.text)


def test_the_page_says_shadow_mode_and_never_that_anything_was_dispatched(routed):
    html = routed.get("/decisions").text
    assert "shadow mode" in html.lower()
    assert "would dispatch coder" in html and "would dispatch fixer" in html
    assert "dispatched" not in html.lower()


def test_each_decision_is_one_line_with_the_gates_that_stopped_it(routed):
    found = page(routed)
    assert len(found.decisions) == 6
    listed = {d["id"]: d for d in routed.get("/api/v1/router/decisions").json["decisions"]}
    for decision, gates in zip(found.decisions, found.gates, strict=True):
        recorded = listed[int(decision["data-id"])]
        failed = [g for g in recorded["gates"] if not g["passed"]]
        # Only the gates that failed, each in words with its reason; none for a decision that passed them all.
        assert gates == [f"✗ {g['gate']} {g['reason']}" for g in failed], (decision, gates)
    closed = found.decisions.index(next(d for d in found.decisions if d["data-subject"] == "acme/portfolio#43"))
    assert "✗ agreement no initiative is known for the subject" in found.gates[closed]
    html = routed.get("/decisions").text
    assert html.count("all 7 gates pass") == sum(
        1 for d in listed.values() if d["gates"] and all(g["passed"] for g in d["gates"])
    )
    assert '<details class="envelope">' not in html  # the envelopes are on the decisions' own pages


def test_a_decisions_own_page_spells_out_every_gate_with_its_reason(routed):
    for recorded in routed.get("/api/v1/router/decisions").json["decisions"]:
        found = Page(routed.get(f"/decisions/{recorded['id']}").text)
        assert [d["data-id"] for d in found.decisions] == [str(recorded["id"])]
        if recorded["outcome"] == "rejected":
            assert found.gates == [[]]
            continue
        gates = found.gates[0]
        names = [g.split()[2] for g in gates]
        assert names == ["authorization", "agreement", "budget", "fleet", "human_gate", "retry_budget", "fresh"]
        assert all(g.startswith(("✓ pass ", "✗ fail ")) and len(g.split()) > 3 for g in gates), gates
    closed = next(
        d for d in routed.get("/api/v1/router/decisions").json["decisions"] if d["subject_id"] == "acme/portfolio#43"
    )
    assert (
        "✗ fail agreement no initiative is known for the subject"
        in Page(routed.get(f"/decisions/{closed['id']}").text).gates[0]
    )


def test_filters_show_only_matching_decisions_and_keep_their_values(routed):
    dispatching = page(routed, "?outcome=would_dispatch")
    assert [d["data-outcome"] for d in dispatching.decisions] == ["would_dispatch", "would_dispatch"]
    assert '<option value="would_dispatch" selected>' in routed.get("/decisions?outcome=would_dispatch").text

    from_ci = page(routed, "?source=ci")
    assert [(d["data-source"], d["data-outcome"]) for d in from_ci.decisions] == [
        ("ci", "rejected"),  # the envelope with an unknown actor kind claims source ci
        ("ci", "would_dispatch"),
    ]

    # A ticket key typed in lower case is the ticket.
    about = page(routed, "?subject_id=port-12")
    assert {d["data-subject"] for d in about.decisions} == {"PORT-12"}
    assert len(about.decisions) == 4  # mapping 1, 2, 3 and the rejected envelope

    both = page(routed, "?outcome=no_action&source=forge&subject_id=PORT-12")
    assert [(d["data-outcome"], d["data-source"]) for d in both.decisions] == [("no_action", "forge")]


def test_the_page_lists_what_the_api_lists_for_the_same_filter(routed):
    for query in ("", "?outcome=would_dispatch", "?source=tracker", "?subject_id=PORT-14"):
        shown = [int(d["data-id"]) for d in page(routed, query).decisions]
        listed = [d["id"] for d in routed.get("/api/v1/router/decisions" + query).json["decisions"]]
        assert shown == listed, query


def test_the_form_sends_empty_values_for_any(routed):
    assert len(page(routed, "?outcome=&source=&subject_id=").decisions) == 6


def test_a_rejected_envelope_shows_why(routed):
    html = routed.get("/decisions?outcome=rejected").text
    assert "/actor/kind" in html
    assert "rejected" in html


def test_subjects_on_the_board_link_to_their_ticket_pages(routed):
    found = page(routed)
    assert "/tickets/PORT-12" in found.links and "/tickets/PORT-14" in found.links
    assert not any("portfolio#43" in link for link in found.links)


def test_older_decisions_are_a_link_away_and_the_filter_stays(routed):
    batch = []
    for n in range(55):
        envelope = copy.deepcopy(example(MAPPING + "2-forge-synchronized-agent-await-ci.json"))
        envelope["id"] = f"github:push-{n}"
        batch.append(envelope)
    assert routed.post("/api/v1/events", json={"events": batch}, auth="ci").json["accepted"] == 55

    first = page(routed, "?outcome=no_action")
    assert len(first.decisions) == 50
    older = next(link for link in first.links if "cursor=" in link)
    assert "outcome=no_action" in older
    second = page(routed, older.removeprefix("/decisions"))
    assert len(second.decisions) == 57 - 50  # the 55 pushes, mapping 2 and the poller's request
    assert {d["data-outcome"] for d in second.decisions} == {"no_action"}
    assert not {d["data-id"] for d in first.decisions} & {d["data-id"] for d in second.decisions}
    assert not any("cursor=" in link for link in second.links)
    assert "/decisions?outcome=no_action" in second.links  # back to the newest


def test_older_pages_keep_a_since_filter_to_the_microsecond(routed, clock):
    # A time pasted from the API (evaluated_at has microseconds): the older pages must hold the same filter, not
    # one cut to the second that lets in the decisions from the half second before it.
    since = clock.advance(microseconds=250_000)
    clock.advance(microseconds=250_000)
    batch = []
    for n in range(55):
        envelope = copy.deepcopy(example(MAPPING + "2-forge-synchronized-agent-await-ci.json"))
        envelope["id"] = f"github:push-{n}"
        batch.append(envelope)
    assert routed.post("/api/v1/events", json={"events": batch}, auth="ci").json["accepted"] == 55
    stamp = since.isoformat().replace("+00:00", "Z")
    first = page(routed, "?since=" + stamp)
    assert len(first.decisions) == 50
    older = next(link for link in first.links if "cursor=" in link)
    second = page(routed, older.removeprefix("/decisions"))
    assert len(second.decisions) == 55 - 50  # the pushes only: the earlier decisions are before `since`


def test_a_filter_value_the_form_never_sends_is_refused_on_a_page(routed):
    result = routed.get("/decisions?outcome=dispatched")
    assert result.status_code == 400
    assert result.headers["content-type"].startswith("text/html")  # a page answers a page
    assert "These filters cannot be read" in result.text and "outcome" in result.text
    # A link to older decisions cut short, or typed by hand, is said on a page too.
    cut = routed.get("/decisions?cursor=zz")
    assert cut.status_code == 400 and cut.headers["content-type"].startswith("text/html")
    assert "cursor: not a link to older decisions this page made" in cut.text


def test_a_misspelled_filter_is_said_on_a_page_with_a_link_to_the_page_without_it(routed):
    # `?subject=` for `subject_id` answered every subject's decisions, which looked right: now the page says so.
    result = routed.get("/decisions?subject=PORT-12&outcome=no_action")
    assert result.status_code == 400
    assert result.headers["content-type"].startswith("text/html")  # a page answers a page
    said = Page(result.text)
    assert "unknown query parameter 'subject'; did you mean 'subject_id'?" in html.unescape(result.text)
    assert said.decisions == []
    assert "/decisions?outcome=no_action" in said.links  # the same page, without what it cannot read
    assert routed.get("/?refresh=1").status_code == 400  # every page alike
    assert "'refresh'; this takes no query parameters" in html.unescape(routed.get("/?refresh=1").text)


class Targets(HTMLParser):
    """The addresses a page sends a person to: its links, and each GET form's action with every field it sends."""

    def __init__(self, text: str):
        super().__init__()
        self.urls: list[str] = []
        self._form: list | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and (attrs.get("href") or "").startswith("/"):
            self.urls.append(html.unescape(attrs["href"]))
        if tag == "form" and (attrs.get("method") or "").lower() == "get":
            self._form = [attrs["action"], []]
        if tag in ("input", "select", "textarea") and self._form is not None and attrs.get("name"):
            self._form[1].append((attrs["name"], attrs.get("value") or ""))

    def handle_endtag(self, tag):
        if tag == "form" and self._form is not None:
            action, fields = self._form
            self.urls.append(action + "?" + urlencode(fields))
            self._form = None


def test_every_link_and_form_of_the_pages_sends_only_what_its_target_takes(routed):
    """The board's own links and forms (filters, older pages, the scorecard's numbers and window, Try a policy)
    never send a query parameter their target does not declare: each is followed, and none is refused."""
    batch = []
    for n in range(55):
        envelope = copy.deepcopy(example(MAPPING + "2-forge-synchronized-agent-await-ci.json"))
        envelope["id"] = f"github:push-{n}"
        batch.append(envelope)
    assert routed.post("/api/v1/events", json={"events": batch}, auth="ci").json["accepted"] == 55
    pages = ["/", "/initiatives", "/decisions", "/decisions?outcome=no_action", "/tickets/PORT-12", "/tickets/NOPE-1"]
    pages += ["/decisions/try", "/decisions/behind?number=rule:coder:pending&window_seconds=3600", "/decisions/1"]
    followed = set()
    for address in pages:
        shown = routed.get(address)
        assert shown.status_code in (200, 404), (address, shown.status_code)
        for url in Targets(shown.text).urls:
            if "?" not in url or url in followed:
                continue
            followed.add(url)
            assert routed.get(url).status_code != 400, (address, url)
    assert any("cursor=" in url for url in followed) and any("subject_id=" in url for url in followed)
    assert any(url.startswith("/decisions?window_seconds=") for url in followed)
    assert any(url.startswith("/decisions/try?allowlist=") for url in followed)


def test_every_control_has_a_label(routed):
    found = page(routed)
    # The filters, the scorecard's window, and an operator's pause and Go live / Force it live (reason, force).
    assert {c.get("name") for c in found.controls} == {
        "outcome",
        "source",
        "subject_id",
        "since",
        "window_seconds",
        "reason",
        "force",
    }
    for control in found.controls:
        assert control.get("id") in found.labels, control


def test_since_shows_only_decisions_evaluated_from_then_on_as_the_api_does(routed, clock):
    clock.advance(minutes=45)  # 10:45 UTC: one more decision (within the hour an event stays fresh)
    later = copy.deepcopy(example(MAPPING + "2-forge-synchronized-agent-await-ci.json"))
    later["id"] = "github:push-later"
    assert routed.post("/api/v1/events", json=later, auth="ci").status_code == 202

    # What a browser's date-and-time field sends (no zone; the page reads it as UTC), and what the API takes.
    for since in ("2026-11-20T10:30", "2026-11-20T10:30:00", "2026-11-20T10:30:00Z", "2026-11-20T11:30:00%2B01:00"):
        found = page(routed, "?since=" + since)
        assert [d["data-id"] for d in found.decisions] == [
            str(d["id"]) for d in routed.get("/api/v1/router/decisions?since=2026-11-20T10:30:00Z").json["decisions"]
        ]
        assert len(found.decisions) == 1, since
    html = routed.get("/decisions?since=2026-11-20T10:30").text
    assert 'value="2026-11-20T10:30:00"' in html  # the field keeps the filter
    assert "evaluated since <strong>2026-11-20 10:30:00 UTC</strong>" in html
    assert len(page(routed, "?since=2026-11-20T09:59:59Z").decisions) == 7
    # Combined with another filter, and carried to older pages like the others.
    assert page(routed, "?since=2026-11-20T10:30&outcome=blocked").decisions == []

    refused = routed.get("/decisions?since=yesterday")
    assert refused.status_code == 400
    assert refused.headers["content-type"].startswith("text/html")
    assert "These filters cannot be read — since: expected an ISO 8601 timestamp" in refused.text
    assert "&#39;yesterday&#39;" in refused.text  # what was typed, named


def test_the_page_needs_credentials(api):
    result = api.get("/decisions", auth=None)
    assert result.status_code == 401
    assert result.headers["www-authenticate"].startswith("Basic")


def test_a_ticket_page_shows_the_latest_decisions_about_it(routed):
    found = Page(routed.get("/tickets/PORT-12").text)
    assert {d["data-subject"] for d in found.decisions} == {"PORT-12"}
    assert len(found.decisions) == 4
    assert "/decisions?subject_id=PORT-12" in found.links
    quiet = Page(routed.get("/tickets/PORT-14").text)
    assert [(d["data-source"], d["data-outcome"]) for d in quiet.decisions] == [("poller", "no_action")]
