"""Apply the store's Alembic migrations."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from coordinator.store.base import domain_errors
from coordinator.store.protocol import Store

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# The table Alembic keeps the schema revision in (migrations/env.py).
VERSION_TABLE = "wfj_alembic_version"


@dataclasses.dataclass(frozen=True, slots=True)
class MigrationResult:
    """What :func:`upgrade` did: the schema revision before and after."""

    before: str | None
    """None when the database had no schema yet."""
    after: str | None

    def describe(self, where: str) -> str:
        """One line saying what was done to the schema of ``where``."""
        if self.before is None:
            return f"created the schema of {where} (revision {self.after})"
        if self.before != self.after:
            return f"migrated the schema of {where} from revision {self.before} to {self.after}"
        return f"schema of {where} is up to date (revision {self.after}); nothing to do"


def upgrade(store: Store, revision: str = "head") -> MigrationResult:
    """Bring the database schema of ``store`` up to ``revision``.

    Raises:
        StoreUnavailable: the database cannot be reached.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with domain_errors(), store.engine.begin() as conn:
        if store.is_postgres:
            # A migration may rewrite a large table: the coordinator's
            # statement limit (store/liveness.py) is lifted for this transaction.
            conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
        before = _revision(conn)
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
        after = _revision(conn)
    return MigrationResult(before, after)


def _revision(conn: sa.Connection) -> str | None:
    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()
