"""The store as the engine sees it: every named query, one line each.

Names are Entity-Verb-Qualifier (``job_insert_many``, ``lease_extend_many``,
``pause_create``), grouped as the table families that implement them:
``jobs.py``, ``leases.py``, ``groups.py``, ``ordering.py``, ``uniqueness.py``,
``pauses.py``, ``scope_settings.py``, ``workers.py``, ``stats.py``,
``scaling.py``, ``events.py``. What follows a job's end, whichever query
ended it, is ``job_end.py``. Connection handling is ``base.py`` (the core
every family shares), with ``liveness.py`` (connection bounds),
``pooler.py`` (transaction poolers), ``urls.py`` (database URLs),
``notify.py`` (LISTEN) and ``filelock.py`` (one coordinator per SQLite
file); the tables are ``schema.py``, their migrations ``migrations/`` applied
by ``migrate.py``; rows answered as stored are typed by the protocols of
``rows.py``. PostgreSQL and SQLite implement every query under the same name
with the same meaning (one class, ``SqlStore``, composed of the table
families in ``__init__.py``, each query answered by one of them; the dialect
differences stay inside each query); what only one dialect can do is said by
``capabilities``, never by asking which dialect it is. Time is a parameter
(``now``, in µs since the epoch). The rules (which statuses an operator may
retry, the budget a retry grants, how a failed attempt ends) are the
engine's and the model's, passed in as parameters or callbacks.

``tests/store/test_store_protocol.py`` checks that ``SqlStore`` implements
every member here with the same parameters, and has no public member that is
not listed here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

import sqlalchemy as sa

from coordinator.model import (
    RETRYABLE_STATUSES,
    AttemptEnd,
    AttemptRow,
    BacklogGroup,
    BulkCount,
    Candidate,
    Claim,
    Completion,
    DirectLeases,
    EventCursor,
    EventFilter,
    Exclusions,
    FairClaim,
    FairSnapshot,
    GroupRow,
    JobFilter,
    JobRow,
    JobStatus,
    LeasedForFailure,
    NewJob,
    PauseRecord,
    PauseScope,
    PurgeCount,
    RetryGrantRule,
    RunningDeadline,
    StateChange,
    UniqueKeyRow,
    Uniqueness,
    WorkerRecord,
    operator_retry_grant,
)
from coordinator.store.base import StoreCapabilities
from coordinator.store.events import EventLogBounds, EventPage
from coordinator.store.groups import GroupCreated
from coordinator.store.leases import SetAside
from coordinator.store.liveness import ConnectionBounds
from coordinator.store.rows import (
    BacklogRow,
    ConcurrencyLimitRow,
    JobTypeDefaultsRow,
    OrderingBlockerRow,
    RateLimitRow,
    StatusCountRow,
    WorkerRow,
)
from coordinator.store.scope_settings import AdmissionFor, BucketRows
from coordinator.store.stats import ScheduledCount

# How an attempt ends, decided by the engine for each locked row.
Decide = Callable[[LeasedForFailure], AttemptEnd]


class Store(Protocol):
    """Every named query of the job store (see the module note)."""

    # -- connection and schema (base.py) -------------------------------------------

    # The database URL the store was opened with.
    url: str
    # The URL of the connection that keeps one server session (LISTEN).
    session_url: str
    # Time limits of PostgreSQL connections (liveness.py).
    bounds: ConnectionBounds
    # The SQLAlchemy engine (migrations run on it).
    engine: sa.Engine
    # What the dialect can do (one-statement claim, lease at insert, LISTEN/NOTIFY, ...).
    capabilities: StoreCapabilities
    # The dialect's name as a flag; prefer ``capabilities``.
    is_postgres: bool
    # The dialect's name as a flag; prefer ``capabilities``.
    is_sqlite: bool

    # One transaction; database errors become domain errors.
    def tx(self) -> contextlib.AbstractContextManager[sa.Connection]: ...
    # A connection for one self-contained statement (autocommit on PostgreSQL).
    def statement(self) -> contextlib.AbstractContextManager[sa.Connection]: ...
    # Close every pooled connection.
    def dispose(self) -> None: ...
    # Call ``listener`` (from a store thread) after each commit that wrote job events.
    def add_event_listener(self, listener: Callable[[], None]) -> None: ...
    # The applied migration revision, or None on an empty database.
    def schema_revision(self) -> str | None: ...
    # Raise SchemaMismatch unless the schema is the one this build knows.
    def check_schema(self) -> None: ...
    # The database server's clock, in µs since the epoch (replicas share it).
    def database_time_us(self) -> int: ...
    # One round trip; raises StoreUnavailable when the database does not answer.
    def ping(self) -> None: ...

    # -- jobs: enqueue, reads, operator actions, retention (jobs.py) -------------------

    # Insert jobs deduplicated on (tenant, key); ``direct`` leases some at insert.
    def job_insert_many(
        self,
        new_jobs: Sequence[NewJob],
        direct: DirectLeases | None = None,
        existing: dict[str, JobRow] | None = None,
    ) -> list[tuple[str, bool, int]]: ...
    # ``job_insert_many`` of a few plain jobs on the event loop; None: they take the threads.
    async def job_insert_on_loop(
        self, new_jobs: Sequence[NewJob], direct: DirectLeases | None = None
    ) -> list[tuple[str, bool, int]] | None: ...
    # Close the event loop's connection of ``job_insert_on_loop`` (the engine stops).
    async def loop_close(self) -> None: ...
    # Store one job already leased to ``owner`` (inline run): (row, deduplicated, held).
    def job_insert_leased(
        self,
        job: NewJob,
        owner: str,
        lease_token: str,
        now: int,
        default_lease_ms: int,
        keep_if_held: bool,
        limits: AdmissionFor | None = None,
    ) -> tuple[JobRow | None, bool, str | None]: ...
    # Store jobs under their uniqueness rules (store/uniqueness.py), atomically:
    # (job id, UniqueOutcome, status) per job in input order.
    def job_insert_unique(
        self, new_jobs: Sequence[NewJob], uniqueness: Sequence[Uniqueness | None], now: int
    ) -> list[tuple[str, int, int]]: ...
    # The job stored under (tenant, idempotency key), or None.
    def job_get_by_idempotency_key(self, tenant_id: str, key: str) -> JobRow | None: ...
    # The uniqueness key naming this job, or None.
    def unique_key_of_job(self, job_id: str) -> UniqueKeyRow | None: ...
    # Job groups (store/groups.py): create with the completion's template and
    # first members; members joining open groups; close; cancel; read.
    def group_create(
        self,
        group_id: str,
        completion: NewJob,
        members: Sequence[NewJob],
        close: bool,
        now: int,
        idempotency_key: str | None = None,
    ) -> GroupCreated: ...
    def job_insert_grouped(
        self, new_jobs: Sequence[NewJob], now: int
    ) -> list[tuple[str, bool, int]]: ...
    def group_close(self, group_id: str, now: int) -> GroupRow | None: ...
    def group_cancel(
        self, group_id: str, reason: str, now: int
    ) -> tuple[GroupRow, list[str]] | None: ...
    def group_get(self, group_id: str) -> GroupRow | None: ...
    # Groups newest first before ``before_id``, of a tenant and in statuses (empty: any).
    def group_list(
        self, tenant_id: str, statuses: Collection[int], before_id: str | None, limit: int
    ) -> list[GroupRow]: ...
    # Called whenever a group's completion job is stored (SQLite: the engine wakes).
    def set_completion_listener(self, listener: Callable[[], None] | None) -> None: ...
    # PENDING and RUNNING jobs counted by backlog state and scope (store/scaling.py).
    def job_backlog_groups(
        self,
        now: int,
        job_types: Sequence[str] = (),
        tenant_id: str = "",
        category: int = 0,
        kinds: Collection[int] = (),
    ) -> list[BacklogGroup]: ...
    # The job with this id, or None.
    def job_get(self, job_id: str) -> JobRow | None: ...
    # The jobs with these ids (unknown ids are left out).
    def job_get_many(self, job_ids: Sequence[str]) -> list[JobRow]: ...
    # A job's attempt history, oldest first (a completed first attempt read from the job row).
    def job_attempts(self, job_id: str) -> list[AttemptRow]: ...
    # Jobs matching ``flt`` in id order, after ``after_id``.
    def job_list(
        self, flt: JobFilter, after_id: str | None, limit: int, *, newest_first: bool = False
    ) -> list[JobRow]: ...
    # How many jobs match the filter (ListJobs' total_count).
    def job_count(self, flt: JobFilter) -> int: ...
    # A job in ``statuses`` -> PENDING with the budget ``grant`` gives (guarded).
    def job_retry(
        self,
        job_id: str,
        keep_attempts: bool,
        now: int,
        *,
        statuses: Collection[int] = RETRYABLE_STATUSES,
        grant: RetryGrantRule = operator_retry_grant,
    ) -> StateChange: ...
    # PENDING -> CANCELLED at once; RUNNING -> cancel requested (guarded).
    def job_cancel(self, job_id: str, reason: str, now: int) -> StateChange: ...
    # RUNNING -> PENDING (or CANCELLED if requested), the attempt recorded UNLOCKED.
    def job_unlock(self, job_id: str, now: int, wake: bool = False) -> StateChange: ...
    # A new PENDING copy of a job (fresh id, ``replay_of`` set), or None.
    # A PENDING job not due yet -> due now (guarded); one already due is unchanged.
    def job_run_now(self, job_id: str, now: int) -> StateChange: ...
    def job_replay(self, job_id: str, new_job_id: str, now: int) -> JobRow | None: ...
    # How many jobs match ``flt`` with one of ``statuses``.
    def job_count_matching(self, flt: JobFilter, statuses: Sequence[int]) -> int: ...
    # Retry every match in ``statuses``, chunk by chunk, with the budget ``grant`` gives.
    def job_bulk_retry(
        self,
        flt: JobFilter,
        statuses: Sequence[int],
        keep_attempts: bool,
        now: int,
        *,
        grant: RetryGrantRule = operator_retry_grant,
    ) -> BulkCount: ...
    # Cancel every PENDING or RUNNING match in ``statuses``, chunk by chunk.
    def job_bulk_cancel(
        self, flt: JobFilter, statuses: Sequence[int], reason: str, now: int
    ) -> BulkCount: ...
    # Delete up to ``limit`` finished jobs older than their status's cutoff.
    def job_purge_finished(self, cutoffs: Mapping[int, int], limit: int) -> int: ...
    # Delete finished matches in ``statuses`` chunk by chunk (or count them: dry run).
    def job_purge_matching(
        self, flt: JobFilter, statuses: Sequence[int], dry_run: bool
    ) -> PurgeCount: ...

    # -- leases: acquisition, outcomes, heartbeats, expiry (leases.py) -------------------

    # Up to ``per_lane`` eligible jobs per unpaused lane (reads, locks nothing).
    def job_candidates(
        self,
        job_types: Sequence[str],
        per_lane: int,
        now: int,
        exclude: Exclusions | None = None,
        tenants: Collection[str] | None = None,
    ) -> list[Candidate]: ...
    # Pick fairly and lease in one statement (``capabilities.one_statement_claim``).
    def job_claim_fair(
        self,
        job_types: Sequence[str],
        tenants: Collection[str] | None,
        owners: Sequence[str],
        fair: FairSnapshot,
        lease_token: str,
        now: int,
        default_lease_ms: int,
    ) -> FairClaim | None: ...
    # Lease the claimed jobs still eligible (and admitted by ``limits``).
    def job_claim(
        self,
        claims: Sequence[Claim],
        lease_token: str,
        now: int,
        default_lease_ms: int,
        limits: AdmissionFor | None = None,
    ) -> list[JobRow]: ...
    # ``job_complete_many`` of plain jobs on the event loop; None: completions take the threads.
    async def job_complete_on_loop(
        self, completions: Sequence[Completion], now: int
    ) -> dict[str, JobStatus] | None: ...
    # Record completions under a valid lease; the new status of each applied (one the
    # database refuses is handed to ``set_aside``; a first attempt that completes its
    # job writes no attempt row: the job row describes it).
    def job_complete_many(
        self,
        completions: Sequence[Completion],
        now: int,
        *,
        wake: bool = False,
        set_aside: SetAside | None = None,
        plain_tried: bool = False,
    ) -> dict[str, JobStatus]: ...
    # End the attempts named by (job id, lease token) as ``decide`` rules.
    def job_end_attempts(
        self,
        refs: Sequence[tuple[str, str]],
        decide: Decide,
        now: int,
        set_aside: SetAside | None = None,
        *,
        wake: bool = False,
    ) -> dict[str, AttemptEnd]: ...
    # End up to ``limit`` attempts whose lease expired (one replica at a time).
    def lease_reclaim_expired(
        self,
        decide: Decide,
        now: int,
        limit: int,
        exclude: Collection[str] = (),
        set_aside: SetAside | None = None,
        *,
        wake: bool = False,
    ) -> list[AttemptEnd]: ...
    # The earliest lease expiry among running jobs not in ``exclude``.
    def lease_next_expiry(self, exclude: Collection[str] = ()) -> int | None: ...
    # Of (job id, lease token) pairs, the ids still RUNNING under that token.
    def lease_held_many(self, refs: Sequence[tuple[str, str]]) -> set[str]: ...
    # Of (job id, lease token) pairs, the outcome a report under that token recorded.
    def attempt_reported_many(self, refs: Sequence[tuple[str, str]]) -> dict[str, int]: ...
    # Extend valid leases: (job id, new expiry, cancel requested).
    def lease_extend_many(
        self, refs: Sequence[tuple[str, str]], now: int, default_lease_ms: int
    ) -> list[tuple[str, int, bool]]: ...
    # The ``limit`` running attempts with an execution timeout that end soonest.
    def job_running_deadlines(
        self, limit: int, exclude: Sequence[str] = ()
    ) -> list[RunningDeadline]: ...

    # -- the job event log (events.py) ---------------------------------------------------

    # Released events matching ``flt`` after ``after`` (None: the oldest kept), in order.
    def event_read(self, flt: EventFilter, after: EventCursor | None, limit: int) -> EventPage: ...
    # Where the released log ends now (watching from here sees only later events).
    def event_tail(self) -> EventCursor: ...
    # The current history, the tail, and the last cursor the log can have handed out.
    def event_bounds(self) -> EventLogBounds: ...
    # Tell every replica that job events were committed (NOTIFY; nothing on SQLite).
    def event_notify(self) -> None: ...
    # ``event_notify`` from the event loop; False: loop statements are off (use the threads).
    async def event_notify_on_loop(self) -> bool: ...
    # The last cursor retention deleted; None when nothing was purged.
    def event_purged_through(self) -> EventCursor | None: ...
    # Delete up to ``limit`` of the oldest log rows whose events were all created
    # before ``before`` (a prefix); returns the number of events deleted.
    def event_purge(self, before: int, limit: int) -> int: ...

    # -- pauses (pauses.py) --------------------------------------------------------------

    # Record a pause; once it returns no acquisition leases a job it covers.
    def pause_create(
        self,
        pause_id: str,
        scope: PauseScope,
        actor: str,
        reason: str,
        expires_at: int | None,
        now: int,
    ) -> PauseRecord: ...
    # Lift every active pause on exactly ``scope``; the lifted records.
    def pause_lift(self, scope: PauseScope, actor: str, now: int) -> list[PauseRecord]: ...
    # Pauses by creation time: active ones, or all; a tenant's and the global ones.
    def pause_list(
        self,
        now: int,
        *,
        include_lifted: bool,
        tenant_id: str = "",
        after: tuple[int, str] | None = None,
        limit: int | None = None,
    ) -> list[PauseRecord]: ...
    # Delete up to ``limit`` pauses lifted or expired before ``before``.
    def pause_purge(self, before: int, limit: int) -> int: ...
    # The future expiry times of active pauses, earliest first (each once).
    def pause_expiries(self, now: int) -> list[int]: ...
    # Active pauses that hold back ``job`` (read: its columns PAUSE_COLUMNS names).
    def pauses_covering(self, job: NewJob | JobRow, now: int) -> list[PauseRecord]: ...

    # -- ordering keys (ordering.py) ------------------------------------------------------

    # The (id, status) of the job holding ``job_id`` back in its ordering key, or None.
    def job_ordering_blocker(
        self, tenant_id: str, ordering_key: str, job_id: str
    ) -> OrderingBlockerRow | None: ...

    # -- limits, tenant weights, job type defaults (scope_settings.py) --------------------

    # Create the limit gate if missing and make it count the stored limits.
    def limit_gate_ensure(self, now: int) -> None: ...
    # Set a concurrency limit (``max_running == 0`` removes it); replicas are told.
    def limit_set(self, kind: int, value: str, max_running: int, now: int = 0) -> None: ...
    # The stored concurrency limits.
    def limit_list(self) -> list[ConcurrencyLimitRow]: ...
    # Set a rate limit (``starts == 0`` removes it) under the limit gate; replicas
    # are told. Returns whether one was stored for the scope before.
    def rate_limit_set(
        self, kind: int, value: str, starts: int, period_ms: int, burst: int, now: int = 0
    ) -> bool: ...
    # The stored rate limits.
    def rate_limit_list(self) -> list[RateLimitRow]: ...
    # The stored rate buckets of ``kinds``: (tat, slow_level, slowed_at) by scope.
    def rate_bucket_list(self, kinds: Sequence[int]) -> BucketRows: ...
    # Delete up to ``limit`` idle rate buckets (due and not slowed).
    def rate_bucket_purge(self, now: int, limit: int) -> int: ...
    # Rewrite the buckets of ``keys`` atomically under their scopes' locks.
    def rate_bucket_update(
        self,
        keys: Sequence[tuple[int, str]],
        update: Callable[[Sequence[RateLimitRow], BucketRows], BucketRows],
    ) -> BucketRows: ...
    # RUNNING jobs per (limit kind, scope value) for ``kinds``.
    def job_running_counts(
        self, kinds: Sequence[int], conn: sa.Connection | None = None
    ) -> dict[tuple[int, str], int]: ...
    # Fair-share weights by tenant.
    def tenant_weights(self) -> dict[str, int]: ...
    # Set a tenant's fair-share weight; replicas are told.
    def tenant_set_weight(self, tenant_id: str, weight: int) -> None: ...
    # Fair-share weights by (tenant, category number); a pair not listed has weight 1.
    def category_weights(self) -> dict[tuple[str, int], int]: ...
    # Set a category's weight within a tenant; replicas are told.
    def category_set_weight(self, tenant_id: str, category: int, weight: int) -> None: ...
    # Remove a category's weight within a tenant (back to 1); False when none was set.
    def category_remove_weight(self, tenant_id: str, category: int) -> bool: ...
    # Every job type's stored defaults, by job type.
    def job_type_defaults_list(self) -> list[JobTypeDefaultsRow]: ...
    # Replace a job type's defaults (all None removes them); replicas are told.
    def job_type_defaults_set(
        self,
        job_type: str,
        retry_policy: str | None,
        execution_timeout_ms: int | None,
        heartbeat_timeout_ms: int | None,
        ordering_failure: int | None = None,
    ) -> None: ...

    # -- workers and cluster flags (workers.py) ------------------------------------------

    # Make the registry hold exactly ``connected`` for this coordinator; refused rows.
    def worker_sync(
        self, coordinator_id: str, connected: Sequence[WorkerRecord], now: int
    ) -> list[tuple[str, BaseException]]: ...
    # Remove registry rows not refreshed since ``before``.
    def worker_delete_stale(self, before: int) -> int: ...
    # Registered workers seen at or after ``seen_since``, by worker id (then coordinator).
    def worker_list(self, seen_since: int = 0) -> list[WorkerRow]: ...
    # A cluster flag's value, or None.
    def cluster_flag_get(self, name: str) -> str | None: ...
    # Cluster flags whose name starts with ``prefix``.
    def cluster_flag_list(self, prefix: str = "") -> dict[str, str]: ...
    # Set a cluster flag (None deletes it); replicas are told at once.
    def cluster_flag_set(self, name: str, value: str | None, now: int) -> None: ...

    # -- stats (stats.py) ----------------------------------------------------------------

    # (tenant, job type, status, count) rows.
    def job_count_by_status(
        self, tenant_id: str = "", category: int = 0
    ) -> list[StatusCountRow]: ...
    # PENDING jobs held behind an earlier job of their ordering key.
    def job_count_held(self, tenant_id: str = "", category: int = 0) -> int: ...
    # (tenant, job type, count) of PENDING jobs not due by ``now``.
    def job_count_scheduled(
        self, now: int, tenant_id: str = "", category: int = 0
    ) -> list[ScheduledCount]: ...
    # The due time of the oldest due PENDING job.
    def job_oldest_pending_due(
        self, now: int, tenant_id: str = "", category: int = 0
    ) -> int | None: ...
    # The other tenants with a job of the type acquisition could start now.
    def job_competing_tenants(self, job_type: str, tenant_id: str, now: int) -> list[str]: ...
    # Due PENDING jobs of the tenant that acquisition orders before this one.
    def job_count_ahead(
        self,
        tenant_id: str,
        priority: int,
        due_at: int,
        job_id: str,
        now: int,
        job_types: Sequence[str] | None = None,
        exclude: Exclusions | None = None,
    ) -> int: ...
    # Attempts ended since ``since``, counted by outcome (of one category and one
    # tenant when given; completed first attempts included).
    def attempt_outcome_counts(
        self, since: int, category: int = 0, tenant_id: str = ""
    ) -> dict[int, int]: ...
    # (tenant, job type, count, oldest due time) of PENDING jobs due by ``now``.
    def job_backlog_by_tenant_type(self, now: int) -> list[BacklogRow]: ...
    # (failed attempts, retried attempts) that ended since ``since``.
    def attempt_failure_counts(
        self, since: int, tenant_id: str = "", category: int = 0
    ) -> tuple[int, int]: ...
