"""Named queries over jobs and their attempt history.

Writes that end an attempt are guarded: they touch only rows still RUNNING
under the caller's lease token, and report which rows they changed.

Statements that address jobs by id write ``status + 0 = N`` instead of
``status = N``: the expression does not match the partial indexes' predicates,
so PostgreSQL looks the rows up by primary key. Otherwise it may choose a
bitmap scan of the partial index, which in a busy queue is full of entries for
rows that already moved on (bitmap scans never mark them dead) and costs
milliseconds instead of microseconds.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from coordinator.errors import StoreUnavailable
from coordinator.model import (
    AttemptEnd,
    AttemptOutcome,
    AttemptRow,
    Candidate,
    Claim,
    Completion,
    DirectLeases,
    Exclusions,
    JobFilter,
    JobRecord,
    JobRow,
    JobStatus,
    LeasedForFailure,
    LimitKind,
    NewJob,
)
from coordinator.store.base import StoreBase, driver_sql, wake_payload
from coordinator.store.pauses import (
    JOB_PAUSE_KINDS,
    LANE_PAUSE_KINDS,
    LIMIT_GATE,
    LIMIT_GATE_SHARE_SQL,
    pause_blocks,
)
from coordinator.store.schema import concurrency_limits, job_attempts, jobs, lanes

log = logging.getLogger(__name__)

_NEW_JOB_FIELDS = tuple(f.name for f in dataclasses.fields(NewJob))
# The conflict target of the partial unique index on (tenant, idempotency key).
_SKIP_STORED_KEYS = (
    "ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING "
)
# Rounds of insert-then-read before giving up on a key whose stored job keeps
# being deleted between the two (retention removing it, say).
_DEDUP_ROUNDS = 3
# Up to this many jobs go in one INSERT statement; larger batches use COPY.
_SMALL_BATCH = 64
# One VALUES row of a NewJob, each value cast to its column's type (a VALUES
# list feeding INSERT ... SELECT does not take types from the target table).
_TYPED_PLACEHOLDERS = tuple(
    f"CAST(%({f}_N)s AS {jobs.c[f].type.compile(dialect=postgresql.dialect())})"
    for f in _NEW_JOB_FIELDS
)


@functools.lru_cache(maxsize=2 * _SMALL_BATCH)
def _insert_small_sql(rows: int, keyed: bool) -> str:
    """The statement of ``_insert_small`` for ``rows`` jobs, built once per shape.

    With ``keyed``, rows whose (tenant, idempotency key) is already stored are
    skipped by the unique index itself (``ON CONFLICT DO NOTHING``).
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
        f"SELECT {', '.join('v.' + f for f in _NEW_JOB_FIELDS)}, "
        f"CASE WHEN {leased_when} THEN {JobStatus.RUNNING:d} ELSE {JobStatus.PENDING:d} END, "
        f"CASE WHEN {leased_when} THEN 1 ELSE 0 END, "
        f"CASE WHEN {leased_when} THEN v.owner END, "
        f"CASE WHEN {leased_when} THEN %(token)s END, "
        f"CASE WHEN {leased_when} THEN %(now)s END, "
        f"CASE WHEN {leased_when} THEN %(now)s + COALESCE(v.heartbeat_timeout_ms, "
        "%(lease_ms)s) * 1000 END "
        f"FROM (VALUES {', '.join(_values_row(i) for i in range(rows))}) "
        f"AS v({cols}, owner) "
        f"{_SKIP_STORED_KEYS if keyed else ''}"
        "RETURNING id, status) "
        "SELECT pg_notify('wfj_wake', %(due)s), ins.id, ins.status FROM ins"
    )
    return driver_sql(sql)


@functools.lru_cache(maxsize=8)
def _claim_fair_sql(scoped: bool, default_lease_ms: int) -> str:
    """The statement of ``job_claim_fair``, built once per shape."""
    sql = f"""
        WITH cand AS (
            SELECT j.id, j.tenant_id, j.priority, j.due_at
            FROM wfj_lanes l
            CROSS JOIN LATERAL (
                SELECT x.id, x.tenant_id, x.priority, x.due_at FROM wfj_jobs x
                WHERE x.tenant_id = l.tenant_id AND x.job_type = l.job_type
                  AND x.definition_id = l.definition_id
                  AND x.status = {JobStatus.PENDING:d} AND x.due_at <= :now
                  AND NOT {pause_blocks("x", JOB_PAUSE_KINDS)}
                ORDER BY x.priority DESC, x.due_at, x.id
                LIMIT :n
            ) j
            WHERE l.job_type = ANY(:types) AND NOT {pause_blocks("l", LANE_PAUSE_KINDS)}
              {"AND l.tenant_id = ANY(:only_tenants)" if scoped else ""}
        ), ranked AS (
            SELECT c.id, c.priority, c.due_at,
                   COALESCE(f.vstart, :floor)
                   + (row_number() OVER w - 1) / COALESCE(f.weight, 1.0) AS vkey
            FROM cand c
            LEFT JOIN unnest(CAST(:f_tenants AS text[]), CAST(:f_starts AS float8[]),
                             CAST(:f_weights AS float8[])) AS f(tenant_id, vstart, weight)
              ON f.tenant_id = c.tenant_id
            WINDOW w AS (PARTITION BY c.tenant_id ORDER BY c.priority DESC, c.due_at, c.id)
        ), picked AS (
            SELECT id, row_number() OVER (ORDER BY vkey, priority DESC, due_at, id) AS pos
            FROM ranked
            ORDER BY vkey, priority DESC, due_at, id
            LIMIT :n
        ), gate AS (
            {LIMIT_GATE_SHARE_SQL}
        ), locked AS (
            SELECT x.id, p.pos FROM wfj_jobs x JOIN picked p ON x.id = p.id
            WHERE x.status + 0 = {JobStatus.PENDING:d} AND x.due_at <= :now
              AND COALESCE((SELECT value FROM gate), '0') = '0'
              AND NOT {pause_blocks("x")}
            FOR UPDATE OF x SKIP LOCKED
        ), done AS (
            UPDATE wfj_jobs AS j
            SET status = {JobStatus.RUNNING:d}, attempt = j.attempt + 1,
                lease_owner = (CAST(:owners AS text[]))[locked.pos],
                lease_token = :token, started_at = :now,
                lease_expires_at = :now + COALESCE(j.heartbeat_timeout_ms, {int(default_lease_ms)}) * 1000
            FROM locked
            WHERE j.id = locked.id
            RETURNING j.*
        )
        SELECT COALESCE((SELECT value FROM gate), '0') AS limits, done.*
        FROM (SELECT 1) AS one LEFT JOIN done ON true
        """
    return driver_sql(sql)


def _values_row(i: int) -> str:
    """VALUES row ``i`` of a NewJob plus its offered owner."""
    cells = [p.replace("_N)s", f"_{i})s") for p in _TYPED_PLACEHOLDERS]
    return "(" + ", ".join(cells) + f", CAST(%(owner_{i})s AS text))"


def _insert_row(job: NewJob) -> dict[str, Any]:
    row = {f: getattr(job, f) for f in _NEW_JOB_FIELDS}
    row["status"] = int(JobStatus.PENDING)
    return row


# The job column each concurrency limit kind counts running jobs by.
LIMIT_COLUMNS: dict[int, str] = {
    LimitKind.TENANT: "tenant_id",
    LimitKind.JOB_TYPE: "job_type",
    LimitKind.DEFINITION: "definition_id",
    LimitKind.CONCURRENCY_KEY: "concurrency_key",
}


class _RolledBack(Exception):
    """Raised inside a transaction to undo it on purpose."""


class LimitAdmission(Protocol):
    """What ``job_claim`` needs to honour concurrency limits."""

    lock_keys: Sequence[str]
    kinds: Sequence[int]

    def admit(self, running: dict[tuple[int, str], int]) -> Sequence[Claim]:
        """The claims that fit, given RUNNING counts per limited scope."""
        ...


# Called with (job id, error) for a row set aside: left untouched because
# deciding or writing it failed, while the rest of its batch went ahead.
SetAside = Callable[[str, BaseException], None]

# Errors a row's own values cause when written (out of range, refused by a
# constraint, not bindable), as opposed to a database that went away.
ROW_WRITE_ERRORS = (sa.exc.DataError, sa.exc.IntegrityError, OverflowError, ValueError, TypeError)


def _log_set_aside(job_id: str, error: BaseException) -> None:
    log.error("job %s set aside: %s: %s", job_id, type(error).__name__, error)


# The last error of a job whose attempt completed after its cancel was requested.
CANCELLED_AFTER_COMPLETION = (
    "cancelled (the attempt completed after the cancel request; its result is kept)"
)

# Builds the admission of one claim from the concurrency limits as stored
# (rows of wfj_concurrency_limits), read inside the claim's transaction.
AdmissionFor = Callable[[Sequence[Any]], LimitAdmission]

_LEASED_FOR_FAILURE = (
    "id, job_type, attempt, max_attempts, retry_policy, lease_owner, started_at, "
    "cancel_requested, released_attempts"
)


class JobQueries(StoreBase):
    """Queries over ``wfj_jobs``, ``wfj_job_attempts`` and ``wfj_lanes``."""

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(url, **options)
        self._known_lanes: set[tuple[str, str, str]] = set()

    # -- enqueue ---------------------------------------------------------------

    def job_insert_many(
        self,
        new_jobs: Sequence[NewJob],
        direct: DirectLeases | None = None,
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
        Returns ``(job_id, deduplicated, status)`` in input order.
        """
        new_lanes = {(j.tenant_id, j.job_type, j.definition_id) for j in new_jobs}
        new_lanes -= self._known_lanes
        keyed = any(j.idempotency_key for j in new_jobs)
        if self.is_postgres and not new_lanes and len(new_jobs) <= _SMALL_BATCH:
            with self.statement() as conn:
                return self._insert_deduplicated(
                    conn,
                    new_jobs,
                    functools.partial(self._insert_small, conn, direct=direct, keyed=keyed),
                )
        with self.tx() as conn:
            if new_lanes:
                self._lane_upsert(conn, new_lanes)
            if keyed:
                result = self._insert_deduplicated(
                    conn, new_jobs, functools.partial(self._insert_skipping_keys, conn)
                )
            elif self.is_postgres:
                self._copy_in(conn, new_jobs)
                result = [(j.id, False, int(JobStatus.PENDING)) for j in new_jobs]
            else:
                conn.execute(jobs.insert(), [_insert_row(j) for j in new_jobs])
                result = [(j.id, False, int(JobStatus.PENDING)) for j in new_jobs]
            if new_jobs:
                self._notify_wake(conn, [j.due_at for j in new_jobs])
        self._known_lanes |= new_lanes
        return result

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
            if limits is not None:
                admission = limits(self._limits_in_force(conn))
                if admission.kinds:
                    limited = not admission.admit(self._lock_and_count(conn, admission))
            lane = (job.tenant_id, job.job_type, job.definition_id)
            if lane not in self._known_lanes:
                self._lane_upsert(conn, {lane})
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
            held = "paused" if paused else "limit" if limited else None
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
        """A few jobs in one autocommit statement that also sends the wake-up.

        One round trip instead of BEGIN, COPY, NOTIFY and COMMIT: this is the
        path of single enqueues under load, where latency is what counts.
        Jobs offered in ``direct`` are stored leased to their worker unless a
        pause covers them; the insert waits for any pause being committed
        (its lock conflicts with the pause's), so a finished pause is seen.
        With ``keyed``, jobs whose key is stored are skipped.
        Returns the status of each job stored, by id.
        """
        owners = direct.owners if direct is not None else {}
        params: dict[str, Any] = {
            "token": direct.lease_token if direct is not None else None,
            "now": direct.now if direct is not None else 0,
            "lease_ms": direct.default_lease_ms if direct is not None else 0,
            "gate": LIMIT_GATE,
            "due": wake_payload([j.due_at for j in new_jobs]),
        }
        for i, job in enumerate(new_jobs):
            for f in _NEW_JOB_FIELDS:
                params[f"{f}_{i}"] = getattr(job, f)
            params[f"owner_{i}"] = owners.get(job.id)
        sql = _insert_small_sql(len(new_jobs), keyed)
        return {job_id: status for _, job_id, status in conn.exec_driver_sql(sql, params)}

    def _copy_in(self, conn: sa.Connection, new_jobs: Sequence[NewJob]) -> None:
        """Bulk insert with COPY: several times cheaper per row than INSERT."""
        raw = conn.connection.driver_connection
        status = int(JobStatus.PENDING)
        columns = ", ".join((*_NEW_JOB_FIELDS, "status"))
        with raw.cursor() as cur, cur.copy(f"COPY wfj_jobs ({columns}) FROM STDIN") as copy:
            for job in new_jobs:
                copy.write_row((*(getattr(job, f) for f in _NEW_JOB_FIELDS), status))

    def _lane_upsert(self, conn: sa.Connection, new_lanes: set[tuple[str, str, str]]) -> None:
        values = [{"tenant_id": t, "job_type": jt, "definition_id": d} for t, jt, d in new_lanes]
        if self.is_postgres:
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        conn.execute(insert(lanes).on_conflict_do_nothing(), values)

    def _insert_skipping_keys_sql(self) -> Any:
        """INSERT of job rows that skips a row whose (tenant, key) is stored."""
        if self.is_postgres:
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(jobs).on_conflict_do_nothing(
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
    ) -> list[tuple[str, bool, int]]:
        """Store ``new_jobs`` with ``insert`` (which skips stored keys), then
        answer each keyed job with the job its key names.

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
                found = conn.execute(
                    sa.select(jobs.c.idempotency_key, jobs.c.id, jobs.c.status).where(
                        jobs.c.tenant_id == tenant, jobs.c.idempotency_key.in_(key_group)
                    )
                )
                for key, job_id, status in found:
                    stored[(tenant, key)] = (job_id, status)
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

    # -- reads -----------------------------------------------------------------

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
        with self.statement() as conn:
            return list(
                conn.execute(  # type: ignore[arg-type]
                    sa.select(job_attempts)
                    .where(job_attempts.c.job_id == job_id)
                    .order_by(job_attempts.c.number)
                )
            )

    def job_list(self, flt: JobFilter, after_id: str | None, limit: int) -> list[JobRow]:
        """Jobs matching ``flt`` in id order, starting after ``after_id``."""
        query = sa.select(jobs).where(*_filter_clauses(flt)).order_by(jobs.c.id).limit(limit)
        if after_id:
            query = query.where(jobs.c.id > after_id)
        with self.statement() as conn:
            return [JobRecord(*r) for r in conn.execute(query)]

    # -- acquisition -----------------------------------------------------------

    def job_candidates(
        self,
        job_types: Sequence[str],
        per_lane: int,
        now: int,
        exclude: Exclusions | None = None,
        tenants: Collection[str] | None = None,
    ) -> list[Candidate]:
        """Up to ``per_lane`` eligible jobs from each unpaused lane serving ``job_types``.

        Reads without locking; ``job_claim`` re-checks every rule atomically.
        ``exclude`` names scopes whose concurrency limit is full; ``tenants``,
        when given, is the only tenants whose jobs may be returned.
        """
        if tenants is not None and not tenants:
            return []
        ex = exclude or Exclusions()
        params: dict[str, Any] = {
            "now": now,
            "per_lane": per_lane,
            "types": [t for t in job_types if t not in ex.job_types],
            "x_tenants": sorted(ex.tenants),
            "x_definitions": sorted(ex.definitions),
            "x_keys": sorted(ex.concurrency_keys),
            "only_tenants": sorted(tenants or ()),
        }
        if not params["types"]:
            return []
        scoped = tenants is not None
        if self.is_postgres:
            sql = f"""
                SELECT j.id, j.tenant_id, j.priority, j.due_at, j.job_type, j.definition_id,
                       j.concurrency_key
                FROM wfj_lanes l
                CROSS JOIN LATERAL (
                    SELECT id, tenant_id, priority, due_at, job_type, definition_id, concurrency_key
                    FROM wfj_jobs x
                    WHERE x.tenant_id = l.tenant_id AND x.job_type = l.job_type
                      AND x.definition_id = l.definition_id
                      AND x.status = {JobStatus.PENDING:d} AND x.due_at <= :now
                      AND NOT {pause_blocks("x", JOB_PAUSE_KINDS)}
                      AND (x.concurrency_key IS NULL OR NOT x.concurrency_key = ANY(:x_keys))
                    ORDER BY x.priority DESC, x.due_at, x.id
                    LIMIT :per_lane
                ) j
                WHERE l.job_type = ANY(:types) AND NOT {pause_blocks("l", LANE_PAUSE_KINDS)}
                  AND NOT l.tenant_id = ANY(:x_tenants) AND NOT l.definition_id = ANY(:x_definitions)
                  {"AND l.tenant_id = ANY(:only_tenants)" if scoped else ""}
                """
            with self.statement() as conn:
                return [Candidate(*r) for r in conn.exec_driver_sql(driver_sql(sql), params)]
        lane_sql = sa.text(
            f"SELECT tenant_id, job_type, definition_id FROM wfj_lanes l "
            f"WHERE l.job_type IN :types AND NOT {pause_blocks('l', LANE_PAUSE_KINDS)} "
            f"AND l.tenant_id NOT IN :x_tenants AND l.definition_id NOT IN :x_definitions "
            f"{'AND l.tenant_id IN :only_tenants' if scoped else ''}"
        ).bindparams(
            sa.bindparam("types", expanding=True),
            sa.bindparam("x_tenants", expanding=True),
            sa.bindparam("x_definitions", expanding=True),
            *([sa.bindparam("only_tenants", expanding=True)] if scoped else []),
        )
        job_sql = sa.text(
            f"""
            SELECT id, tenant_id, priority, due_at, job_type, definition_id, concurrency_key
            FROM wfj_jobs x INDEXED BY ix_wfj_jobs_ready
            WHERE x.tenant_id = :tenant AND x.job_type = :job_type
              AND x.definition_id = :definition AND x.status = {JobStatus.PENDING:d} AND x.due_at <= :now
              AND NOT {pause_blocks("x", JOB_PAUSE_KINDS)}
              AND (x.concurrency_key IS NULL OR x.concurrency_key NOT IN :x_keys)
            ORDER BY x.priority DESC, x.due_at, x.id
            LIMIT :per_lane
            """
        ).bindparams(sa.bindparam("x_keys", expanding=True))
        out: list[Candidate] = []
        with self.tx() as conn:
            for tenant, job_type, definition in conn.execute(lane_sql, params).all():
                rows = conn.execute(
                    job_sql,
                    {
                        "tenant": tenant,
                        "job_type": job_type,
                        "definition": definition,
                        "now": now,
                        "per_lane": per_lane,
                        "x_keys": params["x_keys"],
                    },
                )
                out.extend(Candidate(*r) for r in rows)
        return out

    def job_claim_fair(
        self,
        job_types: Sequence[str],
        tenants: Collection[str] | None,
        owners: Sequence[str],
        fair: tuple[Sequence[str], Sequence[float], Sequence[float], float],
        lease_token: str,
        now: int,
        default_lease_ms: int,
    ) -> list[JobRow] | None:
        """Pick and lease up to ``len(owners)`` jobs in one statement (PostgreSQL).

        Candidates come from the unpaused lanes as in ``job_candidates``; the
        k-th candidate (from 0) of a tenant ranks at ``start + k / weight``
        with the tenant's start clock and weight from ``fair`` (unknown
        tenants start at its last element), the same rule the engine's fair
        scheduler applies. The picks are re-checked and leased as in
        ``job_claim``; position i goes to ``owners[i]``.

        This path counts no running jobs, so it leases only while no
        concurrency limit is stored: the statement reads the limit gate (see
        ``limit_set``) under a share lock and returns None, leasing nothing,
        when a limit exists (the caller then takes the counting path).
        """
        if tenants is not None and not tenants:
            return []
        fair_tenants, starts, weights, floor = fair
        params = {
            "now": now,
            "n": len(owners),
            "types": list(job_types),
            "only_tenants": sorted(tenants or ()),
            "floor": floor,
            "f_tenants": list(fair_tenants),
            "f_starts": list(starts),
            "f_weights": list(weights),
            "owners": list(owners),
            "token": lease_token,
            "gate": LIMIT_GATE,
        }
        sql = _claim_fair_sql(tenants is not None, int(default_lease_ms))
        with self.statement() as conn:
            rows = conn.exec_driver_sql(sql, params).all()
        if rows and rows[0][0] != "0":
            return None
        return [JobRecord(*r[1:]) for r in rows if r[1] is not None]

    def job_running_counts(
        self, kinds: Sequence[int], conn: sa.Connection | None = None
    ) -> dict[tuple[int, str], int]:
        """RUNNING jobs per (limit kind, scope value) for the given kinds."""
        parts = [
            f"SELECT {int(k)} AS kind, {LIMIT_COLUMNS[k]} AS value, count(*) AS n FROM wfj_jobs "
            f"WHERE status = {JobStatus.RUNNING:d} AND {LIMIT_COLUMNS[k]} IS NOT NULL "
            f"GROUP BY {LIMIT_COLUMNS[k]}"
            for k in kinds
        ]
        if not parts:
            return {}
        sql = sa.text(" UNION ALL ".join(parts))
        if conn is not None:
            return {(k, v): n for k, v, n in conn.execute(sql)}
        with self.tx() as c:
            return {(k, v): n for k, v, n in c.execute(sql)}

    def job_claim(
        self,
        claims: Sequence[Claim],
        lease_token: str,
        now: int,
        default_lease_ms: int,
        limits: AdmissionFor | None = None,
    ) -> list[JobRow]:
        """Lease the claimed jobs that are still eligible; skip the rest.

        Eligibility (pending, due, unpaused) is re-checked in the same
        statement that leases, so a pause committed before this call began is
        always honoured. Rows locked by a concurrent claimer are skipped.
        With ``limits``, the transaction reads the concurrency limits as
        stored (under the limit gate's share lock, so a limit whose setting
        has returned is always seen), builds the admission from them, takes
        the advisory locks of the limited scopes, counts what runs in them and
        leases only what the admission lets through.
        """
        if not claims:
            return []
        if limits is not None:
            with self.tx() as conn:
                admission = limits(self._limits_in_force(conn))
                running = self._lock_and_count(conn, admission)
                admitted = admission.admit(running) if admission.kinds else claims
                return self._claim_in(conn, admitted, lease_token, now, default_lease_ms)
        with self.statement() as conn:
            return self._claim_in(conn, claims, lease_token, now, default_lease_ms)

    def _limits_in_force(self, conn: sa.Connection) -> list[Any]:
        """The stored concurrency limits, read after taking the limit gate's
        share lock: a ``limit_set`` committed before is seen, one in progress
        waits for this transaction."""
        if self.is_postgres:
            conn.execute(sa.text(LIMIT_GATE_SHARE_SQL), {"gate": LIMIT_GATE})
        return list(conn.execute(sa.select(concurrency_limits)))

    def _lock_and_count(
        self, conn: sa.Connection, admission: LimitAdmission
    ) -> dict[tuple[int, str], int]:
        """Take the advisory locks of the admission's limited scopes (sorted,
        so claimers cannot deadlock) and count what runs in them."""
        if not admission.kinds:
            return {}
        if self.is_postgres:
            conn.execute(
                sa.text(
                    "SELECT pg_advisory_xact_lock(hashtext(k)) "
                    "FROM unnest(CAST(:keys AS text[])) AS k ORDER BY k"
                ),
                {"keys": list(admission.lock_keys)},
            )
        return self.job_running_counts(admission.kinds, conn)

    def _claim_in(
        self,
        conn: sa.Connection,
        claims: Sequence[Claim],
        lease_token: str,
        now: int,
        default_lease_ms: int,
    ) -> list[JobRow]:
        if not claims:
            return []
        lease_expr = f"(:now + COALESCE(heartbeat_timeout_ms, {int(default_lease_ms)}) * 1000)"
        if self.is_postgres:
            sql = f"""
                UPDATE wfj_jobs AS j
                SET status = {JobStatus.RUNNING:d}, attempt = j.attempt + 1, lease_owner = c.owner,
                    lease_token = :token, started_at = :now,
                    lease_expires_at = :now + COALESCE(j.heartbeat_timeout_ms, {int(default_lease_ms)}) * 1000
                FROM (
                    SELECT x.id, i.owner FROM wfj_jobs x
                    JOIN unnest(CAST(:ids AS text[]), CAST(:owners AS text[])) AS i(id, owner)
                      ON x.id = i.id
                    WHERE x.status + 0 = {JobStatus.PENDING:d} AND x.due_at <= :now AND NOT {pause_blocks("x")}
                    FOR UPDATE OF x SKIP LOCKED
                ) c
                WHERE j.id = c.id
                RETURNING j.*
                """
            params = {
                "ids": [c.job_id for c in claims],
                "owners": [c.owner for c in claims],
                "token": lease_token,
                "now": now,
            }
            return [JobRecord(*r) for r in conn.exec_driver_sql(driver_sql(sql), params)]
        sql = sa.text(
            f"""
            UPDATE wfj_jobs AS x
            SET status = {JobStatus.RUNNING:d}, attempt = attempt + 1, lease_owner = :owner, lease_token = :token,
                started_at = :now, lease_expires_at = {lease_expr}
            WHERE id = :id AND status = {JobStatus.PENDING:d} AND due_at <= :now
              AND NOT {pause_blocks("x")}
            RETURNING *
            """
        )
        out: list[JobRow] = []
        for c in claims:
            row = conn.execute(
                sql, {"id": c.job_id, "owner": c.owner, "token": lease_token, "now": now}
            ).first()
            if row is not None:
                out.append(JobRecord(*row))
        return out

    # -- outcomes --------------------------------------------------------------

    def job_complete_many(
        self, completions: Sequence[Completion], now: int, *, wake: bool = False
    ) -> dict[str, JobStatus]:
        """Record successful outcomes; returns the new status of each job whose
        lease was still valid.

        A job whose cancel was requested ends CANCELLED even though its attempt
        completed: the guarded write itself decides, so a completion racing a
        cancel request cannot slip through. The attempt is recorded COMPLETED
        and the job keeps the reported result, so nothing is hidden. ``wake``
        tells every replica that running slots were freed (concurrency limits).
        """
        if not completions:
            return {}
        status_sql = (
            f"CASE WHEN cancel_requested THEN {int(JobStatus.CANCELLED)} "
            f"ELSE {int(JobStatus.COMPLETED)} END"
        )
        # A COMPLETED job has no last error: an earlier attempt's failure, a
        # hand-back reason or a cancel before a retry no longer describes it.
        error_sql = "CASE WHEN cancel_requested THEN :cancel_note ELSE NULL END"
        kind_sql = "CASE WHEN cancel_requested THEN 'Cancelled' ELSE NULL END"
        if self.is_postgres:
            sql = f"""
                WITH input AS (
                    SELECT * FROM unnest(CAST(:ids AS text[]), CAST(:tokens AS text[]),
                                         CAST(:results AS bytea[]), CAST(:ctypes AS text[]))
                        AS t(id, token, result, ctype)
                ), done AS (
                    UPDATE wfj_jobs j
                    SET status = {status_sql}, last_error = {error_sql},
                        last_error_kind = {kind_sql}, result = i.result, result_content_type = i.ctype,
                        finished_at = :now, lease_token = NULL, lease_expires_at = NULL
                    FROM input i
                    WHERE j.id = i.id AND j.lease_token = i.token AND j.status + 0 = {JobStatus.RUNNING:d}
                    RETURNING j.id, j.attempt, j.lease_owner, j.started_at, j.status
                ), recorded AS (
                    INSERT INTO wfj_job_attempts
                        (job_id, number, worker_id, started_at, ended_at, outcome)
                    SELECT id, attempt, lease_owner, started_at, :now, {AttemptOutcome.COMPLETED:d} FROM done
                )
                SELECT id, status FROM done
                """
            params = {
                "ids": [c.job_id for c in completions],
                "tokens": [c.lease_token for c in completions],
                "results": [c.result for c in completions],
                "ctypes": [c.content_type for c in completions],
                "now": now,
                "cancel_note": CANCELLED_AFTER_COMPLETION,
            }
            if wake:
                with self.tx() as conn:
                    out = {
                        job_id: JobStatus(status)
                        for job_id, status in conn.exec_driver_sql(driver_sql(sql), params)
                    }
                    if out:
                        self._notify_wake(conn, now)
                    return out
            with self.statement() as conn:
                return {
                    job_id: JobStatus(status)
                    for job_id, status in conn.exec_driver_sql(driver_sql(sql), params)
                }
        update = sa.text(
            f"""
            UPDATE wfj_jobs SET status = {status_sql}, last_error = {error_sql},
                last_error_kind = {kind_sql}, result = :result, result_content_type = :ctype,
                finished_at = :now, lease_token = NULL, lease_expires_at = NULL
            WHERE id = :id AND lease_token = :token AND status = {JobStatus.RUNNING:d}
            RETURNING id, attempt, lease_owner, started_at, status
            """
        )
        applied: dict[str, JobStatus] = {}
        with self.tx() as conn:
            for c in completions:
                row = conn.execute(
                    update,
                    {
                        "id": c.job_id,
                        "token": c.lease_token,
                        "result": c.result,
                        "ctype": c.content_type,
                        "now": now,
                        "cancel_note": CANCELLED_AFTER_COMPLETION,
                    },
                ).first()
                if row is None:
                    continue
                conn.execute(
                    job_attempts.insert(),
                    {
                        "job_id": row.id,
                        "number": row.attempt,
                        "worker_id": row.lease_owner,
                        "started_at": row.started_at,
                        "ended_at": now,
                        "outcome": int(AttemptOutcome.COMPLETED),
                    },
                )
                applied[row.id] = JobStatus(row.status)
        return applied

    def job_end_attempts(
        self,
        refs: Sequence[tuple[str, str]],
        decide: Callable[[LeasedForFailure], AttemptEnd],
        now: int,
        set_aside: SetAside | None = None,
        *,
        wake: bool = False,
    ) -> dict[str, AttemptEnd]:
        """End running attempts named by (job id, lease token) as ``decide`` rules.

        Rows are locked first, so the decision and the write are atomic.
        Returns the applied decisions by job id; missing ids lost their lease
        or were set aside: a row whose decision raises, or whose write the
        database refuses, is left untouched and handed to ``set_aside``
        (logged when it is None) while the other rows are written.
        ``wake`` tells every replica that running slots were freed.
        """
        if not refs:
            return {}
        with self.tx() as conn:
            leased = self._lock_leased(conn, refs)
            ends = self._decide_and_apply(conn, leased, decide, now, set_aside, wake=wake)
        return {e.job_id: e for e in ends}

    def lease_reclaim_expired(
        self,
        decide: Callable[[LeasedForFailure], AttemptEnd],
        now: int,
        limit: int,
        exclude: Collection[str] = (),
        set_aside: SetAside | None = None,
        *,
        wake: bool = False,
    ) -> list[AttemptEnd]:
        """End up to ``limit`` attempts whose lease expired before ``now``.

        Jobs in ``exclude`` (set aside by an earlier run) are skipped; rows
        that fail now are set aside as in ``job_end_attempts``. ``wake`` tells
        every replica that running slots were freed.
        """
        lock = "FOR UPDATE SKIP LOCKED" if self.is_postgres else ""
        skip = "AND id NOT IN :exclude " if exclude else ""
        sql = sa.text(
            f"SELECT {_LEASED_FOR_FAILURE} FROM wfj_jobs "
            f"WHERE status = {JobStatus.RUNNING:d} AND lease_expires_at < :now {skip}"
            f"ORDER BY lease_expires_at LIMIT :limit {lock}"
        )
        params: dict[str, Any] = {"now": now, "limit": limit}
        if exclude:
            sql = sql.bindparams(sa.bindparam("exclude", expanding=True))
            params["exclude"] = list(exclude)
        with self.tx() as conn:
            if self.is_postgres:
                got_lock = conn.execute(
                    sa.text("SELECT pg_try_advisory_xact_lock(hashtext('wfj_lease_reaper'))")
                ).scalar()
                if not got_lock:
                    return []
            leased = [LeasedForFailure(*r) for r in conn.execute(sql, params)]
            return self._decide_and_apply(conn, leased, decide, now, set_aside, wake=wake)

    def lease_next_expiry(self, exclude: Collection[str] = ()) -> int | None:
        """Earliest lease expiry among running jobs not in ``exclude``."""
        sql = sa.text(
            f"SELECT min(lease_expires_at) FROM wfj_jobs WHERE status = {JobStatus.RUNNING:d}"
            + (" AND id NOT IN :exclude" if exclude else "")
        )
        params: dict[str, Any] = {}
        if exclude:
            sql = sql.bindparams(sa.bindparam("exclude", expanding=True))
            params["exclude"] = list(exclude)
        with self.tx() as conn:
            return conn.execute(sql, params).scalar()

    def _decide_and_apply(
        self,
        conn: sa.Connection,
        leased: Sequence[LeasedForFailure],
        decide: Callable[[LeasedForFailure], AttemptEnd],
        now: int,
        set_aside: SetAside | None,
        *,
        wake: bool = False,
    ) -> list[AttemptEnd]:
        """Decide and write each row's end; a row that fails either is set aside.

        The batch is written in one statement under a savepoint; only when the
        database refuses it is it written again row by row, each under its
        own savepoint, so the refused rows are found and the rest still land.
        """
        report = set_aside or _log_set_aside
        rows: list[LeasedForFailure] = []
        ends: list[AttemptEnd] = []
        for row in leased:
            try:
                end = decide(row)
            except Exception as e:  # noqa: BLE001 - one row's data must not fail the batch
                report(row.id, e)
                continue
            rows.append(row)
            ends.append(end)
        if not ends:
            return []
        try:
            with conn.begin_nested():
                self._apply_ends(conn, rows, ends, now, wake=wake)
            return ends
        except ROW_WRITE_ERRORS as e:
            if len(ends) == 1:
                report(ends[0].job_id, e)
                return []
        applied = []
        for end in ends:
            try:
                with conn.begin_nested():
                    self._apply_ends(conn, rows, [end], now, wake=wake)
            except ROW_WRITE_ERRORS as e:
                report(end.job_id, e)
                continue
            applied.append(end)
        return applied

    def _lock_leased(
        self, conn: sa.Connection, refs: Sequence[tuple[str, str]]
    ) -> list[LeasedForFailure]:
        if self.is_postgres:
            sql = sa.text(
                f"""
                SELECT {_LEASED_FOR_FAILURE} FROM wfj_jobs
                WHERE (id, lease_token) IN (
                    SELECT * FROM unnest(CAST(:ids AS text[]), CAST(:tokens AS text[])))
                  AND status + 0 = {JobStatus.RUNNING:d}
                ORDER BY id
                FOR UPDATE
                """
            )
            rows = conn.execute(sql, {"ids": [r[0] for r in refs], "tokens": [r[1] for r in refs]})
            return [LeasedForFailure(*r) for r in rows]
        sql = sa.text(
            f"SELECT {_LEASED_FOR_FAILURE} FROM wfj_jobs "
            f"WHERE id = :id AND lease_token = :token AND status = {JobStatus.RUNNING:d}"
        )
        out = []
        for job_id, token in refs:
            row = conn.execute(sql, {"id": job_id, "token": token}).first()
            if row is not None:
                out.append(LeasedForFailure(*row))
        return out

    def _apply_ends(
        self,
        conn: sa.Connection,
        leased: Sequence[LeasedForFailure],
        ends: Sequence[AttemptEnd],
        now: int,
        *,
        wake: bool = False,
    ) -> None:
        if not ends:
            return
        by_id = {row.id: row for row in leased}
        updates = []
        attempts = []
        for end in ends:
            row = by_id[end.job_id]
            finished = end.new_status != JobStatus.PENDING
            updates.append(
                {
                    "b_id": end.job_id,
                    "b_status": int(end.new_status),
                    "b_due": end.due_at,
                    "b_error": end.error,
                    "b_kind": end.error_kind,
                    "b_result": end.result,
                    "b_rctype": end.result_content_type,
                    "b_payload": end.payload,
                    "b_pctype": end.payload_content_type,
                    "b_refund": 1 if end.refund_attempt else 0,
                    "b_finished": now if finished else None,
                }
            )
            attempts.append(
                {
                    "job_id": end.job_id,
                    "number": row.attempt,
                    "worker_id": row.lease_owner,
                    "started_at": row.started_at,
                    "ended_at": now,
                    "outcome": int(end.outcome),
                    "error": end.error,
                    "error_kind": end.error_kind,
                    "traceback": end.traceback,
                }
            )
        conn.execute(
            sa.text(
                """
                UPDATE wfj_jobs SET
                    status = :b_status,
                    due_at = COALESCE(:b_due, due_at),
                    last_error = COALESCE(:b_error, last_error),
                    last_error_kind = COALESCE(:b_kind, last_error_kind),
                    result = COALESCE(:b_result, result),
                    result_content_type = COALESCE(:b_rctype, result_content_type),
                    payload = COALESCE(:b_payload, payload),
                    content_type = COALESCE(:b_pctype, content_type),
                    -- A released attempt keeps its number in the history (numbers are
                    -- unique per job) and is counted apart, so it does not use up the
                    -- budget; max_attempts stays the configured one.
                    released_attempts = released_attempts + :b_refund,
                    finished_at = :b_finished,
                    lease_token = NULL,
                    lease_expires_at = NULL
                WHERE id = :b_id
                """
            ),
            updates,
        )
        conn.execute(job_attempts.insert(), attempts)
        # Every retry's due time, and "now" when the freed slots may admit
        # a waiting job.
        due = [e.due_at or now for e in ends if e.new_status == JobStatus.PENDING]
        if wake:
            due.append(now)
        if due:
            self._notify_wake(conn, due)

    # -- heartbeats ------------------------------------------------------------

    def lease_held_many(self, refs: Sequence[tuple[str, str]]) -> set[str]:
        """Of (job id, lease token) pairs, the ids whose job is RUNNING under that token."""
        token_of = dict(refs)
        ids = list(token_of)
        held: set[str] = set()
        with self.statement() as conn:
            for i in range(0, len(ids), 1000):
                query = sa.select(jobs.c.id, jobs.c.lease_token).where(
                    jobs.c.id.in_(ids[i : i + 1000]), jobs.c.status == int(JobStatus.RUNNING)
                )
                held.update(
                    job_id for job_id, token in conn.execute(query) if token_of[job_id] == token
                )
        return held

    def lease_extend_many(
        self, refs: Sequence[tuple[str, str]], now: int, default_lease_ms: int
    ) -> list[tuple[str, int, bool]]:
        """Extend still-valid leases; returns (job id, new expiry, cancel requested)."""
        if not refs:
            return []
        if self.is_postgres:
            sql = f"""
                UPDATE wfj_jobs j
                SET lease_expires_at = :now + COALESCE(j.heartbeat_timeout_ms, {int(default_lease_ms)}) * 1000
                FROM unnest(CAST(:ids AS text[]), CAST(:tokens AS text[])) AS i(id, token)
                WHERE j.id = i.id AND j.lease_token = i.token AND j.status + 0 = {JobStatus.RUNNING:d}
                RETURNING j.id, j.lease_expires_at, j.cancel_requested
                """
            params = {"ids": [r[0] for r in refs], "tokens": [r[1] for r in refs], "now": now}
            with self.statement() as conn:
                return [tuple(r) for r in conn.exec_driver_sql(driver_sql(sql), params)]  # type: ignore[misc]
        sql = sa.text(
            f"""
            UPDATE wfj_jobs
            SET lease_expires_at = :now + COALESCE(heartbeat_timeout_ms, {int(default_lease_ms)}) * 1000
            WHERE id = :id AND lease_token = :token AND status = {JobStatus.RUNNING:d}
            RETURNING id, lease_expires_at, cancel_requested
            """
        )
        out = []
        with self.tx() as conn:
            for job_id, token in refs:
                row = conn.execute(sql, {"id": job_id, "token": token, "now": now}).first()
                if row is not None:
                    out.append((row[0], row[1], bool(row[2])))
        return out


def _key_vanished(new_jobs: Sequence[NewJob]) -> StoreUnavailable:
    keys = ", ".join(sorted({repr(j.idempotency_key) for j in new_jobs}))
    return StoreUnavailable(
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
    ):
        if value:
            clauses.append(column == value)
    if flt.category:
        clauses.append(c.category == flt.category)
    if flt.created_after is not None:
        clauses.append(c.created_at >= flt.created_after)
    if flt.created_before is not None:
        clauses.append(c.created_at < flt.created_before)
    if flt.due_after is not None:
        clauses.append(c.due_at >= flt.due_after)
    if flt.due_before is not None:
        clauses.append(c.due_at < flt.due_before)
    return clauses
