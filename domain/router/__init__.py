"""The router: the senders' payloads made `svc.normalized-event/v0` envelopes, the gates, the rules, the recorded
decisions, the board's own events, the poller and the offline replay. A rule judges in shadow mode until it is live;
a live rule's passing decision queues its job through `domain/dispatch/` (in the decision's unit of work), and an
event about a ticket's pull request moves the ticket there too. No expression engine: rules are declarative
matches (`domain/policy/rules.py`)."""
