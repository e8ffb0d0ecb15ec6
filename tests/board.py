"""A person's view of the board through the API, for tests that need tickets, claims and timelines."""

from __future__ import annotations

from typing import Any


class BoardClient:
    def __init__(self, api, initiative: str = "port"):
        self.api = api
        self.initiative = initiative
        self._made_initiative = False

    def ticket(self, key: str, *, stage: str = "execute", tracker_issue_id: str | None = None) -> dict[str, Any]:
        if not self._made_initiative:
            self.api.post("/api/v1/initiatives", json={"id": self.initiative, "name": "Port", "stage": "active"})
            self._made_initiative = True
        body: dict[str, Any] = {"key": key, "initiative_id": self.initiative, "title": f"Work on {key}", "stage": stage}
        if tracker_issue_id:
            body["tracker_issue_id"] = tracker_issue_id
        result = self.api.post("/api/v1/tickets", json=body)
        assert result.status_code == 201, result.text
        return result.json

    def claim(self, slot: str, key: str) -> dict[str, Any]:
        result = self.api.post(f"/api/v1/slots/{slot}/claim", json={"ticket": key})
        assert result.status_code == 200, result.text
        return result.json

    def mark_done(self, key: str) -> dict[str, Any]:
        result = self.api.post(f"/api/v1/tickets/{key}/mark_done")
        assert result.status_code == 200, result.text
        return result.json

    def cancel(self, key: str) -> dict[str, Any]:
        result = self.api.post(f"/api/v1/tickets/{key}/cancel")
        assert result.status_code == 200, result.text
        return result.json

    def move(self, key: str, to: str) -> dict[str, Any]:
        result = self.api.post(f"/api/v1/tickets/{key}/move", json={"to": to})
        assert result.status_code == 200, result.text
        return result.json

    def get(self, key: str) -> dict[str, Any]:
        return self.api.get(f"/api/v1/tickets/{key}").json

    def timeline(self, key: str) -> list[dict[str, Any]]:
        """Newest first."""
        return self.api.get(f"/api/v1/tickets/{key}/timeline").json["entries"]

    def kinds(self, key: str) -> list[str]:
        return [e["kind"] for e in self.timeline(key)]

    def slots(self) -> dict[str, dict[str, Any]]:
        return {s["name"]: s for s in self.api.get("/api/v1/slots").json["slots"]}

    def runs(self, agent_id: str) -> list[dict[str, Any]]:
        from storage import runs
        from storage.db import connection

        with connection():
            rows = runs.latest(agent_id, 50)
        return [{"status": r.status, "ok": r.ok, "summary": r.summary, "details": r.details} for r in rows]
