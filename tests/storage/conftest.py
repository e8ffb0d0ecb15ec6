"""Scratch databases for the schema tests: each test may make several, at any schema version."""

import pytest

from conftest import BACKEND
from schema_kit import ScratchDatabases


@pytest.fixture
def scratch(tmp_path):
    made = ScratchDatabases(tmp_path, BACKEND)
    try:
        yield made
    finally:
        from storage import db as storage_db

        if storage_db.db.obj is not None:
            storage_db.db.close_all() if hasattr(storage_db.db.obj, "close_all") else storage_db.db.close()
        made.close()
