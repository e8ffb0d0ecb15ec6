"""The loop's declared records (`statements.record_of`): a dispatch job and a ticket's pull request are read into
typed dataclasses, so a newcomer reads what each field holds from the record itself (`record_of` holds their fields
to the model's, in the table's order, as the declaring module is imported)."""

from __future__ import annotations

import typing

import pytest

from storage import jobs, pull_requests, statements
from storage.models import DispatchJob, PullRequest

pytestmark = pytest.mark.both_backends

DECLARED = [(DispatchJob, jobs.Job), (PullRequest, pull_requests.PullRequestRecord)]


@pytest.mark.parametrize(("model", "record"), DECLARED, ids=lambda item: getattr(item, "__name__", ""))
def test_the_loops_rows_are_read_into_their_declared_typed_records(model, record):
    assert statements.record_type(model) is record
    hints = typing.get_type_hints(record, globalns=vars(__import__(record.__module__, fromlist=["_"])))
    assert set(hints) == {statements._attribute(field) for field in model._meta.sorted_fields}
    assert typing.Any not in hints.values()
