"""`domain/shapes.py`: the shapes the API answers and the archivist writes are one."""

from api import representations
from domain import shapes
from domain.router import evaluation


def test_the_rejected_outcome_is_the_router_s():
    # The shapes may not import the router (it imports the ops agents, which archive with these shapes).
    assert shapes.REJECTED == evaluation.REJECTED


def test_the_api_answers_the_shapes_the_archivist_writes():
    for name in ("decision", "timeline_entry", "run", "gap", "job"):
        assert getattr(representations, name) is getattr(shapes, name), name
