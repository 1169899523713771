"""Fixtures for API tests that start a real coordinator on each store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL of this test's own: a SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'api.db'}"
        return
    request.getfixturevalue("pg_database")
    from conftest import new_pg_database

    url, drop = new_pg_database()
    try:
        yield url
    finally:
        drop()  # type: ignore[operator]
