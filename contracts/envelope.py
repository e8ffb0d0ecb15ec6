"""The normalized event envelope (`svc.normalized-event/v0`) and the worker output: their validators.

The envelope is checked on the hot path (every event, every replayed line), so a compiled validator
(fastjsonschema, built once from the same schema file) decides whether an envelope conforms. Only when it
does not is the reference validator (jsonschema) asked for the violations, each located by JSON pointer; a
test holds the two to the same verdict on every example.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import fastjsonschema

from contracts import ContractViolation, Violation, _rfc3339_datetime, load, violations

ENVELOPE = "normalized-event.json"
WORKER_OUTPUT = "worker-output.json"
ENVELOPE_VERSION = "svc.normalized-event/v0"
WORKER_OUTPUT_VERSION = "svc.worker-output/v0"


@functools.cache
def _compiled(name: str):
    # A copy: fastjsonschema rewrites the `$ref`s of the schema it compiles, and `load()` is shared.
    # use_default=False: validation must never change the document it checks.
    schema = copy.deepcopy(load(name))
    return fastjsonschema.compile(schema, formats={"date-time": _rfc3339_datetime}, use_default=False)


def conforms(name: str, document: Any) -> bool:
    """The compiled validator's verdict alone: the hot path's yes/no."""
    try:
        _compiled(name)(document)
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def _violations(name: str, document: Any) -> list[Violation]:
    if conforms(name, document):
        return []
    found = violations(name, document)
    # The two validators agree on every example (tested); should they ever differ, fail closed, still located.
    return found or [Violation("", "does not conform to the contract")]


def envelope_violations(document: Any) -> list[Violation]:
    """Every way `document` breaks `svc.normalized-event/v0`; empty when it conforms."""
    return _violations(ENVELOPE, document)


def worker_output_violations(document: Any) -> list[Violation]:
    """Every way a worker's output breaks `svc.worker-output/v0`; empty when it may be written to the forge."""
    return _violations(WORKER_OUTPUT, document)


def check_worker_output(document: Any) -> Any:
    """For worker scripts: return `document` if it conforms, else raise `ContractViolation` (write nothing)."""
    found = worker_output_violations(document)
    if found:
        raise ContractViolation(WORKER_OUTPUT, found)
    return document
