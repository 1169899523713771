"""Fixtures for the fault scenarios: a fresh database per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def pg_url(pg_database: str) -> Iterator[str]:
    """A PostgreSQL database of this test's own (skips or fails like ``pg_database``)."""
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_faults")
    try:
        yield url
    finally:
        drop()  # type: ignore[operator]


@pytest.fixture(params=["sqlite", "postgres"])
def fault_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'faults.db'}"
    return str(request.getfixturevalue("pg_url"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A soak (``WFJOBS_FAULTS_SCALE`` > 1) gets a per-test timeout scaled with it."""
    from faults.harness import SCALE

    if SCALE <= 1:
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(int(300 * SCALE)))
