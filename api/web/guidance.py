"""What a person should do about a ticket on the Needs-you list, in the seed's words."""

from __future__ import annotations

from machines.stages import WRITING_TICKET_KEY
from storage.models import Ticket

_WRITING = {
    "agent": "Run the backfill writing workflow in the editor agent: drafts are written, then finalize the batch.",
    "topic_refill": "Refill the writing topics: articles are missing but no topics remain.",
    "agent_failed": "Fix the draft, QA or push that failed, then finalize the batch.",
}
_WAITING = {
    "agent": "Start the worker agent on this ticket.",
    "topic_refill": "Refill what the agent needs to carry on.",
    "agent_failed": "The agent failed: read its output, fix the cause, and run it again.",
    "forge_failed": "The forge refused the service's write: read why on its job's page, put it right, then retry the "
    "forge write there.",
}
_STAGE = {
    "human_test": "Test the change on its preview, then move it to human_merge (or back to execute).",
    "human_merge": "Review and merge the pull request, then move it to ship.",
    "blocked": "It stopped: its pull request was closed without merge, or the fixer's retry budget is spent. Look at "
    "why on its timeline, then move it on.",
}


def what_to_do(ticket: Ticket) -> str:
    if ticket.key == WRITING_TICKET_KEY and ticket.waiting_on in _WRITING:
        return _WRITING[ticket.waiting_on]
    if ticket.stage in _STAGE:
        return _STAGE[ticket.stage]
    return _WAITING.get(ticket.waiting_on or "", "Look at the ticket: it is waiting on a person.")
