"""Apply the store's Alembic migrations."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from coordinator.store.base import StoreBase, domain_errors

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def upgrade(store: StoreBase, revision: str = "head") -> None:
    """Bring the database schema of ``store`` up to ``revision``.

    Raises:
        StoreUnavailable: the database cannot be reached.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with domain_errors(), store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
