"""The loop: a ticket follows its pull request (rows: `storage/pull_requests.py`). Inside the unit of work that
recorded an event's decision, the router hands the event here (never a replayed, imported or backtested one); every
move goes through the ticket machine (`Board.step_ticket`), and a move the machine does not allow is not made.

A ticket's pull request is the one the service opened for its job, or, for a ticket with no such pull request, the
forge's whose branch or title names the ticket (the ticket's `link` is set to it when it has none). A pipeline event
is about the pull request whose latest head is its `head_sha` (the head of its latest `opened`/`synchronized`, or the
last commit of the output the service wrote it from); one on the base branch whose `head_sha` is a merged pull
request's merge commit is "the base branch at the merge commit". An event older than the latest head moves nothing.

| event about the ticket's pull request | machine event: from -> to                             | waiting_on     |
|---------------------------------------|-------------------------------------------------------|----------------|
| `opened`, `ready_for_review`          | submit_to_ci: execute -> ci                           | `ci`           |
| `synchronized` (a new push)           | new_push: execute, human_test, human_merge -> ci      | `ci`           |
| `pipeline_started` on its latest head | (stays in ci)                                         | `ci`           |
| `pipeline_passed` on its latest head  | request_test: ci -> human_test                        | none           |
| `pipeline_failed` on its latest head  | start: ci -> execute                                  | `agent_failed` |
| ... with the fixer's budget spent     | block: -> blocked (the decision says `stuck`)         | none           |
| `merged`                              | merged: execute, ci, human_test, human_merge -> ship  | none           |
| `pipeline_passed` at the merge commit | complete: ship -> done (as mark_done: bay, tracker)   | none           |
| `closed` without merge                | block: -> blocked                                     | none           |

The service never takes a ticket out of a human gate itself, except on `merged` (a person merged it) and on a new
push. A ticket with a job on it is not needs-you whatever it waits on (`machines/stages.needs_you`), so a red
pipeline whose fixer job was queued does not ask for a person.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from domain.board import Board
from domain.clock import Clock
from domain.config import Config
from domain.dispatch.forge import forge_of
from domain.dispatch.jobs import Dispatch
from integrations.forges import GITLAB, web_url
from machines.ticket import allows
from storage import pull_requests, tickets
from storage.models import JSON, Ticket
from storage.pull_requests import PullRequestRecord

# Who makes the loop's moves: the service itself (its board events are its own, `outcome: own`).
ACTOR = "router"
STUCK = "stuck"
FORGE_KINDS = frozenset({"opened", "ready_for_review", "synchronized", "merged", "closed"})
PIPELINE_KINDS = frozenset({"pipeline_started", "pipeline_passed", "pipeline_failed"})


@dataclass(frozen=True)
class Move:
    """One row of the table: the machine's event (None: the stage stays), what the ticket then waits on, and the
    stages it moves from where the table names fewer than the machine allows (a red pipeline moves a ticket in ci
    only: the service never takes one out of a person's gate on a pipeline)."""

    event: str | None
    waiting_on: str | None
    words: str
    only_from: frozenset[str] | None = None


MOVES: dict[str, Move] = {
    "opened": Move("submit_to_ci", "ci", "its pull request was opened"),
    "ready_for_review": Move("submit_to_ci", "ci", "its pull request is ready for review"),
    "synchronized": Move("new_push", "ci", "a new push to its pull request"),
    "pipeline_started": Move(None, "ci", "a pipeline started on its pull request's head"),
    "pipeline_passed": Move("request_test", None, "the pipeline passed on its pull request's head: test it"),
    "pipeline_failed": Move(
        "start", "agent_failed", "the pipeline failed on its pull request's head", only_from=frozenset({"ci"})
    ),
    "merged": Move("merged", None, "its pull request was merged"),
    "closed": Move("block", None, "its pull request was closed without merge"),
    STUCK: Move("block", None, "the pipeline failed again and the fixer's retry budget is spent"),
    "done": Move("complete", None, "the base branch's pipeline passed at the merge commit"),
}


class PullRequestLoop:
    def __init__(self, config: Config, clock: Clock, board: Board, dispatch: Dispatch):
        self.config = config
        self.clock = clock
        self.board = board
        self.dispatch = dispatch

    def follow(self, envelope: Mapping[str, JSON], *, outcome: str, decision_id: int) -> None:
        """Inside the decision's unit of work: the move `envelope` makes its ticket's pull request make, if any."""
        transition = envelope.get("transition")
        kind = transition.get("kind") if isinstance(transition, dict) else None
        if kind in FORGE_KINDS and envelope.get("source") == "forge":
            self._change_request(envelope, kind, decision_id)
        elif kind in PIPELINE_KINDS and envelope.get("source") == "ci":
            self._pipeline(envelope, kind, outcome, decision_id)

    # -- the forge's events about a pull request ------------------------------------------------------------------

    def _change_request(self, envelope: Mapping[str, JSON], kind: str, decision_id: int) -> None:
        forge = _forge(envelope)
        subject = _part(envelope, "subject")
        repo, number = subject.get("repo"), forge.get("pr_number")
        head = _sha(forge.get("head_sha"))
        now = self.clock()
        known = pull_requests.by_number(repo, number) if isinstance(repo, str) and isinstance(number, int) else None
        if known is None:
            key = subject.get("id") if subject.get("type") == "ticket" else None
            mine = pull_requests.of_ticket(key) if isinstance(key, str) else None
            if not isinstance(key, str) or not tickets.exists(key):
                return
            if mine is not None and mine.state == pull_requests.OPEN and mine.job_id is not None:
                return  # another pull request naming the ticket: the ticket's is the one the service opened
            known = pull_requests.put(
                key,
                forge=forge_of(envelope),
                repo=repo if isinstance(repo, str) else None,
                number=number if isinstance(number, int) else None,
                url=self._url(envelope, repo, number),
                branch=forge.get("branch") if isinstance(forge.get("branch"), str) else None,
                head_sha=head,
                job_id=None,
                at=now,
            )
        changes: dict[str, object] = {}
        if kind in ("opened", "ready_for_review", "synchronized"):
            changes["state"] = pull_requests.OPEN
            if head:
                changes["head_sha"] = head
        elif kind == "merged":
            # A fast-forward merge (GitLab's) names no merge commit: the base branch then builds the head itself.
            changes.update(state=pull_requests.MERGED, merge_commit_sha=_sha(forge.get("merge_commit_sha")) or head)
        else:
            changes["state"] = pull_requests.CLOSED
        pull_requests.change(known.ticket_key, changes, at=now)
        ticket = tickets.get(known.ticket_key, for_update=True)
        if ticket is None:
            return
        if kind == "merged":
            self.dispatch.cancel_jobs_of(ticket, why=f"{ticket.key}'s pull request was merged", actor=ACTOR, now=now)
        if kind in ("opened", "ready_for_review") and not ticket.link and known.url:
            self._step(ticket, kind, known, decision_id, now, link=known.url)
        else:
            self._step(ticket, kind, known, decision_id, now)

    # -- a pipeline ---------------------------------------------------------------------------------------------

    def _pipeline(self, envelope: Mapping[str, JSON], kind: str, outcome: str, decision_id: int) -> None:
        forge = _forge(envelope)
        head = _sha(forge.get("head_sha"))
        now = self.clock()
        if outcome == STUCK:
            # The fixer's budget is spent on a new failing head: the ticket stops, whatever head its pull request
            # was last known at, and needs a person.
            subject = _part(envelope, "subject")
            key = subject.get("id") if subject.get("type") == "ticket" else None
            ticket = tickets.get(key, for_update=True) if isinstance(key, str) else None
            if ticket is not None:
                self._step(ticket, STUCK, pull_requests.of_ticket(ticket.key), decision_id, now)
            return
        if head is not None:
            merged = pull_requests.by_merge_commit(head)
            if merged is not None:
                if kind == "pipeline_passed":
                    ticket = tickets.get(merged.ticket_key, for_update=True)
                    if ticket is not None:
                        self._step(ticket, "done", merged, decision_id, now)
                return
            known = pull_requests.by_head(head)
        else:
            known = None
        if known is None:
            known = self._about_its_ticket(envelope, head, now)
        if known is None:
            return
        if kind == "pipeline_passed":
            pull_requests.change(known.ticket_key, {"green_at": now}, at=now)
        ticket = tickets.get(known.ticket_key, for_update=True)
        if ticket is None:
            return
        if kind == "pipeline_started" and ticket.stage != "ci":
            return  # the ticket is where a person or its last push left it: nothing waits on this pipeline
        self._step(ticket, kind, known, decision_id, now)

    def _about_its_ticket(
        self, envelope: Mapping[str, JSON], head: str | None, now: datetime
    ) -> PullRequestRecord | None:
        """A pipeline matched by no pull request's head: about its subject ticket's pull request when it names no head
        (an envelope made by hand), or when that ticket has none yet and the pipeline names one (the `opened` that
        would have said so was missed)."""
        subject = _part(envelope, "subject")
        key = subject.get("id") if subject.get("type") == "ticket" else None
        if not isinstance(key, str) or not tickets.exists(key):
            return None
        mine = pull_requests.of_ticket(key)
        if head is None:
            return mine if mine is None or mine.state == pull_requests.OPEN else None
        forge = _forge(envelope)
        number, repo = forge.get("pr_number"), subject.get("repo")
        if mine is not None or not isinstance(number, int):
            return None  # an older head than its pull request's latest, or a branch's own pipeline
        return pull_requests.put(
            key,
            forge=forge_of(envelope),
            repo=repo if isinstance(repo, str) else None,
            number=number,
            url=self._url(envelope, repo, number),
            branch=forge.get("branch") if isinstance(forge.get("branch"), str) else None,
            head_sha=head,
            job_id=None,
            at=now,
        )

    # -- the move ---------------------------------------------------------------------------------------------

    def _step(
        self,
        ticket: Ticket,
        kind: str,
        known: PullRequestRecord | None,
        decision_id: int,
        now: datetime,
        *,
        link: str | None = None,
    ) -> None:
        """The table's move for `kind`, where the machine allows it; a wait that changes without a move is made too
        (a pipeline started while in ci). Nothing is written when neither would change."""
        move = MOVES[kind]
        wait_only = move.event is None
        if not wait_only and not allows(ticket.stage, move.event):
            return
        if move.only_from is not None and ticket.stage not in move.only_from:
            return
        if wait_only and (ticket.stage != "ci" or ticket.waiting_on == move.waiting_on):
            return
        where = f" ({known.url})" if known is not None and known.url else ""
        self.board.step_ticket(
            ticket,
            move=move.event,
            waiting_on=move.waiting_on,
            kind="pull_request_moved",
            event=kind,
            actor=ACTOR,
            at=now,
            summary=f"{move.words}{where}",
            data={"decision_id": decision_id, "pull_request": known.url if known is not None else None, "on": kind},
            extra_changes={"link": link} if link else None,
        )

    def _url(self, envelope: Mapping[str, JSON], repo: JSON, number: JSON) -> str | None:
        if not isinstance(repo, str) or not isinstance(number, int):
            return None
        forge = forge_of(envelope)
        api = self.config.gitlab_api_url if forge == GITLAB else self.config.github_api_url
        return web_url(forge, api, repo, number)


def _part(envelope: Mapping[str, JSON], name: str) -> Mapping[str, JSON]:
    found = envelope.get(name)
    return found if isinstance(found, dict) else {}


def _forge(envelope: Mapping[str, JSON]) -> Mapping[str, JSON]:
    return _part(envelope, "forge")


def _sha(value: JSON) -> str | None:
    return value if isinstance(value, str) and value else None
