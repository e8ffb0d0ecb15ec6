"""Structured logs: one JSON object per line on stderr, with the request id when there is one.

Secrets never reach the log: nothing logs a header or a URL that carries a token, and `redact()` is
applied to every message as a last line of defence.
"""

from __future__ import annotations

import itertools
import json
import logging
import sys
import threading
import time

import orjson

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
# A LogRecord's own attributes come first in its __dict__, set by its __init__; a call's `extra` (and what filters
# add) follow them. So a record's extras are what comes after the first _OWN: every request's access line has six,
# and looking past the twenty-odd standard ones for them cost more than the rest of the line.
_OWN = len(vars(logging.LogRecord("", logging.INFO, "", 0, "", (), None)))


class JSONFormatter(logging.Formatter):
    def __init__(self, secrets: tuple[str, ...] = ()):
        super().__init__()
        # The line is redacted after JSON encoding, where a secret with a quote, a backslash or non-ASCII
        # characters appears escaped: look for those forms too (orjson's, and json's for what orjson refuses).
        escaped = [json.dumps(s)[1:-1] for s in secrets if s] + [_orjson_text(s)[1:-1] for s in secrets if s]
        self.secrets = tuple(dict.fromkeys([*(s for s in secrets if s), *escaped]))
        # The line's time to the second, kept for the second it is of: most lines share their second with the last.
        self._second: tuple[int, str] = (-1, "")

    def at(self, record: logging.LogRecord) -> str:
        """The record's time, UTC, to the millisecond (`2026-11-24T14:21:16.059Z`)."""
        created = record.created
        second = int(created)
        kept = self._second
        if kept[0] != second:
            kept = self._second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        # The milliseconds from `created` itself, not `record.msecs`: on Python 3.13 and later that comes from the
        # nanoseconds, and next to a second's end it can disagree with `int(created)`.
        return f"{kept[1]}.{int((created - second) * 1000):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "at": self.at(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        attributes = vars(record)
        own = _OWN if type(record) is logging.LogRecord else 0
        for key, value in itertools.islice(attributes.items(), own, None):
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return self.redact(_orjson_text(entry))

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return text


def _orjson_text(value) -> str:
    """One JSON line, by orjson (every request writes one); by json for what orjson refuses (a lone surrogate)."""
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:
        return json.dumps(value, default=str)


class QueueDepthSampler(logging.Filter):
    """Let one of waitress's "Task queue depth is N" warnings through per `interval` seconds.

    waitress warns each time it queues a request while every thread is busy: under load, that is every
    request, formatted and written while it holds its task lock. The first warning of each interval goes out,
    with how many were folded into the line since the last one (`folded`) and the deepest queue among them
    (`deepest`); the rest end here, before anything is formatted or written.
    """

    def __init__(self, interval: float = 10.0, *, monotonic=time.monotonic):
        super().__init__()
        self.interval = interval
        self.monotonic = monotonic
        self._next = float("-inf")
        self._folded = 0
        self._deepest = 0
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        depth = record.args[0] if isinstance(record.args, tuple) and record.args else 0
        with self._lock:
            now = self.monotonic()
            if now < self._next:
                self._folded += 1
                self._deepest = max(self._deepest, depth) if isinstance(depth, int) else self._deepest
                return False
            record.folded, record.deepest = self._folded, max(self._deepest, depth if isinstance(depth, int) else 0)
            self._next, self._folded, self._deepest = now + self.interval, 0, 0
        return True


def configure(level: str = "INFO", *, secrets: tuple[str, ...] = (), stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JSONFormatter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The lines carry none of the caller's file, line, thread or process, so logging need not look them up for
    # every record (the logging HOWTO's "Optimization"): one access line per request is on the hot path.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # waitress logs each queue backlog warning; keep them, sampled, but not its per-connection chatter.
    queue = logging.getLogger("waitress.queue")
    queue.setLevel("WARNING")
    queue.filters[:] = [QueueDepthSampler()]


def secrets_of(config) -> tuple[str, ...]:
    """Every configured secret, for redaction (`domain/redaction.py` says which)."""
    from domain.redaction import secrets_of as configured

    return configured(config)
