"""The durable job store: every SQL statement of the coordinator lives here.

``open_store(url)`` returns a ``Store`` for SQLite (``sqlite:///file.db``) or
PostgreSQL (``postgresql+psycopg://…``). Both dialects implement the same
named queries with the same semantics; dialect differences (SKIP LOCKED,
LISTEN/NOTIFY, advisory locks) stay inside this package.
"""

from __future__ import annotations

from coordinator.store.base import StoreCapabilities
from coordinator.store.jobs import JobQueries
from coordinator.store.leases import LeaseQueries
from coordinator.store.limits import LimitQueries
from coordinator.store.pauses import PauseQueries
from coordinator.store.stats import StatsQueries
from coordinator.store.workers import WorkerQueries


class Store(JobQueries, LeaseQueries, PauseQueries, LimitQueries, WorkerQueries, StatsQueries):
    """Every named query, over one SQLAlchemy engine (one module per table family)."""


def open_store(url: str, *, pool_size: int = 8, session_url: str | None = None) -> Store:
    """Open the store at ``url`` (no schema check; see ``Store.check_schema``).

    ``session_url``: a direct connection for LISTEN when ``url`` goes through a
    pooler in transaction mode (``store/pooler.py``).
    """
    return Store(url, pool_size=pool_size, session_url=session_url)


__all__ = ["Store", "StoreCapabilities", "open_store"]
