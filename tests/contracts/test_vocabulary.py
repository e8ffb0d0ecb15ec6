"""The contracts list words the code declares (the router's outcomes, the board's stages, the agents); a published
schema must keep its own copy of each list, so each copy is held to its declaration here. What the code reads from
a contract instead (the envelope's kinds and sources) needs no test: it cannot differ."""

import contracts
from contracts.envelope import ENVELOPE, KINDS, SOURCES
from domain.ops.schedules import AGENT_IDS
from domain.router.evaluation import OUTCOMES, REJECTED
from domain.router.routing import OUTCOMES as OUTCOMES_OF_THE_ROUTER
from machines.stages import STAGES, WAITING_ON


def test_a_decision_records_the_outcomes_evaluation_declares_and_an_envelope_s_source():
    assert list(contracts.part("router-decision.json", "/$defs/outcome")["enum"]) == list(OUTCOMES)
    assert contracts.part("router-decision.json", "/properties/source")["enum"] == [*SOURCES, None]
    assert OUTCOMES_OF_THE_ROUTER is OUTCOMES


def test_a_backtest_flip_names_the_outcomes_of_a_valid_envelope():
    for side in ("recorded", "candidate"):
        flip = contracts.part("router-backtest-report.json", f"/properties/flips/items/properties/{side}")
        # Neither a rejected envelope nor the service's own event is backtested.
        assert flip["enum"] == [outcome for outcome in OUTCOMES if outcome not in (REJECTED, "own")]


def test_the_envelope_s_kinds_are_its_lifecycle_forge_and_ci_kinds():
    parts = ("lifecycle_kind", "forge_kind", "ci_kind")
    assert tuple(kind for part in parts for kind in contracts.part(ENVELOPE, f"/$defs/{part}")["enum"]) == KINDS


def test_the_board_s_stages_and_waits_are_the_machines():
    assert tuple(contracts.part("common.json", "/$defs/stage")["enum"]) == STAGES
    assert contracts.part("common.json", "/$defs/waiting_on")["enum"] == [*WAITING_ON, None]


def test_the_agents_strip_lists_the_agents_the_schedules_declare():
    assert tuple(contracts.part("agents.json", "/$defs/agent/properties/agent_id")["enum"]) == AGENT_IDS


def test_a_part_is_found_by_its_json_pointer():
    assert contracts.part(ENVELOPE, "/properties/id")["maxLength"] == 200
    assert contracts.part("router-decision.json", "")["$id"].endswith("router-decision.json")
