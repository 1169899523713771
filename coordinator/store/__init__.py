"""The durable job store: every SQL statement of the coordinator lives here.

``Store`` (``protocol.py``) lists every named query; the engine is typed
against it. ``open_store(url)`` returns the ``SqlStore`` implementing it, for
SQLite (``sqlite:///file.db``) or PostgreSQL (``postgresql+psycopg://…``).
Both dialects implement the same
named queries with the same semantics; dialect differences (SKIP LOCKED,
LISTEN/NOTIFY, advisory locks) stay inside this package.
"""

from __future__ import annotations

from coordinator.store.base import StoreCapabilities
from coordinator.store.groups import GroupQueries
from coordinator.store.jobs import JobQueries
from coordinator.store.leases import LeaseQueries
from coordinator.store.liveness import DEFAULT_BOUNDS, ConnectionBounds
from coordinator.store.ordering import OrderingQueries
from coordinator.store.pauses import PauseQueries
from coordinator.store.protocol import Store
from coordinator.store.scaling import ScalingQueries
from coordinator.store.scope_settings import ScopeSettingQueries
from coordinator.store.stats import StatsQueries
from coordinator.store.uniqueness import UniqueQueries
from coordinator.store.workers import WorkerQueries


class SqlStore(
    UniqueQueries,
    GroupQueries,
    JobQueries,
    LeaseQueries,
    PauseQueries,
    ScopeSettingQueries,
    OrderingQueries,
    WorkerQueries,
    StatsQueries,
    ScalingQueries,
):
    """Every named query of ``Store``, over one SQLAlchemy engine, for both dialects."""


def open_store(
    url: str,
    *,
    pool_size: int = 8,
    session_url: str | None = None,
    bounds: ConnectionBounds = DEFAULT_BOUNDS,
) -> SqlStore:
    """Open the store at ``url`` (no schema check; see ``Store.check_schema``).

    ``session_url``: a direct connection for LISTEN when ``url`` goes through a
    pooler in transaction mode (``store/pooler.py``). ``bounds``: the time
    limits of PostgreSQL connections (``store/liveness.py``).
    """
    return SqlStore(url, pool_size=pool_size, session_url=session_url, bounds=bounds)


__all__ = ["SqlStore", "Store", "StoreCapabilities", "open_store"]
