"""Apply the store's Alembic migrations."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from coordinator.store.base import StoreBase

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def upgrade(store: StoreBase, revision: str = "head") -> None:
    """Bring the database schema of ``store`` up to ``revision``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
