"""Shared fixtures: one PostgreSQL database per test run, stores on both dialects.

PostgreSQL tests skip (with the reason) only when no server answers and CI is
not set; under CI=true a missing server is a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from coordinator.store import Store, open_store
from coordinator.store.migrate import upgrade

PG_ADMIN_URL = os.environ.get("WFJOBS_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _pg_reachable() -> str | None:
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return None
    except psycopg.Error as e:
        return f"PostgreSQL not reachable at {PG_ADMIN_URL}: {e}".strip()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A database of this test run's own; yields its SQLAlchemy URL."""
    problem = _pg_reachable()
    if problem:
        if IN_CI:
            pytest.fail(f"{problem} (CI=true requires PostgreSQL)")
        pytest.skip(problem)
    name = f"wfj_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    url = f"{base}/{name}"
    try:
        yield url
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def new_pg_database(prefix: str = "wfj_e2e") -> tuple[str, object]:
    """Create another database for tests that need one to themselves."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)

    def drop() -> None:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return f"{base}/{name}", drop


_migrated: set[str] = set()


def _clean(store: Store) -> None:
    with store.engine.begin() as conn:
        for table in (
            "wfj_job_attempts",
            "wfj_jobs",
            "wfj_lanes",
            "wfj_pauses",
            "wfj_tenants",
            "wfj_concurrency_limits",
            "wfj_rate_limits",
            "wfj_rate_buckets",
            "wfj_workers",
            "wfj_cluster_flags",
            "wfj_job_events",
            "wfj_job_type_defaults",
            "wfj_unique_keys",
            "wfj_groups",
        ):
            conn.execute(sa.text(f"DELETE FROM {table}"))


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty store URL on each dialect."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'wfjobs.db'}"
        store = open_store(url)
        upgrade(store)
        store.dispose()
        return url
    url: str = request.getfixturevalue("pg_database")
    store = open_store(url)
    if url not in _migrated:
        upgrade(store)
        _migrated.add(url)
    _clean(store)
    store.dispose()
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    try:
        yield s
    finally:
        s.dispose()
