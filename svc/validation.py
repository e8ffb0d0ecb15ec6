"""`svc validate FILE...`: envelope files (or worker output files) checked against the contract.

A `.json` file holds one envelope or a batch `{"events": [...]}`; a `.jsonl` file one envelope per line. Each
violation is printed as `FILE[:LINE][#INDEX]: /json/pointer: message`; the exit status is 1 when any file
breaks the contract (or cannot be read), else 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from contracts import Violation
from contracts.envelope import envelope_violations, worker_output_violations


def documents(path: Path) -> Iterator[tuple[str, Any | None, str | None]]:
    """(where, document, error) for every document in `path`; `error` when it is not JSON at all."""
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield from _parsed(f"{path}:{number}", line)
        return
    text = path.read_text(encoding="utf-8")
    for where, document, error in _parsed(str(path), text):
        if isinstance(document, dict) and "events" in document and "schema" not in document:
            events = document["events"]
            if not isinstance(events, list):
                yield where, None, "/events: must be an array of envelopes"
                continue
            for index, item in enumerate(events):
                yield f"{where}#{index}", item, None
        else:
            yield where, document, error


def _parsed(where: str, text: str) -> Iterator[tuple[str, Any | None, str | None]]:
    try:
        yield where, json.loads(text), None
    except ValueError as exc:
        yield where, None, f"not JSON: {exc}"


def run(files: list[str], *, worker_output: bool, out: TextIO) -> int:
    check = worker_output_violations if worker_output else envelope_violations
    failed = False
    for name in files:
        path = Path(name)
        count = 0
        bad = 0
        try:
            for where, document, error in documents(path):
                count += 1
                found: list[Violation] = [Violation("", error)] if error else check(document)
                for violation in found:
                    out.write(f"{where}: {violation.path or '/'}: {violation.message}\n")
                bad += bool(found)
        except (OSError, UnicodeDecodeError) as exc:
            out.write(f"{path}: cannot be read: {exc}\n")
            failed = True
            continue
        if bad:
            failed = True
        elif count == 0:
            out.write(f"{path}: holds no document\n")
            failed = True
        else:
            out.write(f"{path}: ok ({count} {'document' if count == 1 else 'documents'})\n")
    return 1 if failed else 0
