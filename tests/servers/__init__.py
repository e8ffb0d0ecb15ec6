"""Local HTTP servers that speak the shape of the real APIs the service calls (chat, tracker, staging).

Tests talk to these over real sockets instead of mocking `requests`: one module per real API.
"""
