"""The shadow-mode router: normalizers from real payloads to `svc.normalized-event/v0`, the gates, the rules,
the recorded decisions, the poller and the offline replay. It never dispatches anything: there is no live
dispatch branch and no expression engine here, and `dispatched` is always false."""
