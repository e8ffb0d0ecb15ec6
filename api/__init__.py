"""The HTTP API on Falcon: `create_app(config, ...)` builds it; resources stay thin.

A responder reads the validated body and identity from `req.context`, makes one domain call, and turns the
result into the contract's representation. Credentials, body limits and JSON Schema validation happen in
middleware, driven by each resource's declared `operations`; errors become problem+json in `api.errors`.
"""

from api.app import create_app

__all__ = ["create_app"]
