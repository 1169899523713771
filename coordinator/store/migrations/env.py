"""Alembic environment: runs the store's migrations on the connection given in
``config.attributes["connection"]`` (set by ``coordinator.store.migrate``), or
on ``sqlalchemy.url`` when run from the alembic command line."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from coordinator.store.migrate import VERSION_TABLE
from coordinator.store.schema import metadata
from coordinator.store.urls import sqlalchemy_url

config = context.config


def _run(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        version_table=VERSION_TABLE,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    # The same URL forms the coordinator accepts (multi-host libpq URLs included).
    engine = sa.create_engine(sqlalchemy_url(config.get_main_option("sqlalchemy.url") or ""))
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()
