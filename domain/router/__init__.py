"""The shadow-mode router: the senders' payloads made `svc.normalized-event/v0` envelopes, the gates, the rules,
the recorded decisions, the board's own events, the poller and the offline replay. It never dispatches anything:
there is no live dispatch branch and no expression engine here, and `dispatched` is always false."""
