"""Normalizers: one module per source, each from that source's real payload to `svc.normalized-event/v0`.

| module    | payloads                                                                      | source        |
|-----------|-------------------------------------------------------------------------------|---------------|
| `github`  | `pull_request` (opened, synchronize, ready_for_review, closed), `workflow_run` | forge, ci     |
| `gitlab`  | Merge Request Hook, Pipeline Hook                                             | forge, ci     |
| `linear`  | Issue webhooks that change the state                                          | tracker       |
| `board`   | every stage change on the board                                               | svc           |
| `poller`  | queued tickets with no decision in the window                                 | poller        |
"""
