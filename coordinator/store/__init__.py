"""The durable job store: every SQL statement of the coordinator lives here.

``Store`` (``protocol.py``) lists every named query; the engine is typed
against it. ``open_store(url)`` returns the ``SqlStore`` implementing it, for
SQLite (``sqlite:///file.db``) or PostgreSQL (``postgresql+psycopg://…``).
Both dialects implement the same
named queries with the same semantics; dialect differences (SKIP LOCKED,
LISTEN/NOTIFY, advisory locks) stay inside this package.

Design note. The store is composed, not mixed in. One ``StoreCore``
(``base.py``) owns the SQLAlchemy engine, the transaction helpers, the
dialect and the connection bounds; each table family is an object of its own
module over that core (``base.Family``), handed, when ``SqlStore`` is built
below, the other families it uses: the event log's writers, the admission
under the limits in force, the job end (``job_end.py``), the job inserts.
No family inherits another's class (``tests/unit/packaging/
test_store_composition.py``), so a family's private methods are its own.

``SqlStore`` delegates explicitly: one line per query of ``Store`` names the
family that answers it (``_Via``). The engine still calls one flat store
(``store.job_claim(...)``) and the protocol stays one list of named queries,
one line each, as River's driver interface; splitting the protocol by family
would move that list into ten places and every engine call would name a
family it does not care about. ``_Via`` is typed with ``ParamSpec``, so
mypy checks ``SqlStore`` against the protocol through each delegation with
the family method's own signature, and a reader follows a call from the
protocol line to the family in one step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from coordinator.store.base import StoreCapabilities, StoreCore
from coordinator.store.events import EventQueries
from coordinator.store.groups import GroupQueries
from coordinator.store.job_end import JobEnd
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

_F = TypeVar("_F")
_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Via(Generic[_F, _P, _R]):
    """A query of ``SqlStore`` answered by one of its families: ``job_get =
    _Via("_jobs", JobQueries.job_get)``. On the class it is the family's
    function (its signature is the query's); on a store, the family object's
    bound method, which ``SqlStore.__init__`` stores on the instance so that a
    call costs no lookup through here."""

    def __init__(self, family: str, query: Callable[Concatenate[_F, _P], _R]) -> None:
        self.family = family
        self.query = query

    @overload
    def __get__(self, store: None, owner: type) -> Callable[Concatenate[_F, _P], _R]: ...
    @overload
    def __get__(self, store: object, owner: type) -> Callable[_P, _R]: ...
    def __get__(self, store: object | None, owner: type) -> Any:
        if store is None:
            return self.query
        bound: Callable[_P, _R] = getattr(getattr(store, self.family), self.query.__name__)
        return bound


class SqlStore:
    """Every named query of ``Store``, over one SQLAlchemy engine, for both dialects
    (the design note above)."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 8,
        session_url: str | None = None,
        bounds: ConnectionBounds = DEFAULT_BOUNDS,
    ) -> None:
        core = StoreCore(url, pool_size=pool_size, session_url=session_url, bounds=bounds)
        self._core = core
        self.url = core.url
        self.session_url = core.session_url
        self.bounds = core.bounds
        self.engine = core.engine
        self.capabilities = core.capabilities
        self.is_postgres = core.is_postgres
        self.is_sqlite = core.is_sqlite
        self._events = EventQueries(core)
        self._settings = ScopeSettingQueries(core)
        self._job_end = JobEnd(core, self._events)
        self._jobs = JobQueries(core, self._events, self._settings, self._job_end)
        self._leases = LeaseQueries(core, self._events, self._settings, self._job_end)
        self._groups = GroupQueries(core, self._jobs, self._job_end)
        # The one cycle: the last member's end stores its group's completion job,
        # which is inserted as any job is.
        self._job_end.complete_groups_by(self._groups.groups_after_end)
        self._uniqueness = UniqueQueries(core, self._jobs)
        self._pauses = PauseQueries(core)
        self._ordering = OrderingQueries(core)
        self._workers = WorkerQueries(core)
        self._stats = StatsQueries(core)
        self._scaling = ScalingQueries(core)
        for name, member in vars(SqlStore).items():
            if isinstance(member, _Via):
                setattr(self, name, member.__get__(self, SqlStore))

    # -- one line per query of ``Store``, in its order: the family answering it

    tx = _Via("_core", StoreCore.tx)
    statement = _Via("_core", StoreCore.statement)
    dispose = _Via("_core", StoreCore.dispose)
    add_event_listener = _Via("_core", StoreCore.add_event_listener)
    schema_revision = _Via("_core", StoreCore.schema_revision)
    check_schema = _Via("_core", StoreCore.check_schema)
    database_time_us = _Via("_core", StoreCore.database_time_us)
    ping = _Via("_core", StoreCore.ping)
    job_insert_many = _Via("_jobs", JobQueries.job_insert_many)
    job_insert_on_loop = _Via("_jobs", JobQueries.job_insert_on_loop)
    loop_close = _Via("_core", StoreCore.loop_close)
    job_insert_leased = _Via("_jobs", JobQueries.job_insert_leased)
    job_insert_unique = _Via("_uniqueness", UniqueQueries.job_insert_unique)
    job_get_by_idempotency_key = _Via("_uniqueness", UniqueQueries.job_get_by_idempotency_key)
    unique_key_of_job = _Via("_uniqueness", UniqueQueries.unique_key_of_job)
    group_create = _Via("_groups", GroupQueries.group_create)
    job_insert_grouped = _Via("_groups", GroupQueries.job_insert_grouped)
    group_close = _Via("_groups", GroupQueries.group_close)
    group_cancel = _Via("_groups", GroupQueries.group_cancel)
    group_get = _Via("_groups", GroupQueries.group_get)
    group_list = _Via("_groups", GroupQueries.group_list)
    set_completion_listener = _Via("_groups", GroupQueries.set_completion_listener)
    job_backlog_groups = _Via("_scaling", ScalingQueries.job_backlog_groups)
    job_get = _Via("_jobs", JobQueries.job_get)
    job_get_many = _Via("_jobs", JobQueries.job_get_many)
    job_attempts = _Via("_jobs", JobQueries.job_attempts)
    job_list = _Via("_jobs", JobQueries.job_list)
    job_count = _Via("_jobs", JobQueries.job_count)
    job_retry = _Via("_jobs", JobQueries.job_retry)
    job_cancel = _Via("_jobs", JobQueries.job_cancel)
    job_unlock = _Via("_jobs", JobQueries.job_unlock)
    job_run_now = _Via("_jobs", JobQueries.job_run_now)
    job_replay = _Via("_jobs", JobQueries.job_replay)
    job_count_matching = _Via("_jobs", JobQueries.job_count_matching)
    job_bulk_retry = _Via("_jobs", JobQueries.job_bulk_retry)
    job_bulk_cancel = _Via("_jobs", JobQueries.job_bulk_cancel)
    job_purge_finished = _Via("_jobs", JobQueries.job_purge_finished)
    job_purge_matching = _Via("_jobs", JobQueries.job_purge_matching)
    job_candidates = _Via("_leases", LeaseQueries.job_candidates)
    job_claim_fair = _Via("_leases", LeaseQueries.job_claim_fair)
    job_claim = _Via("_leases", LeaseQueries.job_claim)
    job_complete_on_loop = _Via("_leases", LeaseQueries.job_complete_on_loop)
    job_complete_many = _Via("_leases", LeaseQueries.job_complete_many)
    job_end_attempts = _Via("_leases", LeaseQueries.job_end_attempts)
    lease_reclaim_expired = _Via("_leases", LeaseQueries.lease_reclaim_expired)
    lease_next_expiry = _Via("_leases", LeaseQueries.lease_next_expiry)
    lease_held_many = _Via("_leases", LeaseQueries.lease_held_many)
    attempt_reported_many = _Via("_leases", LeaseQueries.attempt_reported_many)
    lease_extend_many = _Via("_leases", LeaseQueries.lease_extend_many)
    job_running_deadlines = _Via("_leases", LeaseQueries.job_running_deadlines)
    event_read = _Via("_events", EventQueries.event_read)
    event_tail = _Via("_events", EventQueries.event_tail)
    event_bounds = _Via("_events", EventQueries.event_bounds)
    event_notify = _Via("_events", EventQueries.event_notify)
    event_notify_on_loop = _Via("_events", EventQueries.event_notify_on_loop)
    event_purged_through = _Via("_events", EventQueries.event_purged_through)
    event_purge = _Via("_events", EventQueries.event_purge)
    pause_create = _Via("_pauses", PauseQueries.pause_create)
    pause_lift = _Via("_pauses", PauseQueries.pause_lift)
    pause_list = _Via("_pauses", PauseQueries.pause_list)
    pause_purge = _Via("_pauses", PauseQueries.pause_purge)
    pause_expiries = _Via("_pauses", PauseQueries.pause_expiries)
    pauses_covering = _Via("_pauses", PauseQueries.pauses_covering)
    job_ordering_blocker = _Via("_ordering", OrderingQueries.job_ordering_blocker)
    limit_gate_ensure = _Via("_settings", ScopeSettingQueries.limit_gate_ensure)
    limit_set = _Via("_settings", ScopeSettingQueries.limit_set)
    limit_list = _Via("_settings", ScopeSettingQueries.limit_list)
    rate_limit_set = _Via("_settings", ScopeSettingQueries.rate_limit_set)
    rate_limit_list = _Via("_settings", ScopeSettingQueries.rate_limit_list)
    rate_bucket_list = _Via("_settings", ScopeSettingQueries.rate_bucket_list)
    rate_bucket_purge = _Via("_settings", ScopeSettingQueries.rate_bucket_purge)
    rate_bucket_update = _Via("_settings", ScopeSettingQueries.rate_bucket_update)
    job_running_counts = _Via("_settings", ScopeSettingQueries.job_running_counts)
    tenant_weights = _Via("_settings", ScopeSettingQueries.tenant_weights)
    tenant_set_weight = _Via("_settings", ScopeSettingQueries.tenant_set_weight)
    category_weights = _Via("_settings", ScopeSettingQueries.category_weights)
    category_set_weight = _Via("_settings", ScopeSettingQueries.category_set_weight)
    category_remove_weight = _Via("_settings", ScopeSettingQueries.category_remove_weight)
    job_type_defaults_list = _Via("_settings", ScopeSettingQueries.job_type_defaults_list)
    job_type_defaults_set = _Via("_settings", ScopeSettingQueries.job_type_defaults_set)
    worker_sync = _Via("_workers", WorkerQueries.worker_sync)
    worker_delete_stale = _Via("_workers", WorkerQueries.worker_delete_stale)
    worker_list = _Via("_workers", WorkerQueries.worker_list)
    cluster_flag_get = _Via("_workers", WorkerQueries.cluster_flag_get)
    cluster_flag_list = _Via("_workers", WorkerQueries.cluster_flag_list)
    cluster_flag_set = _Via("_workers", WorkerQueries.cluster_flag_set)
    job_count_by_status = _Via("_stats", StatsQueries.job_count_by_status)
    job_count_held = _Via("_stats", StatsQueries.job_count_held)
    job_count_scheduled = _Via("_stats", StatsQueries.job_count_scheduled)
    job_oldest_pending_due = _Via("_stats", StatsQueries.job_oldest_pending_due)
    job_competing_tenants = _Via("_stats", StatsQueries.job_competing_tenants)
    job_count_ahead = _Via("_stats", StatsQueries.job_count_ahead)
    attempt_outcome_counts = _Via("_stats", StatsQueries.attempt_outcome_counts)
    job_backlog_by_tenant_type = _Via("_stats", StatsQueries.job_backlog_by_tenant_type)
    attempt_failure_counts = _Via("_stats", StatsQueries.attempt_failure_counts)


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
