"""The normalized event envelope (`svc.normalized-event/v0`) and the worker output: their validators.

Both go through `contracts.violations`: the fast validator (jsonschema-rs) decides, the reference one explains.
"""

from __future__ import annotations

from typing import Any

from contracts import ContractViolation, Violation, part, violations

ENVELOPE = "normalized-event.json"
WORKER_OUTPUT = "worker-output.json"
ENVELOPE_VERSION = "svc.normalized-event/v0"
WORKER_OUTPUT_VERSION = "svc.worker-output/v0"
# What an envelope may say, as its contract says it: where it comes from, the kinds of transition, and how long
# its id and its subject's id may be.
SOURCES: tuple[str, ...] = tuple(part(ENVELOPE, "/properties/source")["enum"])
KINDS: tuple[str, ...] = tuple(part(ENVELOPE, "/$defs/kind")["enum"])
ID_MAX_LENGTH: int = part(ENVELOPE, "/properties/id")["maxLength"]
SUBJECT_ID_MAX_LENGTH: int = part(ENVELOPE, "/properties/subject/properties/id")["maxLength"]
# What a worker's output may say, as its contract says it: its members, and the statuses it ends with.
WORKER_OUTPUT_MEMBERS: tuple[str, ...] = tuple(part(WORKER_OUTPUT, "/properties"))
OUTPUT_STATUSES: tuple[str, ...] = tuple(part(WORKER_OUTPUT, "/properties/status")["enum"])
CHANGES_READY, NO_CHANGES, OUTPUT_FAILED = OUTPUT_STATUSES


def envelope_violations(document: Any) -> list[Violation]:
    """Every way `document` breaks `svc.normalized-event/v0`; empty when it conforms."""
    return violations(ENVELOPE, document)


def worker_output_violations(document: Any) -> list[Violation]:
    """Every way a worker's output breaks `svc.worker-output/v0`; empty when it may be written to the forge."""
    return violations(WORKER_OUTPUT, document)


def check_worker_output(document: Any) -> Any:
    """For worker scripts: return `document` if it conforms, else raise `ContractViolation` (write nothing)."""
    found = worker_output_violations(document)
    if found:
        raise ContractViolation(WORKER_OUTPUT, found)
    return document
