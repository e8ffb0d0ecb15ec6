"""Outbound integrations, one module per target (chat, tracker, staging check, bay wipes).

Each module makes its calls with timeouts and bounded retries, and reports an outcome that separates a
permanent failure (give up, record it) from a transient one (try again later).
"""
