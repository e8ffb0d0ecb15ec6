"""Outbound integrations, one module per target (chat, tracker, staging check, bay wipes), and `transport.py`, what
every HTTP target shares.

Each HTTP call goes through `transport`: a timeout always, no redirect followed, explicit auth, and one failure
type, `transport.TransportError`, saying permanent (give up, record it) or transient (try again later, after the
target's `Retry-After` when it sent one). The staging check and the bay wipes report a result instead of failing:
what they find (a site failing its check, a wipe's exit code and output) is what the pulse and the timeline show.
"""
