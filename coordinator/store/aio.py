"""Statements run on the event loop: psycopg's async driver over a small pool.

The store's named queries are blocking and run in the engine's store threads.
A hot statement whose latency counts (the insert of a group commit, which
also leases jobs to waiting workers) can instead run on the event loop
through ``AsyncPool`` (PostgreSQL only): no hand-off to a thread and back,
and no wait for the GIL while the loop is busy. The SQL text is the same as
the threaded path's; only the connection differs.

The pool (``psycopg_pool.AsyncConnectionPool``) is opened on first use in
the running event loop, in autocommit mode (each statement is atomic on its
own) with JIT off like every statement connection, and closed by ``close``
from that loop. Used from another loop (a new
engine on the same store), it opens a new pool there. Database errors become
domain errors exactly as on the threaded path (``base.domain_errors``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from coordinator.errors import StoreUnavailable
from coordinator.masking import mask_credentials
from coordinator.store.base import domain_errors

log = logging.getLogger(__name__)

# Seconds a statement waits for a pooled connection before StoreUnavailable.
CONNECT_TIMEOUT_S = 30.0


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    """A new connection: JIT off, as on the threaded path's connections (base.py)."""
    await conn.execute("SET jit = off")


class AsyncPool:
    """Autocommit async connections to PostgreSQL, opened lazily per event loop."""

    def __init__(self, conninfo: str, *, max_size: int, prepare: bool) -> None:
        self._conninfo = conninfo
        self._max_size = max(1, max_size)
        # Through a pooler in transaction mode no statement may be prepared.
        self._kwargs: dict[str, Any] = {"autocommit": True}
        if not prepare:
            self._kwargs["prepare_threshold"] = None
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _pool_here(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        loop = asyncio.get_running_loop()
        if self._pool is None or self._loop is not loop:
            # A pool belongs to the loop it was opened on; one left by a loop
            # that ended is dropped (its connections closed with that loop).
            self._pool = AsyncConnectionPool(
                self._conninfo,
                min_size=1,
                max_size=self._max_size,
                kwargs=self._kwargs,
                configure=_configure,
                open=False,
                timeout=CONNECT_TIMEOUT_S,
                name="wfj-store-aio",
            )
            self._loop = loop
        return self._pool

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection; database errors raised inside become domain errors."""
        pool = self._pool_here()
        with domain_errors():
            try:
                await pool.open()  # no-op once open
                async with pool.connection() as conn:
                    yield conn
            except PoolTimeout as e:
                raise StoreUnavailable(
                    f"database unavailable: {mask_credentials(str(e))}"
                ) from e
            except psycopg.Error as e:
                # Wrapped as SQLAlchemy wraps driver errors, so the mapping is
                # the threaded path's own (a refused value is InvalidArgument).
                raise sa.exc.DBAPIError.instance(None, None, e, psycopg.Error) from e

    async def close(self) -> None:
        """Close the pool of the running loop, if one is open. Idempotent."""
        pool, loop = self._pool, self._loop
        self._pool = self._loop = None
        if pool is None:
            return
        if loop is not asyncio.get_running_loop():
            return
        try:
            await pool.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            log.debug("closing the async store pool failed", exc_info=True)


__all__ = ["AsyncPool"]
