"""Load for the process tests: threads that fire notifies and events at running `svc serve` processes and keep
what each answer acknowledged, so a test can look for it afterwards."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import requests

from events_kit import example

NOTIFY = "/api/v1/agents/writing/notify"
EVENTS = "/api/v1/events"
STATUSES = ("BACKFILL_READY", "FAIL_QA", "STOP_NEED_TOPICS", "SUCCESS", "SKIP_ALL_CAUGHT_UP")
ENVELOPE = example("envelopes/mapping/1-tracker-state-changed-queued-to-execute.json")


@dataclass
class Acknowledged:
    """What the service answered 2xx to, and how many requests got no answer at all."""

    receipts: set[int] = field(default_factory=set)  # timeline entry ids of acknowledged notifies
    runs: set[int] = field(default_factory=set)
    decisions: dict[str, int] = field(default_factory=dict)  # event id -> decision id
    refused: list[int] = field(default_factory=list)  # status codes of answers that were not 2xx
    unanswered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def total(self) -> int:
        return len(self.receipts) + len(self.decisions)


class Firing:
    """Threads that post notifies and events round-robin to `bases` until `stop()` (or, with
    `until_unreachable`, until their first request that gets no answer)."""

    def __init__(self, bases: list[str], ci_secret: str, *, notifiers: int, eventers: int, until_unreachable=False):
        self.bases = bases
        self.headers = {"X-Svc-CI-Secret": ci_secret}
        self.until_unreachable = until_unreachable
        self.acked = Acknowledged()
        self._stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._loop, args=(f"n{i}", self._notify), daemon=True) for i in range(notifiers)
        ] + [threading.Thread(target=self._loop, args=(f"e{i}", self._event), daemon=True) for i in range(eventers)]

    def start(self) -> Firing:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> Acknowledged:
        """Stop the threads; with `until_unreachable`, let each first reach its request without an answer (told
        to stop at once, a thread whose last request was answered just before the service died would stop
        without one, and the count of unanswered requests would depend on that race)."""
        if self.until_unreachable:
            for thread in self.threads:
                thread.join(timeout=30)
        self._stop.set()
        for thread in self.threads:
            thread.join(timeout=30)
        assert not any(t.is_alive() for t in self.threads), "a load thread did not stop"
        return self.acked

    def _loop(self, name: str, send: Callable[[requests.Session, str, str, int], None]) -> None:
        session = requests.Session()
        n = 0
        while not self._stop.is_set():
            base = self.bases[n % len(self.bases)]
            try:
                send(session, base, name, n)
            except requests.RequestException:
                with self.acked.lock:
                    self.acked.unanswered += 1
                if self.until_unreachable:
                    return
            n += 1

    def _notify(self, session: requests.Session, base: str, name: str, n: int) -> None:
        body = {"status": STATUSES[n % len(STATUSES)], "missing": n, "items": [{"slug": f"{name}-{n}"}]}
        answer = session.post(base + NOTIFY, json=body, headers=self.headers, timeout=10)
        with self.acked.lock:
            if answer.status_code == 200:
                self.acked.receipts.add(answer.json()["receipt"]["id"])
                self.acked.runs.add(answer.json()["run"]["id"])
            else:
                self.acked.refused.append(answer.status_code)

    def _event(self, session: requests.Session, base: str, name: str, n: int) -> None:
        event_id = f"load:{name}-{n}"
        answer = session.post(base + EVENTS, json={**ENVELOPE, "id": event_id}, headers=self.headers, timeout=10)
        with self.acked.lock:
            if answer.status_code == 202:
                self.acked.decisions[event_id] = answer.json()["decision"]["id"]
            else:
                self.acked.refused.append(answer.status_code)


def every_page(session: requests.Session, url: str, key: str) -> list[dict]:
    """All items of a paged list endpoint (`{key: [...], "next"}`), following `next`."""
    items, cursor = [], None
    while True:
        params = {"limit": 500, **({"cursor": cursor} if cursor else {})}
        page = session.get(url, params=params, timeout=30)
        assert page.status_code == 200, page.text
        items.extend(page.json()[key])
        cursor = page.json()["next"]
        if not cursor:
            return items
