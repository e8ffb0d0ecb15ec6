"""The declared records (a model's `Meta.record`, what its rows are read into) hold the model's fields, in the table's
order, each under the name a model instance reads it by: `storage.statements` builds each row positionally."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from storage import statements
from storage.models import ALL_MODELS, DispatchJob, Job

DECLARED = [model for model in ALL_MODELS if getattr(model._meta, "record", None) is not None]


def test_the_dispatch_job_is_read_into_the_declared_job():
    assert DispatchJob in DECLARED and statements.record_type(DispatchJob) is Job


@pytest.mark.parametrize("model", DECLARED, ids=lambda model: model.__name__)
def test_a_declared_record_is_its_models_fields_in_order(model):
    record = model._meta.record
    names = [field.name for field in dataclasses.fields(record)]
    assert names == [statements._attribute(field) for field in model._meta.sorted_fields]
    # Typed, each of them: a newcomer reads what a field holds from the record itself.
    hints = typing.get_type_hints(record, globalns=vars(__import__(record.__module__, fromlist=["_"])))
    assert set(hints) == set(names) and typing.Any not in hints.values()
