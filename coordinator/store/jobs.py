"""Named queries over stored jobs: enqueue, reads, operator actions and retention.

Every operator state change is a guarded write: it names the statuses it
applies to in its WHERE clause, so a job that moved on between the operator's
look and the write is left alone and reported as such. Attempt history
numbers stay unique per job: no query here lowers ``attempt`` (see
``job_retry``). The rules (which statuses an operator may retry or cancel,
the budget a retry grants) are the model's, passed in by the engine.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import logging
import operator
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from coordinator.errors import Aborted, FailedPrecondition
from coordinator.model import (
    ATTEMPT_CEILING,
    FAILED_OUTCOMES,
    FINISHED_STATUSES,
    RETRYABLE_STATUSES,
    AttemptOutcome,
    AttemptRow,
    BulkCount,
    Claim,
    DirectLeases,
    GroupStatus,
    JobEventKind,
    JobFilter,
    JobRecord,
    JobRow,
    JobStatus,
    NewJob,
    PurgeCount,
    RetryGrant,
    RetryGrantRule,
    StateChange,
    at_attempt_ceiling,
    events_of_ended_attempt,
    operator_retry_grant,
)
from coordinator.store.base import Family, StoreCore, driver_sql, wake_payload
from coordinator.store.events import (
    EVENT_SOURCE_COLUMNS,
    EventEntry,
    EventQueries,
    event_ctes,
)
from coordinator.store.job_end import Ended, JobEnd
from coordinator.store.ordering import Key, busy_keys, key_busy, lock_keys
from coordinator.store.pauses import pause_blocks
from coordinator.store.schema import (
    FINISHED_JOB,
    first_attempt_completed,
    groups,
    job_attempts,
    jobs,
    lanes,
    unique_keys,
)
from coordinator.store.scope_settings import (
    LIMIT_GATE,
    LIMIT_GATE_SHARE_SQL,
    AdmissionFor,
    AdmitIn,
    BucketsWrite,
    ScopeSettingQueries,
)

log = logging.getLogger(__name__)


# A job made PENDING again (operator retry) is held when its key has another
# live job that is not held (store/ordering.py).
_HELD_AGAIN: sa.ColumnClause[bool] = sa.literal_column(key_busy(jobs.name, other_than_self=True))


def _keys_of(rows: Any) -> set[Key]:
    """The (tenant, ordering key) of the rows that have one."""
    return {(r.tenant_id, r.ordering_key) for r in rows if r.ordering_key is not None}


_NEW_JOB_FIELDS = tuple(f.name for f in dataclasses.fields(NewJob))
# A NewJob's column values in ``_NEW_JOB_FIELDS`` order, read in one C call
# (a generator of getattr calls costs about three times as much per row).
_NEW_JOB_VALUES = operator.attrgetter(*_NEW_JOB_FIELDS)


# The conflict target of the partial unique index on (tenant, idempotency key).
_SKIP_STORED_KEYS = (
    "ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING "
)


# Rounds of insert-then-read before giving up on a key whose stored job keeps
# being deleted between the two (retention removing it, say).
_DEDUP_ROUNDS = 3


# Up to this many jobs go in one INSERT statement; larger batches use COPY.
_SMALL_BATCH = 64


# The new jobs as one JSON array of objects, one per job with a key per column
# and the offered owner, read back by ``json_to_recordset`` with each column's
# type. One text parameter, dumped by the json module in C: the driver's
# per-array dumping (an array per column) cost a third of a small insert's
# CPU in the coordinator. The payload travels base64-encoded.
_RECORD_COLUMNS = (
    ", ".join(
        f"{f} {'text' if f == 'payload' else jobs.c[f].type.compile(dialect=postgresql.dialect()).lower()}"
        for f in _NEW_JOB_FIELDS
    )
    + ", owner text"
)
_RECORD_VALUES = ", ".join(
    "decode(v.payload, 'base64')" if f == "payload" else f"v.{f}" for f in _NEW_JOB_FIELDS
)
_PAYLOAD_INDEX = _NEW_JOB_FIELDS.index("payload")


def _records_json(new_jobs: Sequence[NewJob], owners: Mapping[str, str]) -> str:
    """``new_jobs`` as the JSON of ``_RECORD_COLUMNS`` (see there)."""
    records = []
    for job in new_jobs:
        values = list(_NEW_JOB_VALUES(job))
        values[_PAYLOAD_INDEX] = base64.b64encode(values[_PAYLOAD_INDEX]).decode("ascii")
        record = dict(zip(_NEW_JOB_FIELDS, values, strict=True))
        record["owner"] = owners.get(job.id)
        records.append(record)
    return json.dumps(records, separators=(",", ":"))


@functools.lru_cache(maxsize=4)
def _insert_small_sql(keyed: bool, offered: bool = False) -> str:
    """The statement of ``_insert_small``, built once per shape.

    Its text is the same for any number of jobs (one array per column), so
    the server plans it once per session however many enqueues a group
    commit holds.

    With ``keyed``, rows whose (tenant, idempotency key) is already stored are
    skipped by the unique index itself (``ON CONFLICT DO NOTHING``). With
    ``offered``, some jobs are offered to workers: those leased at once get
    STARTED after their ENQUEUED event.
    """
    cols = ", ".join(_NEW_JOB_FIELDS)
    # Offered jobs are leased unless a pause covers them or a concurrency
    # limit is stored (the limit gate, read under its share lock: leasing here
    # counts nothing, so it must not happen under a limit).
    leased_when = (
        f"v.owner IS NOT NULL AND NOT {pause_blocks('v')} "
        "AND COALESCE((SELECT value FROM gate), '0') = '0'"
    )
    gate = LIMIT_GATE_SHARE_SQL.replace(":gate", "%(gate)s")
    sql = (
        f"WITH gate AS ({gate}), "
        f"ins AS (INSERT INTO wfj_jobs ({cols}, status, attempt, lease_owner, "
        "lease_token, started_at, lease_expires_at) "
        f"SELECT {_RECORD_VALUES}, "
        f"CASE WHEN {leased_when} THEN {JobStatus.RUNNING:d} ELSE {JobStatus.PENDING:d} END, "
        f"CASE WHEN {leased_when} THEN 1 ELSE 0 END, "
        f"CASE WHEN {leased_when} THEN v.owner END, "
        f"CASE WHEN {leased_when} THEN %(token)s END, "
        f"CASE WHEN {leased_when} THEN %(now)s END, "
        f"CASE WHEN {leased_when} THEN %(now)s + COALESCE(v.heartbeat_timeout_ms, "
        "%(lease_ms)s) * 1000 END "
        f"FROM json_to_recordset(CAST(:records AS json)) AS v({_RECORD_COLUMNS}) "
        f"{_SKIP_STORED_KEYS if keyed else ''}"
        f"RETURNING {', '.join(EVENT_SOURCE_COLUMNS)}, created_at), "
        # ENQUEUED for every job stored, then STARTED for those leased at once.
        + (
            event_ctes(
                "ins",
                "k.kind",
                f"CASE WHEN k.kind = {JobEventKind.ENQUEUED:d} THEN s.created_at ELSE %(now)s END",
                joins=(
                    f"JOIN (VALUES ({JobEventKind.ENQUEUED:d}), ({JobEventKind.STARTED:d})) "
                    f"AS k(kind) ON k.kind = {JobEventKind.ENQUEUED:d} "
                    f"OR s.status = {JobStatus.RUNNING:d}"
                ),
                order="k.kind",
            )
            if offered
            else event_ctes("ins", f"{JobEventKind.ENQUEUED:d}", "s.created_at")
        )
        # Only jobs stored PENDING wake the replicas: a job leased by this insert
        # has nothing left to acquire, and a commit that notifies takes
        # PostgreSQL's cluster-wide notify lock until its WAL is flushed.
        + f" SELECT CASE WHEN ins.status = {JobStatus.PENDING:d} "
        "THEN pg_notify('wfj_wake', %(due)s) END, ins.id, ins.status FROM ins"
    )
    return driver_sql(sql)


def _insert_small_statement(
    new_jobs: Sequence[NewJob], direct: DirectLeases | None, keyed: bool
) -> tuple[str, dict[str, Any]]:
    """The statement of ``_insert_small`` for ``new_jobs`` and its parameters."""
    owners = direct.owners if direct is not None else {}
    params: dict[str, Any] = {
        "token": direct.lease_token if direct is not None else None,
        "now": direct.now if direct is not None else 0,
        "lease_ms": direct.default_lease_ms if direct is not None else 0,
        "gate": LIMIT_GATE,
        "due": wake_payload([j.due_at for j in new_jobs]),
    }
    params["records"] = _records_json(new_jobs, owners)
    return _insert_small_sql(keyed, bool(owners)), params


def _insert_row(job: NewJob) -> dict[str, Any]:
    row = {f: getattr(job, f) for f in _NEW_JOB_FIELDS}
    row["status"] = int(JobStatus.PENDING)
    return row


class _RolledBack(Exception):
    """Raised inside a transaction to undo it on purpose."""


# Rows changed per transaction by bulk actions, so one call never holds locks
# on a whole tenant's backlog at once.
BULK_CHUNK = 1000

# A member of a group that has not completed (its completion will count it).
# EXISTS, never NULL (a job without a group is not kept for it).
_IN_UNCOMPLETED_GROUP = sa.exists().where(
    groups.c.id == jobs.c.group_id, groups.c.status != int(GroupStatus.COMPLETED)
)
# Finished jobs a purge by filter keeps: a FAULTED job that holds its ordering
# key (store/ordering.py: the key's next job waits until it is cancelled or
# completes), and a member of a group that has not completed.
_PURGE_KEEPS = sa.or_(
    sa.and_(
        jobs.c.status == int(JobStatus.FAULTED),
        jobs.c.ordering_key.isnot(None),
        sa.not_(jobs.c.ordering_skip_failed),
    ),
    _IN_UNCOMPLETED_GROUP,
)


def retry_values(grant: RetryGrant, now: int) -> dict[str, Any]:
    """Column values that make a FAULTED or CANCELLED job PENDING again under ``grant``."""
    return {
        "status": int(JobStatus.PENDING),
        "due_at": now,
        "max_attempts": grant.max_attempts,
        "retry_policy": grant.retry_policy,
        "finished_at": None,
        # The error of the fault or cancel that was retried no longer describes
        # the job (each attempt's error stays in the history).
        "last_error": None,
        "last_error_kind": None,
        "cancel_requested": False,
        "cancel_reason": None,
        "lease_owner": None,
        "lease_token": None,
        "lease_expires_at": None,
    }


def _grant_for(rule: RetryGrantRule, row: Any, keep_attempts: bool) -> RetryGrant | None:
    return rule(
        row.attempt, row.released_attempts, row.max_attempts, row.retry_policy, keep_attempts
    )


def _key_vanished(new_jobs: Sequence[NewJob]) -> Aborted:
    keys = ", ".join(sorted({repr(j.idempotency_key) for j in new_jobs}))
    return Aborted(
        f"the job stored under idempotency key {keys} was deleted while this enqueue "
        "was reading it; retry the enqueue"
    )


def _group_keys(keys: set[tuple[str, str | None]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for tenant, key in keys:
        if key:
            grouped.setdefault(tenant, []).append(key)
    return grouped


def _filter_clauses(flt: JobFilter) -> list[Any]:
    c = jobs.c
    clauses: list[Any] = []
    if flt.statuses:
        clauses.append(c.status.in_([int(s) for s in flt.statuses]))
    for column, value in (
        (c.tenant_id, flt.tenant_id),
        (c.job_type, flt.job_type),
        (c.definition_id, flt.definition_id),
        (c.instance_id, flt.instance_id),
        (c.correlation_id, flt.correlation_id),
        (c.parent_job_id, flt.parent_job_id),
        (c.group_id, flt.group_id),
    ):
        if value:
            clauses.append(column == value)
    if flt.category:
        clauses.append(c.category == flt.category)
    if flt.job_types:
        clauses.append(c.job_type.in_(list(flt.job_types)))
    if flt.created_after is not None:
        clauses.append(c.created_at >= flt.created_after)
    if flt.created_before is not None:
        clauses.append(c.created_at < flt.created_before)
    if flt.due_after is not None:
        clauses.append(c.due_at >= flt.due_after)
    if flt.due_before is not None:
        clauses.append(c.due_at < flt.due_before)
    if flt.failed_after is not None:
        a = job_attempts
        clauses.append(
            sa.exists().where(
                a.c.job_id == c.id,
                a.c.ended_at >= flt.failed_after,
                a.c.outcome.in_([int(o) for o in FAILED_OUTCOMES]),
            )
        )
    return clauses


class JobQueries(Family):
    """Queries over ``wfj_jobs`` (and ``wfj_lanes``) as stored, outside the life of a lease."""

    def __init__(
        self,
        core: StoreCore,
        events: EventQueries,
        settings: ScopeSettingQueries,
        job_end: JobEnd,
    ) -> None:
        super().__init__(core)
        self._record_events = events.record_events
        self._record_enqueued = events.record_enqueued
        # Admit a claim under the limits in force, and charge its rate buckets.
        self._admit_in: AdmitIn = settings.admit_in
        self._rate_buckets_write: BucketsWrite = settings.rate_buckets_write
        self._jobs_ended = job_end.jobs_ended
        self._known_lanes: set[tuple[str, str, str]] = set()

    # -- what the families that store jobs of their own use (a group's members and
    # completion, jobs under uniqueness keys) -----------------------------------

    def insert_with_lanes(
        self, conn: sa.Connection, new_jobs: Sequence[NewJob]
    ) -> list[tuple[str, bool, int]]:
        """``insert_in`` of ``new_jobs``, their lanes stored first (in this transaction)."""
        new_lanes = self.lanes_unknown(new_jobs)
        if new_lanes:
            self.lane_upsert(conn, new_lanes)
        result = self.insert_in(conn, new_jobs, any(j.idempotency_key for j in new_jobs), None)
        self.lanes_stored(new_lanes)
        return result

    def lanes_unknown(self, new_jobs: Sequence[NewJob]) -> set[tuple[str, str, str]]:
        """The lanes of ``new_jobs`` this store has not stored yet."""
        return {(j.tenant_id, j.job_type, j.definition_id) for j in new_jobs} - self._known_lanes

    def lanes_stored(self, new_lanes: set[tuple[str, str, str]]) -> None:
        """``new_lanes`` are stored: later inserts skip their upsert."""
        self._known_lanes |= new_lanes

    def job_insert_many(
        self,
        new_jobs: Sequence[NewJob],
        direct: DirectLeases | None = None,
        existing: dict[str, JobRow] | None = None,
    ) -> list[tuple[str, bool, int]]:
        """Insert jobs atomically, deduplicating on (tenant, idempotency key).

        Deduplication holds under any concurrency: the insert skips a key
        already stored or being stored by a concurrent transaction (the unique
        index decides, waiting for that transaction to end), then the job
        stored under each key is read back. Every caller with the same tenant
        and key gets the same job; the first of repeats inside a batch is the
        one stored.

        ``direct`` offers some of the jobs to idle workers: on the single
        statement path (PostgreSQL, small batch, known lanes) those are stored
        already RUNNING and leased, unless a pause covers them; everywhere
        else they are stored PENDING like the rest.
        ``existing``, when given, receives the stored row of each job found
        under a key, read by the very statement that found it (so a job
        deleted since, e.g. by retention, is still answered as it was).
        Returns ``(job_id, deduplicated, status)`` in input order.
        """
        new_lanes = {(j.tenant_id, j.job_type, j.definition_id) for j in new_jobs}
        new_lanes -= self._known_lanes
        keyed = any(j.idempotency_key for j in new_jobs)
        if any(j.ordering_key is not None for j in new_jobs):
            result = self._insert_ordered(new_jobs, direct, existing, new_lanes, keyed)
            self._known_lanes |= new_lanes
            return result
        if self.is_postgres and not new_lanes and len(new_jobs) <= _SMALL_BATCH:
            with self.statement() as conn:
                return self._insert_deduplicated(
                    conn,
                    new_jobs,
                    functools.partial(self._insert_small, conn, direct=direct, keyed=keyed),
                    existing,
                )
        with self.tx() as conn:
            if new_lanes:
                self.lane_upsert(conn, new_lanes)
            result = self.insert_in(conn, new_jobs, keyed, existing)
        self._known_lanes |= new_lanes
        return result

    async def job_insert_on_loop(
        self, new_jobs: Sequence[NewJob], direct: DirectLeases | None = None
    ) -> list[tuple[str, bool, int]] | None:
        """``job_insert_many`` of a few jobs on the event loop (``_run_on_loop``),
        or None when these jobs take the store's threads.

        The loop runs the single statement of ``_insert_small`` itself when
        that statement is the whole insert: PostgreSQL, at most
        ``_SMALL_BATCH`` jobs, no idempotency or ordering key (their reads
        and locks take the threads), every lane already stored. Same
        statement, same answer; a single enqueue then makes no thread hop.
        """
        if not self._loop_statements or len(new_jobs) > _SMALL_BATCH:
            return None
        known = self._known_lanes
        for j in new_jobs:
            if (
                j.idempotency_key
                or j.ordering_key is not None
                or (j.tenant_id, j.job_type, j.definition_id) not in known
            ):
                return None
        sql, params = _insert_small_statement(new_jobs, direct, keyed=False)
        stored = {job_id: status for _, job_id, status in await self._run_on_loop(sql, params)}
        self._after_commit(bool(stored))
        pending = int(JobStatus.PENDING)
        return [(j.id, False, stored.get(j.id, pending)) for j in new_jobs]

    def insert_in(
        self,
        conn: sa.Connection,
        new_jobs: Sequence[NewJob],
        keyed: bool,
        existing: dict[str, JobRow] | None,
    ) -> list[tuple[str, bool, int]]:
        """Store ``new_jobs`` PENDING in the transaction of ``conn``, with their
        ENQUEUED events and the wake-up."""
        if keyed:
            result = self._insert_deduplicated(
                conn, new_jobs, functools.partial(self._insert_skipping_keys, conn), existing
            )
        elif self.is_postgres:
            self._copy_in(conn, new_jobs)
            result = [(j.id, False, int(JobStatus.PENDING)) for j in new_jobs]
        else:
            conn.execute(jobs.insert(), [_insert_row(j) for j in new_jobs])
            result = [(j.id, False, int(JobStatus.PENDING)) for j in new_jobs]
        stored_ids = {job_id for job_id, deduplicated, _ in result if not deduplicated}
        stored = [j for j in new_jobs if j.id in stored_ids]
        if stored:
            self._record_enqueued(conn, stored, max(j.created_at for j in new_jobs))
        if new_jobs:
            self._notify_wake(conn, [j.due_at for j in new_jobs])
        return result

    def _insert_ordered(
        self,
        new_jobs: Sequence[NewJob],
        direct: DirectLeases | None,
        existing: dict[str, JobRow] | None,
        new_lanes: set[tuple[str, str, str]],
        keyed: bool,
    ) -> list[tuple[str, bool, int]]:
        """``job_insert_many`` for a batch with ordering keys: under the keys'
        locks, each job of a key whose head is live, or that follows another
        job of its key in the batch, is stored held (``store/ordering.py``)."""
        with self.tx() as conn:
            if new_lanes:
                self.lane_upsert(conn, new_lanes)
            keys = self.hold_behind_keys(conn, new_jobs)
            if self.is_postgres and len(new_jobs) <= _SMALL_BATCH:
                result = self._insert_deduplicated(
                    conn,
                    new_jobs,
                    functools.partial(self._insert_small, conn, direct=direct, keyed=keyed),
                    existing,
                )
            else:
                result = self.insert_in(conn, new_jobs, keyed, existing)
            if keyed:
                # A job held behind one of the batch that was deduplicated (not
                # stored) may have nothing live ahead of it.
                self._jobs_ended(conn, Ended(keys=keys), None, keys_locked=True)
        return result

    def hold_behind_keys(self, conn: sa.Connection, new_jobs: Sequence[NewJob]) -> set[Key]:
        """Lock the ordering keys of ``new_jobs`` and mark held each job of a key
        whose head is live, or that follows another job of its key in the batch
        (``store/ordering.py``); the keys locked."""
        keys = {(j.tenant_id, j.ordering_key) for j in new_jobs if j.ordering_key is not None}
        if not keys:
            return keys
        lock_keys(conn, self.is_postgres, keys)
        busy = busy_keys(conn, self.is_postgres, keys)
        for job in new_jobs:
            if job.ordering_key is not None:
                key = (job.tenant_id, job.ordering_key)
                job.ordering_held = key in busy
                busy.add(key)
        return keys

    def job_insert_leased(
        self,
        job: NewJob,
        owner: str,
        lease_token: str,
        now: int,
        default_lease_ms: int,
        keep_if_held: bool,
        limits: AdmissionFor | None = None,
    ) -> tuple[JobRow | None, bool, str | None]:
        """Store ``job`` already leased to ``owner`` (inline execution).

        Returns ``(row, deduplicated, held)``; ``held`` says why the job was
        not leased: ``"limit"`` when ``limits`` (the admission of this one
        job, built from the limits as stored) finds a limited scope full, or
        ``"paused"`` when a pause covers it. Admission takes the same locks and
        counts as any claim (see ``job_claim``), so an inline run never
        exceeds a limit. The row is inserted first and the pause rule checked
        after, in the same transaction: the insert waits for any pause being
        committed, so a pause that returned before is always seen. A held job
        is stored PENDING without a lease when ``keep_if_held``, else nothing
        is stored and the row is None. An existing job with the same
        idempotency key is returned as is.
        """
        try:
            return self._insert_leased(
                job, owner, lease_token, now, default_lease_ms, keep_if_held, limits
            )
        except _RolledBack as held:
            return None, False, str(held)

    def _insert_leased(
        self,
        job: NewJob,
        owner: str,
        lease_token: str,
        now: int,
        default_lease_ms: int,
        keep_if_held: bool,
        limits: AdmissionFor | None,
    ) -> tuple[JobRow | None, bool, str | None]:
        with self.tx() as conn:
            limited = False
            admission = None
            if limits is not None:
                admission, admitted = self._admit_in(conn, limits, [Claim(job.id, owner)])
                limited = not admitted
            lane = (job.tenant_id, job.job_type, job.definition_id)
            if lane not in self._known_lanes:
                self.lane_upsert(conn, {lane})
            lease_ms = job.heartbeat_timeout_ms or default_lease_ms
            row = _insert_row(job)
            if not limited:
                row.update(
                    status=int(JobStatus.RUNNING),
                    attempt=1,
                    lease_owner=owner,
                    lease_token=lease_token,
                    started_at=now,
                    lease_expires_at=now + lease_ms * 1000,
                )
            for _ in range(_DEDUP_ROUNDS):
                if conn.execute(self._insert_skipping_keys_sql().returning(jobs.c.id), row).first():
                    break
                # The key is stored: that job is the answer, as it is.
                existing = conn.execute(
                    sa.select(jobs).where(
                        jobs.c.tenant_id == job.tenant_id,
                        jobs.c.idempotency_key == job.idempotency_key,
                    )
                ).first()
                if existing is not None:
                    return JobRecord(*existing), True, None
            else:
                raise _key_vanished([job])
            paused = conn.execute(
                sa.text(f"SELECT {pause_blocks('x')} FROM wfj_jobs x WHERE id = :id"),
                {"id": job.id, "now": now},
            ).scalar()
            held = None
            if paused:
                held = "paused"
            elif limited:
                held = "rate" if admission is not None and admission.rate_refused else "limit"
            elif admission is not None and admission.rate_keys:
                # Started now: the start counts against its rate limits.
                self._rate_buckets_write(conn, admission.charge({job.id}))
            if held and not keep_if_held:
                raise _RolledBack(held)
            if paused and not limited:
                conn.execute(
                    jobs.update()
                    .where(jobs.c.id == job.id)
                    .values(
                        status=int(JobStatus.PENDING),
                        attempt=0,
                        lease_owner=None,
                        lease_token=None,
                        started_at=None,
                        lease_expires_at=None,
                    )
                )
            stored = JobRecord(*conn.execute(sa.select(jobs).where(jobs.c.id == job.id)).one())
            events = [EventEntry(job.id, JobEventKind.ENQUEUED)]
            if stored.status == JobStatus.RUNNING:
                events.append(EventEntry(job.id, JobEventKind.STARTED))
            self._record_events(conn, events, now, bump=False)
        self._known_lanes.add(lane)
        return stored, False, held

    def _insert_small(
        self,
        conn: sa.Connection,
        new_jobs: Sequence[NewJob],
        *,
        direct: DirectLeases | None,
        keyed: bool,
    ) -> dict[str, int]:
        """A few jobs in one autocommit statement that also sends the wake-up
        (for the jobs stored PENDING; one leased at insert needs none).

        One round trip instead of BEGIN, COPY, NOTIFY and COMMIT: this is the
        path of single enqueues under load, where latency is what counts.
        Jobs offered in ``direct`` are stored leased to their worker unless a
        pause covers them; the insert waits for any pause being committed
        (its lock conflicts with the pause's), so a finished pause is seen.
        With ``keyed``, jobs whose key is stored are skipped.
        Returns the status of each job stored, by id.
        """
        sql, params = _insert_small_statement(new_jobs, direct, keyed)
        stored = {job_id: status for _, job_id, status in conn.exec_driver_sql(sql, params)}
        if stored:
            self._events_written(conn)
        return stored

    def _copy_in(self, conn: sa.Connection, new_jobs: Sequence[NewJob]) -> None:
        """Bulk insert with COPY: several times cheaper per row than INSERT.

        COPY runs on the driver's connection, below SQLAlchemy: a driver error
        is wrapped as SQLAlchemy wraps any other, so ``domain_errors`` maps a
        refused value to ``InvalidArgument`` here too.
        """
        import psycopg

        raw = conn.connection.driver_connection
        # The psycopg connection of this open transaction (None only once closed).
        assert isinstance(raw, psycopg.Connection)
        status = int(JobStatus.PENDING)
        columns = ", ".join((*_NEW_JOB_FIELDS, "status"))
        statement = f"COPY wfj_jobs ({columns}) FROM STDIN"
        try:
            with raw.cursor() as cur, cur.copy(statement) as copy:
                for job in new_jobs:
                    copy.write_row((*_NEW_JOB_VALUES(job), status))
        except psycopg.Error as e:
            raise sa.exc.DBAPIError.instance(statement, None, e, psycopg.Error) from e

    def lane_upsert(self, conn: sa.Connection, new_lanes: set[tuple[str, str, str]]) -> None:
        values = [{"tenant_id": t, "job_type": jt, "definition_id": d} for t, jt, d in new_lanes]
        conn.execute(self._insert(lanes).on_conflict_do_nothing(), values)

    def _insert_skipping_keys_sql(self) -> Any:
        """INSERT of job rows that skips a row whose (tenant, key) is stored."""
        return self._insert(jobs).on_conflict_do_nothing(
            index_elements=[jobs.c.tenant_id, jobs.c.idempotency_key],
            index_where=jobs.c.idempotency_key.isnot(None),
        )

    def _insert_skipping_keys(
        self, conn: sa.Connection, new_jobs: Sequence[NewJob]
    ) -> dict[str, int]:
        conn.execute(self._insert_skipping_keys_sql(), [_insert_row(j) for j in new_jobs])
        # Which rows were stored is read back by the caller, key by key.
        return {}

    def _insert_deduplicated(
        self,
        conn: sa.Connection,
        new_jobs: Sequence[NewJob],
        insert: Callable[[Sequence[NewJob]], dict[str, int]],
        existing: dict[str, JobRow] | None = None,
    ) -> list[tuple[str, bool, int]]:
        """Store ``new_jobs`` with ``insert`` (which skips stored keys), then
        answer each keyed job with the job its key names (its whole row into
        ``existing`` when given).

        ``insert`` returns the status of the rows it knows it stored; any
        other keyed job is answered from the read that follows, which sees
        every committed row (the insert waited for any concurrent writer of
        the key).
        """
        first_of_key: dict[tuple[str, str], NewJob] = {}
        to_insert: list[NewJob] = []
        for job in new_jobs:
            if job.idempotency_key:
                ident = (job.tenant_id, job.idempotency_key)
                if ident in first_of_key:
                    continue
                first_of_key[ident] = job
            to_insert.append(job)
        inserted: dict[str, int] = {}
        stored: dict[tuple[str, str], tuple[str, int]] = {}
        for _ in range(_DEDUP_ROUNDS):
            inserted.update(insert(to_insert))
            keys: set[tuple[str, str | None]] = set()
            for j in to_insert:
                if j.idempotency_key and j.id in inserted:
                    stored[(j.tenant_id, j.idempotency_key)] = (j.id, inserted[j.id])
                elif j.idempotency_key:
                    keys.add((j.tenant_id, j.idempotency_key))
            for tenant, key_group in _group_keys(keys).items():
                read = (
                    sa.select(jobs)
                    if existing is not None
                    else sa.select(jobs.c.idempotency_key, jobs.c.id, jobs.c.status)
                )
                found = conn.execute(
                    read.where(jobs.c.tenant_id == tenant, jobs.c.idempotency_key.in_(key_group))
                )
                for row in found:
                    stored[(tenant, row.idempotency_key)] = (row.id, row.status)
                    if existing is not None:
                        existing[row.id] = JobRecord(*row)
            # A key is missing only when its job was deleted between the
            # insert that skipped it and the read: insert those again.
            to_insert = [
                j for j in first_of_key.values() if (j.tenant_id, j.idempotency_key) not in stored
            ]
            if not to_insert:
                break
        else:
            raise _key_vanished(to_insert)
        result: list[tuple[str, bool, int]] = []
        for job in new_jobs:
            if job.idempotency_key:
                job_id, status = stored[(job.tenant_id, job.idempotency_key)]
                result.append((job_id, job_id != job.id, status))
            else:
                result.append((job.id, False, inserted.get(job.id, int(JobStatus.PENDING))))
        return result

    def job_get(self, job_id: str) -> JobRow | None:
        with self.statement() as conn:
            row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).first()
            return JobRecord(*row) if row is not None else None

    def job_get_many(self, job_ids: Sequence[str]) -> list[JobRow]:
        with self.statement() as conn:
            return [
                JobRecord(*r) for r in conn.execute(sa.select(jobs).where(jobs.c.id.in_(job_ids)))
            ]

    def job_attempts(self, job_id: str) -> list[AttemptRow]:
        """The job's attempt history, oldest first, with its completed first
        attempt read from the job row (``schema.first_attempt_completed``)."""
        recorded = sa.select(job_attempts).where(job_attempts.c.job_id == job_id)
        from_job = {
            "job_id": jobs.c.id,
            "number": sa.literal(1, sa.Integer),
            "worker_id": jobs.c.lease_owner,
            "started_at": jobs.c.started_at,
            "ended_at": jobs.c.finished_at,
            "outcome": sa.literal(int(AttemptOutcome.COMPLETED), sa.SmallInteger),
            # The job row keeps the token of the report that completed it.
            "reported_token": jobs.c.lease_token,
        }
        described = sa.select(
            *(from_job.get(c.name, sa.null().cast(c.type)) for c in job_attempts.columns)
        ).where(jobs.c.id == job_id, sa.text(first_attempt_completed(jobs.name)))
        query = sa.union_all(recorded, described).order_by(sa.column("number"))
        with self.statement() as conn:
            return list(conn.execute(query))

    def job_list(
        self, flt: JobFilter, after_id: str | None, limit: int, *, newest_first: bool = False
    ) -> list[JobRow]:
        """Jobs matching ``flt`` in id (creation) order, or newest first,
        starting past ``after_id`` in that order."""
        order = jobs.c.id.desc() if newest_first else jobs.c.id
        query = sa.select(jobs).where(*_filter_clauses(flt)).order_by(order).limit(limit)
        if after_id:
            query = query.where(jobs.c.id < after_id if newest_first else jobs.c.id > after_id)
        with self.statement() as conn:
            return [JobRecord(*r) for r in conn.execute(query)]

    def job_count(self, flt: JobFilter) -> int:
        """How many jobs match ``flt``."""
        query = sa.select(sa.func.count()).select_from(jobs).where(*_filter_clauses(flt))
        with self.statement() as conn:
            return int(conn.execute(query).scalar() or 0)

    def job_retry(
        self,
        job_id: str,
        keep_attempts: bool,
        now: int,
        *,
        statuses: Collection[int] = RETRYABLE_STATUSES,
        grant: RetryGrantRule = operator_retry_grant,
    ) -> StateChange:
        """A job in ``statuses`` → PENDING, due now, with the budget ``grant`` gives.

        Raises:
            FailedPrecondition: ``grant`` gives none (the job is at the attempt
                ceiling: only a replay runs it again).
        """
        wanted = [int(s) for s in statuses]
        with self.tx() as conn:
            row = self._lock_job(conn, job_id)
            if row is None or row.status not in wanted:
                return StateChange(row, False)
            granted = _grant_for(grant, row, keep_attempts)
            if granted is None:
                raise FailedPrecondition(
                    f"job {job_id} has run {row.attempt} attempts, the most one job may run "
                    f"({ATTEMPT_CEILING:,}); replay it to run it as a new job"
                )
            lock_keys(conn, self.is_postgres, _keys_of([row]))
            conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.status.in_(wanted))
                .values(**retry_values(granted, now), ordering_held=_HELD_AGAIN)
            )
            self._record_events(
                conn, [EventEntry(job_id, JobEventKind.RETRY_SCHEDULED)], now, bump=True
            )
            self._notify_wake(conn, now)
            return StateChange(self._read_job(conn, job_id), True)

    def job_cancel(self, job_id: str, reason: str, now: int) -> StateChange:
        """PENDING → CANCELLED at once; RUNNING → cancel requested; FAULTED →
        CANCELLED (set aside without running again).

        A running job's worker learns of the request from its next heartbeat
        answer; the attempt then ends CANCELLED however it stops (failure,
        release or lease expiry). Requesting again is a no-op that applies.
        A FAULTED job that held its ordering key lets the key's next job run.
        """
        note = f"cancelled: {reason}" if reason else "cancelled"
        with self.tx() as conn:
            # A PENDING (or FAULTED) job's key is locked before its row; a
            # transaction holding a key never waits for a RUNNING job's row
            # (see store/ordering.py), so a RUNNING job is handled without it.
            found = conn.execute(
                sa.select(
                    jobs.c.tenant_id, jobs.c.ordering_key, jobs.c.status, jobs.c.group_id
                ).where(jobs.c.id == job_id)
            ).first()
            if found is not None and found.status == JobStatus.FAULTED:
                return self._set_aside_faulted(conn, job_id, found, reason, note, now)
            ended = Ended.of([found] if found and found.status == JobStatus.PENDING else [])
            keys = ended.keys
            lock_keys(conn, self.is_postgres, keys)
            pending = conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.status == int(JobStatus.PENDING))
                .values(
                    status=int(JobStatus.CANCELLED),
                    finished_at=now,
                    last_error=note,
                    cancel_reason=reason or None,
                    ordering_held=False,
                )
            ).rowcount
            if pending:
                events = [EventEntry(job_id, JobEventKind.CANCELLED, note)]
                self._jobs_ended(conn, ended, now, events=events, bump=True, keys_locked=True)
                return StateChange(self._read_job(conn, job_id), True)
            if not keys:
                return self._request_cancel(conn, job_id, reason)
        # It was leased since it was read: request the cancel without the key's lock.
        with self.tx() as conn:
            return self._request_cancel(conn, job_id, reason)

    def _set_aside_faulted(
        self, conn: sa.Connection, job_id: str, found: Any, reason: str, note: str, now: int
    ) -> StateChange:
        """A FAULTED job → CANCELLED without an attempt: it never runs again
        (unless retried). Its ordering key, which it held under the blocking
        policy, releases its next job; its group counted it as ended already."""
        ended = Ended(keys=_keys_of([found]))
        lock_keys(conn, self.is_postgres, ended.keys)
        changed = conn.execute(
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.status == int(JobStatus.FAULTED))
            .values(
                status=int(JobStatus.CANCELLED),
                finished_at=now,
                last_error=note,
                # The fault's error stays in its attempt's history.
                last_error_kind=None,
                cancel_reason=reason or None,
            )
        ).rowcount
        if changed:
            events = [EventEntry(job_id, JobEventKind.CANCELLED, note)]
            self._jobs_ended(conn, ended, now, events=events, bump=True, keys_locked=True)
        return StateChange(self._read_job(conn, job_id), bool(changed))

    def _request_cancel(self, conn: sa.Connection, job_id: str, reason: str) -> StateChange:
        running = conn.execute(
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.status == int(JobStatus.RUNNING))
            .values(cancel_requested=True, cancel_reason=reason or None)
        ).rowcount
        return StateChange(self._read_job(conn, job_id), bool(running))

    def job_unlock(self, job_id: str, now: int, wake: bool = False) -> StateChange:
        """RUNNING → PENDING now, the attempt recorded as UNLOCKED.

        Clearing the lease token fences the old holder: its heartbeats answer
        "lost" and its outcome is refused. The operator asks for the job to
        run again, whatever its retry policy: the unlocked attempt counts
        (history numbers stay unique) and, as a retry that keeps the attempts,
        a job that spent its budget is given one attempt more (``max_attempts``
        raised by one, ``operator_retry_grant``). A cancel requested before
        the unlock is honoured: the job ends CANCELLED instead. A job at the
        attempt ceiling can start no other attempt: it ends FAULTED (only a
        replay runs it again). ``wake`` tells every replica that the freed
        running slot may admit a waiting job.
        """
        with self.tx() as conn:
            row = self._lock_job(conn, job_id)
            if row is None or row.status != JobStatus.RUNNING:
                return StateChange(row, False)
            error = "unlocked by an operator"
            if row.cancel_requested:
                new_status, outcome = JobStatus.CANCELLED, AttemptOutcome.CANCELLED
            elif at_attempt_ceiling(row.attempt):
                new_status, outcome = JobStatus.FAULTED, AttemptOutcome.UNLOCKED
                error = (
                    f"unlocked after {row.attempt} attempts, the most one job may run "
                    f"({ATTEMPT_CEILING:,}); replay it to run it again"
                )
            else:
                new_status, outcome = JobStatus.PENDING, AttemptOutcome.UNLOCKED
            budget: dict[str, Any] = {}
            grant = operator_retry_grant(
                row.attempt, row.released_attempts, row.max_attempts, row.retry_policy, True
            )
            if (
                new_status == JobStatus.PENDING
                and grant is not None
                and grant.max_attempts != row.max_attempts
            ):
                budget = {"max_attempts": grant.max_attempts, "retry_policy": grant.retry_policy}
            conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.status == int(JobStatus.RUNNING))
                .values(
                    **budget,
                    status=int(new_status),
                    due_at=now,
                    finished_at=None if new_status == JobStatus.PENDING else now,
                    lease_token=None,
                    lease_expires_at=None,
                    last_error=error,
                )
            )
            conn.execute(
                job_attempts.insert().values(
                    job_id=job_id,
                    number=row.attempt,
                    worker_id=row.lease_owner,
                    started_at=row.started_at,
                    ended_at=now,
                    outcome=int(outcome),
                    error=error,
                    error_kind="Unlocked",
                )
            )
            events = [
                EventEntry(job_id, kind, error, "Unlocked")
                if kind != JobEventKind.RETRY_SCHEDULED
                else EventEntry(job_id, kind)
                for kind in events_of_ended_attempt(outcome, new_status)
            ]
            self._jobs_ended(
                conn,
                Ended.of([row]) if new_status != JobStatus.PENDING else Ended(),
                now,
                events=events,
                bump=True,
                wake=[now] if new_status == JobStatus.PENDING or wake else [],
            )
            return StateChange(self._read_job(conn, job_id), True)

    def job_run_now(self, job_id: str, now: int) -> StateChange:
        """A PENDING job not due yet → due ``now`` (guarded), event RESCHEDULED.

        A PENDING job already due is answered unchanged (applied, no event);
        a job in another status is not changed. Its ordering hold, priority
        and uniqueness key are left as they are.
        """
        with self.tx() as conn:
            moved = conn.execute(
                jobs.update()
                .where(
                    jobs.c.id == job_id,
                    jobs.c.status == int(JobStatus.PENDING),
                    jobs.c.due_at > now,
                )
                .values(due_at=now)
            ).rowcount
            if moved:
                self._record_events(
                    conn, [EventEntry(job_id, JobEventKind.RESCHEDULED)], now, bump=True
                )
                self._notify_wake(conn, now)
            row = self._read_job(conn, job_id)
            return StateChange(row, row is not None and row.status == JobStatus.PENDING)

    def job_replay(self, job_id: str, new_job_id: str, now: int) -> JobRow | None:
        """A new PENDING job with the original's payload, context and policy.

        It gets a fresh id, no idempotency key (the original holds it), no
        group (it is no member of the original's) and ``replay_of`` naming the
        original. None when the original is unknown.
        """
        copied = [
            c.name
            for c in jobs.columns
            if c.name
            not in {
                "id",
                "status",
                "attempt",
                "created_at",
                "due_at",
                "started_at",
                "finished_at",
                "lease_owner",
                "lease_token",
                "lease_expires_at",
                "last_error",
                "last_error_kind",
                "result",
                "result_content_type",
                "idempotency_key",
                "cancel_requested",
                "replay_of",
                "released_attempts",
                "event_tx",
                "ordering_held",
                # A new job of the key: numbered as it is stored (the column's default).
                "ordering_seq",
                # Outside the original's group: a group's members are the jobs
                # that joined it (while it was open), and its count holds.
                "group_id",
            }
        ]
        source = sa.select(
            sa.literal(new_job_id).label("id"),
            sa.literal(int(JobStatus.PENDING)).label("status"),
            sa.literal(0).label("attempt"),
            sa.literal(now, sa.BigInteger).label("created_at"),
            sa.literal(now, sa.BigInteger).label("due_at"),
            sa.literal(job_id).label("replay_of"),
            # Held behind the key's live jobs, the original among them.
            sa.literal_column(key_busy(jobs.name, other_than_self=False)).label("ordering_held"),
            *[jobs.c[name] for name in copied],
        ).where(jobs.c.id == job_id)
        target = [
            "id",
            "status",
            "attempt",
            "created_at",
            "due_at",
            "replay_of",
            "ordering_held",
            *copied,
        ]
        with self.tx() as conn:
            keys = _keys_of(
                conn.execute(
                    sa.select(jobs.c.tenant_id, jobs.c.ordering_key).where(jobs.c.id == job_id)
                )
            )
            lock_keys(conn, self.is_postgres, keys)
            inserted = conn.execute(
                jobs.insert().from_select(target, source).returning(jobs.c.id)
            ).first()
            if inserted is None:
                return None
            self._record_events(
                conn, [EventEntry(new_job_id, JobEventKind.ENQUEUED)], now, bump=False
            )
            self._notify_wake(conn, now)
            return self._read_job(conn, new_job_id)

    def job_count_matching(self, flt: JobFilter, statuses: Sequence[int]) -> int:
        """Jobs matching ``flt`` whose status is one of ``statuses``."""
        query = (
            sa.select(sa.func.count())
            .select_from(jobs)
            .where(*_filter_clauses(flt), jobs.c.status.in_([int(s) for s in statuses]))
        )
        with self.tx() as conn:
            return int(conn.execute(query).scalar() or 0)

    def job_bulk_retry(
        self,
        flt: JobFilter,
        statuses: Sequence[int],
        keep_attempts: bool,
        now: int,
        *,
        grant: RetryGrantRule = operator_retry_grant,
    ) -> BulkCount:
        """Retry every job matching ``flt`` in ``statuses`` with the budget ``grant`` gives.

        Works through the matches in id order, ``BULK_CHUNK`` rows per
        transaction; jobs that changed state meanwhile are skipped, and so are
        jobs ``grant`` gives no budget (matched, not changed).
        """
        wanted = [int(s) for s in statuses]
        matched = changed = 0
        after = ""
        while True:
            with self.tx() as conn:
                rows = self._lock_chunk(
                    conn,
                    flt,
                    wanted,
                    after,
                    (
                        jobs.c.id,
                        jobs.c.attempt,
                        jobs.c.max_attempts,
                        jobs.c.retry_policy,
                        jobs.c.released_attempts,
                        jobs.c.tenant_id,
                        jobs.c.ordering_key,
                    ),
                )
                if not rows:
                    break
                after = rows[-1].id
                matched += len(rows)
                lock_keys(conn, self.is_postgres, _keys_of(rows))
                retried: list[EventEntry] = []
                for row in rows:
                    granted = _grant_for(grant, row, keep_attempts)
                    if granted is None:
                        continue  # matched, not changed: only a replay runs it again
                    if conn.execute(
                        jobs.update()
                        .where(jobs.c.id == row.id, jobs.c.status.in_(wanted))
                        .values(**retry_values(granted, now), ordering_held=_HELD_AGAIN)
                    ).rowcount:
                        retried.append(EventEntry(row.id, JobEventKind.RETRY_SCHEDULED))
                changed += len(retried)
                self._record_events(conn, retried, now, bump=True)
                self._notify_wake(conn, now)
            if len(rows) < BULK_CHUNK:
                break
        return BulkCount(matched, changed)

    def job_bulk_cancel(
        self, flt: JobFilter, statuses: Sequence[int], reason: str, now: int
    ) -> BulkCount:
        """Cancel every job matching ``flt`` in ``statuses``: PENDING ones at once,
        RUNNING ones by a cancel request (other statuses match nothing)."""
        note = f"cancelled: {reason}" if reason else "cancelled"
        wanted = [int(s) for s in statuses if s in (JobStatus.PENDING, JobStatus.RUNNING)]
        matched = changed = 0
        after = ""
        while True:
            with self.tx() as conn:
                columns = (
                    jobs.c.id,
                    jobs.c.status,
                    jobs.c.tenant_id,
                    jobs.c.ordering_key,
                    jobs.c.group_id,
                )
                found = self._lock_chunk(conn, flt, wanted, after, columns, lock=False)
                if not found:
                    break
                after = found[-1].id
                # The PENDING jobs' ordering keys are locked before their rows,
                # and the RUNNING jobs are handled in a transaction of their
                # own, without a key (see store/ordering.py); rows that moved
                # on since the read drop out.
                was = {s: [r.id for r in found if r.status == s] for s in wanted}
                pending_rows = [r for r in found if r.status == JobStatus.PENDING]
                lock_keys(conn, self.is_postgres, _keys_of(pending_rows))
                rows = self._lock_rows(
                    conn, was.get(int(JobStatus.PENDING), []), [int(JobStatus.PENDING)], columns
                )
                matched += len(rows)
                pending = [r.id for r in rows]
                if pending:
                    cancelled = list(
                        conn.execute(
                            jobs.update()
                            .where(jobs.c.id.in_(pending), jobs.c.status == int(JobStatus.PENDING))
                            .values(
                                status=int(JobStatus.CANCELLED),
                                finished_at=now,
                                last_error=note,
                                cancel_reason=reason or None,
                                ordering_held=False,
                            )
                            .returning(jobs.c.id)
                        ).scalars()
                    )
                    changed += len(cancelled)
                    done = set(cancelled)
                    self._jobs_ended(
                        conn,
                        Ended.of(r for r in rows if r.id in done),
                        now,
                        events=[EventEntry(j, JobEventKind.CANCELLED, note) for j in cancelled],
                        bump=True,
                        keys_locked=True,
                    )
            if was.get(int(JobStatus.RUNNING)):
                with self.tx() as conn:
                    running = self._lock_rows(
                        conn, was[int(JobStatus.RUNNING)], [int(JobStatus.RUNNING)], columns
                    )
                    matched += len(running)
                    changed += conn.execute(
                        jobs.update()
                        .where(
                            jobs.c.id.in_([r.id for r in running]),
                            jobs.c.status == int(JobStatus.RUNNING),
                        )
                        .values(cancel_requested=True, cancel_reason=reason or None)
                    ).rowcount
            if len(found) < BULK_CHUNK:
                break
        return BulkCount(matched, changed)

    def _lock_rows(
        self,
        conn: sa.Connection,
        ids: Sequence[str],
        statuses: Sequence[int],
        columns: Sequence[Any],
    ) -> list[Any]:
        """Of ``ids``, the rows still in ``statuses``, locked (PostgreSQL)."""
        query = (
            sa.select(*columns)
            .where(jobs.c.id.in_(list(ids)), jobs.c.status.in_(statuses))
            .order_by(jobs.c.id)
        )
        if self.is_postgres:
            query = query.with_for_update()
        return list(conn.execute(query))

    def _lock_chunk(
        self,
        conn: sa.Connection,
        flt: JobFilter,
        statuses: Sequence[int],
        after: str,
        columns: Sequence[Any],
        *,
        lock: bool = True,
    ) -> list[Any]:
        """The next ``BULK_CHUNK`` matches after ``after``, locked on PostgreSQL
        unless ``lock`` is false."""
        query = (
            sa.select(*columns)
            .where(*_filter_clauses(flt), jobs.c.status.in_(statuses), jobs.c.id > after)
            .order_by(jobs.c.id)
            .limit(BULK_CHUNK)
        )
        if lock and self.is_postgres:
            # Wait for in-flight claims rather than skip their rows, so a dry
            # run and the real call count the same jobs.
            query = query.with_for_update()
        return list(conn.execute(query))

    def job_purge_finished(self, cutoffs: Mapping[int, int], limit: int) -> int:
        """Delete up to ``limit`` finished jobs, with their attempts, whose status is a
        key of ``cutoffs`` and whose ``finished_at`` is before that status's cutoff.

        Statuses not in ``cutoffs`` are kept. The batch takes any eligible rows
        (no ordering), so each call stops at ``limit`` rows, found through the
        partial index of finished jobs (``ix_wfj_jobs_finished``). On
        PostgreSQL one replica at a time purges (transaction-level advisory
        lock).

        The candidates are read without locks, so the DELETE checks status
        and finish time again: a job an operator retried after the read (its
        retry waited for no lock of ours, or we waited for its row lock) is
        PENDING when the DELETE reaches it and is kept, with its attempts,
        which are deleted only for the jobs the DELETE removed.

        A member of a group that has not completed is kept (the group's
        completion counts it); a completed group is deleted with its
        completion job.
        """
        finished = {int(s) for s in FINISHED_STATUSES}
        clauses = [
            sa.and_(jobs.c.status == status, jobs.c.finished_at < before)
            for status, before in cutoffs.items()
            if status in finished
        ]
        if not clauses or limit <= 0:
            return 0
        with self.tx() as conn:
            if self.is_postgres:
                got = conn.execute(
                    sa.text("SELECT pg_try_advisory_xact_lock(hashtext('wfj_retention'))")
                ).scalar()
                if not got:
                    return 0
            found = list(
                conn.execute(
                    sa.select(
                        jobs.c.id,
                        jobs.c.tenant_id,
                        jobs.c.ordering_key,
                        jobs.c.status,
                        jobs.c.ordering_skip_failed,
                    )
                    .where(sa.text(FINISHED_JOB), sa.or_(*clauses), sa.not_(_IN_UNCOMPLETED_GROUP))
                    .limit(limit)
                )
            )
            if not found:
                return 0
            ids = [r.id for r in found]
            gone = set(
                conn.execute(
                    jobs.delete()
                    .where(
                        jobs.c.id.in_(ids),
                        sa.text(FINISHED_JOB),
                        sa.or_(*clauses),
                        sa.not_(_IN_UNCOMPLETED_GROUP),
                    )
                    .returning(jobs.c.id)
                ).scalars()
            )
            if not gone:
                return 0
            conn.execute(job_attempts.delete().where(job_attempts.c.job_id.in_(list(gone))))
            self._unique_keys_forget(conn, list(gone))
            self._groups_forget(conn, list(gone))
            # A FAULTED job that held its key is gone: the key's next job may run.
            holding = _keys_of(
                r
                for r in found
                if r.id in gone and r.status == JobStatus.FAULTED and not r.ordering_skip_failed
            )
            self._jobs_ended(conn, Ended(keys=holding), None)
            return len(gone)

    def job_purge_matching(
        self, flt: JobFilter, statuses: Sequence[int], dry_run: bool
    ) -> PurgeCount:
        """Delete the finished jobs matching ``flt`` in ``statuses`` (some of
        COMPLETED, FAULTED, CANCELLED), with their attempts and uniqueness keys.

        Kept (counted in ``kept``): FAULTED jobs holding their ordering key
        (blocking policy: the key's next job waits for them) and members of
        groups that have not completed (their completion job would count them).
        Works through the matches in id order, ``BULK_CHUNK`` rows per
        transaction; the DELETE checks the status and the rules again, so a job
        retried since the read is kept. Writes no event: the jobs' earlier
        events stay in the log until event retention.
        """
        wanted = [int(s) for s in statuses if s in FINISHED_STATUSES]
        matching = [*_filter_clauses(flt), jobs.c.status.in_(wanted)]
        purgeable = sa.not_(_PURGE_KEEPS)
        with self.statement() as conn:
            kept = int(
                conn.execute(
                    sa.select(sa.func.count()).select_from(jobs).where(*matching, _PURGE_KEEPS)
                ).scalar()
                or 0
            )
            if dry_run:
                matched = conn.execute(
                    sa.select(sa.func.count()).select_from(jobs).where(*matching, purgeable)
                ).scalar()
                return PurgeCount(int(matched or 0), 0, kept)
        matched = deleted = 0
        after = ""
        while True:
            with self.tx() as conn:
                ids = list(
                    conn.execute(
                        sa.select(jobs.c.id)
                        .where(*matching, purgeable, jobs.c.id > after)
                        .order_by(jobs.c.id)
                        .limit(BULK_CHUNK)
                    ).scalars()
                )
                if not ids:
                    break
                after = ids[-1]
                matched += len(ids)
                gone = list(
                    conn.execute(
                        jobs.delete()
                        .where(jobs.c.id.in_(ids), jobs.c.status.in_(wanted), purgeable)
                        .returning(jobs.c.id)
                    ).scalars()
                )
                if gone:
                    conn.execute(job_attempts.delete().where(job_attempts.c.job_id.in_(gone)))
                    self._unique_keys_forget(conn, gone)
                    self._groups_forget(conn, gone)
                deleted += len(gone)
            if len(ids) < BULK_CHUNK:
                break
        return PurgeCount(matched, deleted, kept)

    def _groups_forget(self, conn: sa.Connection, job_ids: Sequence[str]) -> None:
        """Delete the (completed) groups whose completion jobs were purged: a group
        is kept as long as the job it completed with (``ix_wfj_groups_completion``)."""
        conn.execute(groups.delete().where(groups.c.completion_job_id.in_(job_ids)))

    def _unique_keys_forget(self, conn: sa.Connection, job_ids: Sequence[str]) -> None:
        """Delete the uniqueness keys naming purged jobs (store/uniqueness.py).

        A key row an enqueue holds is skipped, not waited for (that enqueue
        takes the key row before the job row, the purge the other way round),
        and a key naming a deleted job blocks nothing anyway.
        """
        held = sa.select(unique_keys.c.tenant_id, unique_keys.c.unique_key).where(
            unique_keys.c.job_id.in_(job_ids)
        )
        if self.is_postgres:
            held = held.with_for_update(skip_locked=True)
        conn.execute(
            unique_keys.delete().where(
                sa.tuple_(unique_keys.c.tenant_id, unique_keys.c.unique_key).in_(held)
            )
        )

    def _lock_job(self, conn: sa.Connection, job_id: str) -> JobRecord | None:
        query = sa.select(jobs).where(jobs.c.id == job_id)
        if self.is_postgres:
            query = query.with_for_update()
        row = conn.execute(query).first()
        return JobRecord(*row) if row is not None else None

    def _read_job(self, conn: sa.Connection, job_id: str) -> JobRecord | None:
        # A JobRecord, as every other read hands out (``JobRow``), not the bare row.
        row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).first()
        return JobRecord(*row) if row is not None else None
