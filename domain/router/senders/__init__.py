"""The senders of webhooks, one module each, holding everything about what that sender sends us: how its
deliveries are signed, what makes two of them the same event, and how its payloads become
`svc.normalized-event/v0` envelopes. (What we send to a sender lives in `integrations/`.)

| module    | payloads                                                                       | source    |
|-----------|--------------------------------------------------------------------------------|-----------|
| `github`  | `pull_request` (opened, synchronize, ready_for_review, closed), `workflow_run` | forge, ci |
| `gitlab`  | Merge Request Hook, Pipeline Hook                                              | forge, ci |
| `linear`  | Issue webhooks that change the state                                           | tracker   |

`payloads` is what they share (reading fields, finding the ticket key, building the envelope); `signatures`
their credential checks. The board's own events and the poller's are built in `domain/router/board_events.py`
and `domain/router/poller.py`.
"""
