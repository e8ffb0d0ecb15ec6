"""The normalized event envelope (`svc.normalized-event/v0`) and the worker output: their validators.

Both go through `contracts.violations`: the fast validator (jsonschema-rs) decides, the reference one explains.
"""

from __future__ import annotations

from typing import Any

from contracts import ContractViolation, Violation, violations

ENVELOPE = "normalized-event.json"
WORKER_OUTPUT = "worker-output.json"
ENVELOPE_VERSION = "svc.normalized-event/v0"
WORKER_OUTPUT_VERSION = "svc.worker-output/v0"


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
