"""Every index ``coordinator/store/schema.py`` declares is, byte for byte, the
index the migrations create, on both dialects.

Queries repeat the partial-index terms of schema.py (``READY_JOB``,
``FINISHED_JOB``, ``ORDERING_AHEAD``, ...) so that the planners use the
indexes; those terms must therefore be what the migrated database holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from coordinator.store import open_store
from coordinator.store.migrate import upgrade
from coordinator.store.schema import metadata


def _index_sql(url: str) -> dict[str, str]:
    """The definition of each named index (``ix_``, ``ux_``) as the database keeps it."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                query = (
                    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
                )
            else:
                query = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
            return {
                name: sql
                for name, sql in conn.execute(sa.text(query))
                if name.startswith("ix_") or name.startswith("ux_")
            }
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def migrated_and_declared(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, str]]:
    """A database the migrations built and one ``metadata.create_all`` built."""
    if request.param == "sqlite":
        migrated, declared = (
            f"sqlite:///{tmp_path / name}" for name in ("migrated.db", "declared.db")
        )
        drops = []
    else:
        from conftest import new_pg_database

        (migrated, drop_migrated), (declared, drop_declared) = (
            new_pg_database("wfj_schema_migrated"),
            new_pg_database("wfj_schema_declared"),
        )
        drops = [drop_migrated, drop_declared]
    try:
        store = open_store(migrated)
        try:
            upgrade(store)
        finally:
            store.dispose()
        engine = sa.create_engine(declared)
        try:
            metadata.create_all(engine)
        finally:
            engine.dispose()
        yield migrated, declared
    finally:
        for drop in drops:
            drop()  # type: ignore[operator]


def test_every_declared_index_is_the_one_the_migrations_create(
    migrated_and_declared: tuple[str, str],
) -> None:
    migrated, declared = (_index_sql(url) for url in migrated_and_declared)
    # Both ways: what schema.py declares (for this dialect) is what the
    # migrations create, and they create no named index it does not declare.
    assert migrated == declared
