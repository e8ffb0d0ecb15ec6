"""Local HTTP servers that speak the shape of the real APIs the service calls (chat, tracker, staging, the forges),
and of the service itself where a client of ours calls it (`dispatch.py`, for the reference worker).

Tests talk to these over real sockets instead of mocking `requests`: one module per real API, and `scripted.py`
for what every target does alike (any status, a `Retry-After`, a slow answer).
"""
