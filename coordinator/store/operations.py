"""Named queries behind operator actions: retry, cancel, unlock, replay, bulk
actions, the cross-replica worker registry, cluster flags, execution timeouts
and retention.

Every state change is a guarded write: it names the statuses it applies to in
its WHERE clause, so a job that moved on between the operator's look and the
write is left alone and reported as such. Attempt history numbers stay unique
per job: no query here lowers ``attempt`` (see ``job_retry``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from coordinator.errors import FailedPrecondition
from coordinator.model import (
    ATTEMPT_CEILING,
    FINISHED_STATUSES,
    RETRYABLE_STATUSES,
    AttemptOutcome,
    JobFilter,
    JobRow,
    JobStatus,
    RetryGrant,
    RetryGrantRule,
    operator_retry_grant,
)
from coordinator.store.base import StoreBase
from coordinator.store.jobs import ROW_WRITE_ERRORS, _filter_clauses
from coordinator.store.schema import cluster_flags, job_attempts, jobs, workers

# Attempt outcomes that count as failures in stats.
FAILED_OUTCOMES = (AttemptOutcome.FAILED, AttemptOutcome.LEASE_EXPIRED, AttemptOutcome.TIMED_OUT)

# Rows changed per transaction by bulk actions, so one call never holds locks
# on a whole tenant's backlog at once.
BULK_CHUNK = 1000
# Longest execution timeout the deadline arithmetic counts (ten years); longer
# stored values mean "never" in practice and would overflow a 64-bit integer.
MAX_TIMEOUT_MS = 10 * 365 * 86_400 * 1000


@dataclass(frozen=True, slots=True)
class StateChange:
    """The result of a guarded single-job write.

    ``row`` is the job after the call (None: no such job); ``changed`` tells
    whether the write applied; when it did not, ``row.status`` is the state
    that prevented it.
    """

    row: JobRow | None
    changed: bool


@dataclass(frozen=True, slots=True)
class BulkCount:
    matched: int
    changed: int


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """One connected worker as a coordinator registers it."""

    worker_id: str
    hostname: str
    pid: int
    sdk_version: str
    job_types: Sequence[str]
    slots: int
    connected_at: int
    draining: bool = False


@dataclass(frozen=True, slots=True)
class RunningDeadline:
    """A running attempt that has an execution timeout."""

    job_id: str
    lease_token: str
    deadline: int


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
        "lease_owner": None,
        "lease_token": None,
        "lease_expires_at": None,
    }


def _grant_for(rule: RetryGrantRule, row: Any, keep_attempts: bool) -> RetryGrant | None:
    return rule(
        row.attempt, row.released_attempts, row.max_attempts, row.retry_policy, keep_attempts
    )


class OperationQueries(StoreBase):
    """Queries over ``wfj_jobs`` for operator actions, ``wfj_workers`` and ``wfj_cluster_flags``."""

    # -- single jobs -----------------------------------------------------------

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
            conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.status.in_(wanted))
                .values(**retry_values(granted, now))
            )
            self._notify_wake(conn, now)
            return StateChange(self._read_job(conn, job_id), True)

    def job_cancel(self, job_id: str, reason: str, now: int) -> StateChange:
        """PENDING → CANCELLED at once; RUNNING → cancel requested.

        A running job's worker learns of the request from its next heartbeat
        answer; the attempt then ends CANCELLED however it stops (failure,
        release or lease expiry). Requesting again is a no-op that applies.
        """
        note = f"cancelled: {reason}" if reason else "cancelled"
        with self.tx() as conn:
            pending = conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.status == int(JobStatus.PENDING))
                .values(status=int(JobStatus.CANCELLED), finished_at=now, last_error=note)
            ).rowcount
            if not pending:
                running = conn.execute(
                    jobs.update()
                    .where(jobs.c.id == job_id, jobs.c.status == int(JobStatus.RUNNING))
                    .values(cancel_requested=True)
                ).rowcount
                if not running:
                    return StateChange(self._read_job(conn, job_id), False)
            return StateChange(self._read_job(conn, job_id), True)

    def job_unlock(self, job_id: str, now: int, wake: bool = False) -> StateChange:
        """RUNNING → PENDING now, the attempt recorded as UNLOCKED.

        Clearing the lease token fences the old holder: its heartbeats answer
        "lost" and its outcome is refused. The attempt still counts against
        max attempts (history numbers stay unique). A cancel requested before
        the unlock is honoured: the job ends CANCELLED instead. ``wake`` tells
        every replica that the freed running slot may admit a waiting job.
        """
        with self.tx() as conn:
            row = self._lock_job(conn, job_id)
            if row is None or row.status != JobStatus.RUNNING:
                return StateChange(row, False)
            new_status = JobStatus.CANCELLED if row.cancel_requested else JobStatus.PENDING
            outcome = AttemptOutcome.CANCELLED if row.cancel_requested else AttemptOutcome.UNLOCKED
            error = "unlocked by an operator"
            conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.status == int(JobStatus.RUNNING))
                .values(
                    status=int(new_status),
                    due_at=now,
                    finished_at=now if new_status == JobStatus.CANCELLED else None,
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
            if new_status == JobStatus.PENDING or wake:
                self._notify_wake(conn, now)
            return StateChange(self._read_job(conn, job_id), True)

    def job_replay(self, job_id: str, new_job_id: str, now: int) -> JobRow | None:
        """A new PENDING job with the original's payload, context and policy.

        It gets a fresh id, no idempotency key (the original holds it) and
        ``replay_of`` naming the original. None when the original is unknown.
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
            }
        ]
        source = sa.select(
            sa.literal(new_job_id).label("id"),
            sa.literal(int(JobStatus.PENDING)).label("status"),
            sa.literal(0).label("attempt"),
            sa.literal(now, sa.BigInteger).label("created_at"),
            sa.literal(now, sa.BigInteger).label("due_at"),
            sa.literal(job_id).label("replay_of"),
            *[jobs.c[name] for name in copied],
        ).where(jobs.c.id == job_id)
        target = ["id", "status", "attempt", "created_at", "due_at", "replay_of", *copied]
        with self.tx() as conn:
            inserted = conn.execute(
                jobs.insert().from_select(target, source).returning(jobs.c.id)
            ).first()
            if inserted is None:
                return None
            self._notify_wake(conn, now)
            return self._read_job(conn, new_job_id)

    # -- bulk ------------------------------------------------------------------

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
                    ),
                )
                if not rows:
                    break
                after = rows[-1].id
                matched += len(rows)
                for row in rows:
                    granted = _grant_for(grant, row, keep_attempts)
                    if granted is None:
                        continue  # matched, not changed: only a replay runs it again
                    changed += conn.execute(
                        jobs.update()
                        .where(jobs.c.id == row.id, jobs.c.status.in_(wanted))
                        .values(**retry_values(granted, now))
                    ).rowcount
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
                rows = self._lock_chunk(conn, flt, wanted, after, (jobs.c.id, jobs.c.status))
                if not rows:
                    break
                after = rows[-1].id
                matched += len(rows)
                pending = [r.id for r in rows if r.status == JobStatus.PENDING]
                running = [r.id for r in rows if r.status == JobStatus.RUNNING]
                if pending:
                    changed += conn.execute(
                        jobs.update()
                        .where(jobs.c.id.in_(pending), jobs.c.status == int(JobStatus.PENDING))
                        .values(status=int(JobStatus.CANCELLED), finished_at=now, last_error=note)
                    ).rowcount
                if running:
                    changed += conn.execute(
                        jobs.update()
                        .where(jobs.c.id.in_(running), jobs.c.status == int(JobStatus.RUNNING))
                        .values(cancel_requested=True)
                    ).rowcount
            if len(rows) < BULK_CHUNK:
                break
        return BulkCount(matched, changed)

    def _lock_chunk(
        self,
        conn: sa.Connection,
        flt: JobFilter,
        statuses: Sequence[int],
        after: str,
        columns: Sequence[Any],
    ) -> list[Any]:
        query = (
            sa.select(*columns)
            .where(*_filter_clauses(flt), jobs.c.status.in_(statuses), jobs.c.id > after)
            .order_by(jobs.c.id)
            .limit(BULK_CHUNK)
        )
        if self.is_postgres:
            # Wait for in-flight claims rather than skip their rows, so a dry
            # run and the real call count the same jobs.
            query = query.with_for_update()
        return list(conn.execute(query))

    # -- execution timeouts and retention --------------------------------------

    def job_running_deadlines(
        self, limit: int, exclude: Sequence[str] = ()
    ) -> list[RunningDeadline]:
        """The ``limit`` running attempts with an execution timeout that end soonest.

        Jobs in ``exclude`` (set aside by the timeout chore) are skipped. The
        timeout counts as at most ``MAX_TIMEOUT_MS``, so a stored value of any
        size cannot overflow the deadline arithmetic and fail the whole query.
        """
        timeout_ms = sa.func.least(jobs.c.execution_timeout_ms, MAX_TIMEOUT_MS)
        if not self.is_postgres:
            timeout_ms = sa.func.min(jobs.c.execution_timeout_ms, MAX_TIMEOUT_MS)
        deadline = (jobs.c.started_at + timeout_ms * 1000).label("deadline")
        query = (
            sa.select(jobs.c.id, jobs.c.lease_token, deadline)
            .where(
                jobs.c.status == int(JobStatus.RUNNING),
                jobs.c.execution_timeout_ms.isnot(None),
                jobs.c.execution_timeout_ms > 0,
                jobs.c.lease_token.isnot(None),
            )
            .order_by(deadline)
            .limit(limit)
        )
        if exclude:
            query = query.where(jobs.c.id.notin_(list(exclude)))
        with self.tx() as conn:
            return [RunningDeadline(*r) for r in conn.execute(query)]

    def job_purge_finished(self, cutoffs: Mapping[int, int], limit: int) -> int:
        """Delete up to ``limit`` finished jobs, with their attempts, whose status is a
        key of ``cutoffs`` and whose ``finished_at`` is before that status's cutoff.

        Statuses not in ``cutoffs`` are kept. The batch takes any eligible rows
        (no ordering), so each call stops at ``limit`` rows. On PostgreSQL one
        replica at a time purges (transaction-level advisory lock).
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
            ids = list(
                conn.execute(sa.select(jobs.c.id).where(sa.or_(*clauses)).limit(limit)).scalars()
            )
            if not ids:
                return 0
            conn.execute(job_attempts.delete().where(job_attempts.c.job_id.in_(ids)))
            return conn.execute(jobs.delete().where(jobs.c.id.in_(ids))).rowcount

    # -- stats -----------------------------------------------------------------

    def attempt_failure_counts(self, since: int, tenant_id: str = "") -> tuple[int, int]:
        """(failed attempts, retried attempts) that ended since ``since``.

        A failed attempt ended FAILED, LEASE_EXPIRED or TIMED_OUT. It counts as
        retried unless it is its job's latest attempt and the job is FAULTED or
        CANCELLED, i.e. unless it was the final failure.
        """
        a, j = job_attempts.alias("a"), jobs.alias("j")
        final = sa.and_(
            j.c.attempt == a.c.number,
            j.c.status.in_([int(JobStatus.FAULTED), int(JobStatus.CANCELLED)]),
        )
        query = (
            sa.select(
                sa.func.count(),
                sa.func.coalesce(sa.func.sum(sa.case((final, 0), else_=1)), 0),
            )
            .select_from(a.join(j, j.c.id == a.c.job_id))
            .where(a.c.ended_at >= since, a.c.outcome.in_([int(o) for o in FAILED_OUTCOMES]))
        )
        if tenant_id:
            query = query.where(j.c.tenant_id == tenant_id)
        with self.tx() as conn:
            failed, retried = conn.execute(query).one()
        return int(failed), int(retried)

    # -- worker registry ---------------------------------------------------------

    def worker_sync(
        self, coordinator_id: str, connected: Sequence[WorkerRecord], now: int
    ) -> list[tuple[str, BaseException]]:
        """Make the registry hold exactly ``connected`` for this coordinator.

        Upserts every connected worker (``last_seen_at = now``: its stream is
        open, so it was alive within the transport keepalive) and deletes
        this coordinator's other rows. Rows of a worker that reconnected to
        another replica belong to that replica and are left alone. A record
        the database refuses (e.g. a character it cannot store) is set aside
        and returned with its error; the others are written.
        """
        ids = [w.worker_id for w in connected]
        with self.tx() as conn:
            delete = workers.delete().where(workers.c.coordinator_id == coordinator_id)
            if ids:
                delete = delete.where(workers.c.worker_id.notin_(ids))
            conn.execute(delete)
            if not connected:
                return []
            insert = self._insert(workers)
            values = [
                {
                    "worker_id": w.worker_id,
                    "coordinator_id": coordinator_id,
                    "hostname": w.hostname,
                    "pid": w.pid,
                    "sdk_version": w.sdk_version,
                    "job_types": json.dumps(sorted(w.job_types)),
                    "slots": w.slots,
                    "connected_at": w.connected_at,
                    "last_seen_at": now,
                    "draining": w.draining,
                }
                for w in connected
            ]
            stmt = insert.on_conflict_do_update(
                index_elements=["worker_id"],
                set_={
                    name: insert.excluded[name]
                    for name in (
                        "coordinator_id",
                        "hostname",
                        "pid",
                        "sdk_version",
                        "job_types",
                        "slots",
                        "connected_at",
                        "last_seen_at",
                        "draining",
                    )
                },
            )
            try:
                with conn.begin_nested():
                    conn.execute(stmt, values)
                return []
            except ROW_WRITE_ERRORS:
                pass
            refused: list[tuple[str, BaseException]] = []
            for value in values:
                try:
                    with conn.begin_nested():
                        conn.execute(stmt, [value])
                except ROW_WRITE_ERRORS as e:
                    refused.append((value["worker_id"], e))
            return refused

    def worker_delete_stale(self, before: int) -> int:
        """Remove rows not refreshed since ``before`` (their coordinator died)."""
        with self.tx() as conn:
            return conn.execute(workers.delete().where(workers.c.last_seen_at < before)).rowcount

    def worker_list(self, seen_since: int = 0) -> list[Any]:
        """Registered workers seen at or after ``seen_since``, by worker id."""
        query = (
            sa.select(workers)
            .where(workers.c.last_seen_at >= seen_since)
            .order_by(workers.c.worker_id)
        )
        with self.tx() as conn:
            return list(conn.execute(query))

    # -- cluster flags -----------------------------------------------------------

    def cluster_flag_get(self, name: str) -> str | None:
        with self.tx() as conn:
            return conn.execute(
                sa.select(cluster_flags.c.value).where(cluster_flags.c.name == name)
            ).scalar()

    def cluster_flag_list(self, prefix: str = "") -> dict[str, str]:
        query = sa.select(cluster_flags.c.name, cluster_flags.c.value)
        if prefix:
            query = query.where(cluster_flags.c.name.startswith(prefix, autoescape=True))
        with self.tx() as conn:
            return {n: v for n, v in conn.execute(query)}

    def cluster_flag_set(self, name: str, value: str | None, now: int) -> None:
        """Set a flag, or delete it when ``value`` is None; other replicas are told at once."""
        with self.tx() as conn:
            if self.is_postgres:
                conn.execute(sa.text("SELECT pg_notify('wfj_wake', 'flags')"))
            if value is None:
                conn.execute(cluster_flags.delete().where(cluster_flags.c.name == name))
                return
            insert = self._insert(cluster_flags)
            conn.execute(
                insert.values(name=name, value=value, updated_at=now).on_conflict_do_update(
                    index_elements=["name"], set_={"value": value, "updated_at": now}
                )
            )

    # -- helpers -------------------------------------------------------------------

    def _insert(self, table: sa.Table) -> Any:
        if self.is_postgres:
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table)

    def _lock_job(self, conn: sa.Connection, job_id: str) -> Any:
        query = sa.select(jobs).where(jobs.c.id == job_id)
        if self.is_postgres:
            query = query.with_for_update()
        return conn.execute(query).first()

    def _read_job(self, conn: sa.Connection, job_id: str) -> Any:
        return conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).first()


__all__ = [
    "BulkCount",
    "OperationQueries",
    "RunningDeadline",
    "StateChange",
    "WorkerRecord",
    "retry_values",
]
