"""Named queries over the life of a lease: acquisition, outcomes, heartbeats, expiry.

Writes that end an attempt are guarded: they touch only rows still RUNNING
under the caller's lease token, and report which rows they changed.

Statements that address jobs by id write ``status + 0 = N`` instead of
``status = N``: the expression does not match the partial indexes' predicates,
so PostgreSQL looks the rows up by primary key. Otherwise it may choose a
bitmap scan of the partial index, which in a busy queue is full of entries for
rows that already moved on (bitmap scans never mark them dead) and costs
milliseconds instead of microseconds. Statuses are written into the SQL as
literals (from ``JobStatus`` members), not bound, for the same reason: a
partial index is used only when its predicate matches a literal.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any

import sqlalchemy as sa

from coordinator.model import (
    JOB_CATEGORIES,
    AttemptEnd,
    AttemptOutcome,
    Candidate,
    Claim,
    Completion,
    Exclusions,
    FairClaim,
    FairSnapshot,
    JobEventKind,
    JobRecord,
    JobRow,
    JobStatus,
    LeasedForFailure,
    RunningDeadline,
    events_of_ended_attempt,
)
from coordinator.store.base import (
    LOOP_COMPLETIONS,
    ROW_WRITE_ERRORS,
    Family,
    StoreCore,
    driver_sql,
)
from coordinator.store.events import (
    EventEntry,
    EventQueries,
    event_ctes,
    event_returning,
    event_tx_bump,
)
from coordinator.store.job_end import Ended, JobEnd
from coordinator.store.ordering import key_locks_sql, ordering_allows
from coordinator.store.pauses import JOB_PAUSE_KINDS, LANE_PAUSE_KINDS, pause_blocks
from coordinator.store.schema import (
    first_attempt_completed,
    job_attempts,
    jobs,
    ready_job,
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


@functools.lru_cache(maxsize=8)
def _claim_fair_sql(scoped: bool, default_lease_ms: int) -> str:
    """The statement of ``job_claim_fair``, built once per shape.

    Each pick carries the heap address (``ctid``) its candidate was read at,
    and is locked and leased there (a TID scan) instead of through two more
    primary-key descents. A row another transaction changed since is
    re-checked on its newest version by the lock (``status + 0 = PENDING``
    and the rest of ``locked``'s rules), as when it was found by id.
    """
    sql = f"""
        WITH cand AS (
            SELECT j.id, j.tid, j.tenant_id, j.category, j.priority, j.due_at
            FROM wfj_lanes l
            CROSS JOIN unnest(CAST(:categories AS smallint[])) AS k(category)
            CROSS JOIN LATERAL (
                SELECT x.id, x.ctid AS tid, x.tenant_id, x.category, x.priority, x.due_at
                FROM wfj_jobs x
                WHERE x.tenant_id = l.tenant_id AND x.job_type = l.job_type
                  AND x.definition_id = l.definition_id AND x.category = k.category
                  AND {ready_job("x")} AND x.due_at <= :now
                  AND NOT {pause_blocks("x", JOB_PAUSE_KINDS)}
                ORDER BY x.priority DESC, x.due_at, x.id
                LIMIT :n
            ) j
            WHERE l.job_type = ANY(:types) AND NOT {pause_blocks("l", LANE_PAUSE_KINDS)}
              {"AND l.tenant_id = ANY(:only_tenants)" if scoped else ""}
        ), in_tenant AS (
            SELECT c.id, c.tid, c.tenant_id, c.priority, c.due_at,
                   COALESCE(g.vstart, t.cfloor, 0.0)
                   + (row_number() OVER wc - 1) / COALESCE(g.weight, 1.0) AS ckey
            FROM cand c
            LEFT JOIN unnest(CAST(:f_tenants AS text[]), CAST(:f_cfloors AS float8[]))
              AS t(tenant_id, cfloor) ON t.tenant_id = c.tenant_id
            LEFT JOIN unnest(CAST(:c_tenants AS text[]), CAST(:c_categories AS smallint[]),
                             CAST(:c_starts AS float8[]), CAST(:c_weights AS float8[]))
              AS g(tenant_id, category, vstart, weight)
              ON g.tenant_id = c.tenant_id AND g.category = c.category
            WINDOW wc AS (PARTITION BY c.tenant_id, c.category
                          ORDER BY c.priority DESC, c.due_at, c.id)
        ), ranked AS (
            SELECT c.id, c.tid, c.priority, c.due_at,
                   COALESCE(f.vstart, :floor)
                   + (row_number() OVER w - 1) / COALESCE(f.weight, 1.0) AS vkey
            FROM in_tenant c
            LEFT JOIN unnest(CAST(:f_tenants AS text[]), CAST(:f_starts AS float8[]),
                             CAST(:f_weights AS float8[])) AS f(tenant_id, vstart, weight)
              ON f.tenant_id = c.tenant_id
            WINDOW w AS (PARTITION BY c.tenant_id ORDER BY c.ckey, c.priority DESC, c.due_at, c.id)
        ), picked AS (
            SELECT id, tid, row_number() OVER (ORDER BY vkey, priority DESC, due_at, id) AS pos
            FROM ranked
            ORDER BY vkey, priority DESC, due_at, id
            LIMIT :n
        ), gate AS (
            {LIMIT_GATE_SHARE_SQL}
        ), locked AS (
            SELECT x.id, x.ctid AS tid, p.pos FROM wfj_jobs x JOIN picked p ON x.ctid = p.tid
            WHERE x.status + 0 = {JobStatus.PENDING:d} AND x.due_at <= :now
              AND COALESCE((SELECT value FROM gate), '0') = '0'
              AND NOT {pause_blocks("x")} AND {ordering_allows("x")}
            FOR UPDATE OF x SKIP LOCKED
        ), done AS (
            UPDATE wfj_jobs AS j
            SET status = {JobStatus.RUNNING:d}, attempt = j.attempt + 1,
                lease_owner = (CAST(:owners AS text[]))[locked.pos],
                lease_token = :token, started_at = :now,
                lease_expires_at = :now + COALESCE(j.heartbeat_timeout_ms, {int(default_lease_ms)}) * 1000,
                {event_tx_bump("j")}
            FROM locked
            WHERE j.ctid = locked.tid AND j.id = locked.id
            RETURNING j.*
        ), {event_ctes("done", f"{JobEventKind.STARTED:d}", ":now")}
        SELECT COALESCE((SELECT value FROM gate), '0') AS limits,
               (SELECT count(*) FROM picked) AS picked, done.*
        FROM (SELECT 1) AS one LEFT JOIN done ON true
        """
    return driver_sql(sql)


# Called with (job id, error) for a row set aside: left untouched because
# deciding or writing it failed, while the rest of its batch went ahead.
SetAside = Callable[[str, BaseException], None]


def _log_set_aside(job_id: str, error: BaseException) -> None:
    log.error("job %s set aside: %s: %s", job_id, type(error).__name__, error)


class _BatchRefused(Exception):
    """The database refused a value of a batch; its transaction is rolled back."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


# The last error of a job whose attempt completed after its cancel was requested.
CANCELLED_AFTER_COMPLETION = (
    "cancelled (the attempt completed after the cancel request; its result is kept)"
)


_LEASED_FOR_FAILURE = (
    "id, job_type, attempt, max_attempts, retry_policy, lease_owner, started_at, "
    "cancel_requested, released_attempts, tenant_id, ordering_key, group_id"
)


# Longest execution timeout the deadline arithmetic counts (ten years); longer
# stored values mean "never" in practice and would overflow a 64-bit integer.
MAX_TIMEOUT_MS = 10 * 365 * 86_400 * 1000


# The event of each completed attempt: COMPLETED, or CANCELLED when a cancel won.
_COMPLETION_EVENTS_SQL = event_ctes(
    "done",
    f"CASE WHEN s.status = {JobStatus.CANCELLED:d} THEN {JobEventKind.CANCELLED:d} "
    f"ELSE {JobEventKind.COMPLETED:d} END",
    ":now",
    error="s.last_error",
    error_kind="s.last_error_kind",
)


# The lease token a completion leaves on the job row: a first attempt that
# completes its job has no attempt row, so the job row keeps the token of the
# report that completed it (what ``reported_token`` holds for other attempts);
# every other end clears it. Every write guarded by a lease token also
# requires RUNNING, so a token left on a COMPLETED job fences nothing.
_COMPLETED_TOKEN_SQL = "CASE WHEN NOT cancel_requested AND attempt = 1 THEN lease_token END"

# A completed attempt's job: COMPLETED, or CANCELLED when a cancel was requested.
_COMPLETED_STATUS_SQL = (
    f"CASE WHEN cancel_requested THEN {int(JobStatus.CANCELLED)} "
    f"ELSE {int(JobStatus.COMPLETED)} END"
)
# A COMPLETED job has no last error: an earlier attempt's failure, a
# hand-back reason or a cancel before a retry no longer describes it.
_COMPLETED_ERROR_SQL = "CASE WHEN cancel_requested THEN :cancel_note ELSE NULL END"
_COMPLETED_KIND_SQL = "CASE WHEN cancel_requested THEN 'Cancelled' ELSE NULL END"


@functools.lru_cache(maxsize=2)
def _completion_sql(ordered: bool) -> str:
    """The PostgreSQL completion statement (``driver_sql`` text), built once per shape.

    With ``ordered`` false (a statement on its own), jobs with an ordering key
    or a group are skipped (not in the answer); with ``ordered``, the
    completed jobs' keys are locked by the statement, after their rows.
    """
    return driver_sql(
        f"""
        WITH input AS (
            SELECT * FROM unnest(CAST(:ids AS text[]), CAST(:tokens AS text[]),
                                 CAST(:results AS bytea[]), CAST(:ctypes AS text[]))
                AS t(id, token, result, ctype)
        ), done AS (
            UPDATE wfj_jobs j
            SET status = {_COMPLETED_STATUS_SQL}, last_error = {_COMPLETED_ERROR_SQL},
                last_error_kind = {_COMPLETED_KIND_SQL}, result = i.result,
                result_content_type = i.ctype, finished_at = :now,
                lease_token = {_COMPLETED_TOKEN_SQL}, lease_expires_at = NULL,
                {event_tx_bump("j")}
            FROM input i
            WHERE j.id = i.id AND j.lease_token = i.token AND j.status + 0 = {JobStatus.RUNNING:d}
              {"" if ordered else "AND j.ordering_key IS NULL AND j.group_id IS NULL"}
            RETURNING {event_returning("j")}, j.lease_owner, j.started_at,
                j.last_error, j.last_error_kind, i.token, j.ordering_key
        ), recorded AS (
            INSERT INTO wfj_job_attempts
                (job_id, number, worker_id, started_at, ended_at, outcome, reported_token)
            SELECT id, attempt, lease_owner, started_at, :now, {AttemptOutcome.COMPLETED:d}, token
            FROM done WHERE NOT {first_attempt_completed()}
        ), {_COMPLETION_EVENTS_SQL}
        {f", lk AS ({key_locks_sql('done')})" if ordered else ""}
        SELECT id, status, tenant_id, ordering_key, group_id
            {", (SELECT count(*) FROM lk)" if ordered else ""} FROM done
        """
    )


def _completion_params(completions: Sequence[Completion], now: int) -> dict[str, Any]:
    # In id order: the statement locks the rows in the order it is given them
    # (its plan walks the arrays), and every statement writing several leased
    # rows locks them in id order, so two naming the same rows cannot deadlock.
    completions = sorted(completions, key=lambda c: c.job_id)
    return {
        "ids": [c.job_id for c in completions],
        "tokens": [c.lease_token for c in completions],
        "results": [c.result for c in completions],
        "ctypes": [c.content_type for c in completions],
        "now": now,
        "cancel_note": CANCELLED_AFTER_COMPLETION,
    }


def _completion_event(row: Any) -> EventEntry:
    if row.status == JobStatus.CANCELLED:
        return EventEntry(row.id, JobEventKind.CANCELLED, row.last_error, row.last_error_kind)
    return EventEntry(row.id, JobEventKind.COMPLETED)


class LeaseQueries(Family):
    """Queries that lease jobs, end attempts and keep leases alive."""

    def __init__(
        self,
        core: StoreCore,
        events: EventQueries,
        settings: ScopeSettingQueries,
        job_end: JobEnd,
    ) -> None:
        super().__init__(core)
        self._record_events = events.record_events
        # Admit a claim under the limits in force, and charge its rate buckets.
        self._admit_in: AdmitIn = settings.admit_in
        self._rate_buckets_write: BucketsWrite = settings.rate_buckets_write
        self._jobs_ended = job_end.jobs_ended
        # Completion statements on the event loop's connections now (``job_complete_on_loop``).
        self._completing_on_loop = 0

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
            "x_categories": sorted(ex.categories),
            "only_tenants": sorted(tenants or ()),
            "categories": [c for c in JOB_CATEGORIES if c not in ex.categories],
        }
        if not params["types"] or not params["categories"]:
            return []
        scoped = tenants is not None
        if self.is_postgres:
            sql = f"""
                SELECT j.id, j.tenant_id, j.priority, j.due_at, j.job_type, j.definition_id,
                       j.concurrency_key, j.category
                FROM wfj_lanes l
                CROSS JOIN unnest(CAST(:categories AS smallint[])) AS k(category)
                CROSS JOIN LATERAL (
                    SELECT id, tenant_id, priority, due_at, job_type, definition_id, concurrency_key,
                           category
                    FROM wfj_jobs x
                    WHERE x.tenant_id = l.tenant_id AND x.job_type = l.job_type
                      AND x.definition_id = l.definition_id AND x.category = k.category
                      AND {ready_job("x")} AND x.due_at <= :now
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
            SELECT id, tenant_id, priority, due_at, job_type, definition_id, concurrency_key,
                   category
            FROM wfj_jobs x INDEXED BY ix_wfj_jobs_ready
            WHERE x.tenant_id = :tenant AND x.job_type = :job_type
              AND x.definition_id = :definition AND x.category = :category
              AND {ready_job("x")} AND x.due_at <= :now
              AND NOT {pause_blocks("x", JOB_PAUSE_KINDS)}
              AND (x.concurrency_key IS NULL OR x.concurrency_key NOT IN :x_keys)
            ORDER BY x.priority DESC, x.due_at, x.id
            LIMIT :per_lane
            """
        ).bindparams(sa.bindparam("x_keys", expanding=True))
        out: list[Candidate] = []
        with self.tx() as conn:
            for tenant, job_type, definition in conn.execute(lane_sql, params).all():
                for category in params["categories"]:
                    rows = conn.execute(
                        job_sql,
                        {
                            "tenant": tenant,
                            "job_type": job_type,
                            "definition": definition,
                            "category": category,
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
        fair: FairSnapshot,
        lease_token: str,
        now: int,
        default_lease_ms: int,
    ) -> FairClaim | None:
        """Pick and lease up to ``len(owners)`` jobs in one statement (PostgreSQL).

        Candidates come from the unpaused lanes as in ``job_candidates``.
        Within a tenant, the k-th candidate (from 0) of a category ranks at
        ``category start + k / category weight``; across tenants, the k-th
        candidate of a tenant in that in-tenant order ranks at ``tenant start
        + k / tenant weight``. Clocks and weights come from ``fair`` (a tenant
        not in it starts at ``fair.floor``, a category not in it at its
        tenant's category floor), the same rule the engine's fair scheduler
        applies. The picks are re-checked and leased as in
        ``job_claim``; position i goes to ``owners[i]``.

        This path counts no running jobs, so it leases only while no
        concurrency limit is stored: the statement reads the limit gate (see
        ``limit_set``) under a share lock and returns None, leasing nothing,
        when a limit exists (the caller then takes the counting path).
        The answer counts the picks left unleased (``FairClaim.skipped``).
        """
        if tenants is not None and not tenants:
            return FairClaim([])
        fair = FairSnapshot(*fair)
        params = {
            "now": now,
            "n": len(owners),
            "types": list(job_types),
            "only_tenants": sorted(tenants or ()),
            "categories": list(JOB_CATEGORIES),
            "floor": fair.floor,
            "f_tenants": list(fair.tenants),
            "f_starts": list(fair.starts),
            "f_weights": list(fair.weights),
            "f_cfloors": list(fair.category_floors),
            "c_tenants": list(fair.category_tenants),
            "c_categories": list(fair.categories),
            "c_starts": list(fair.category_starts),
            "c_weights": list(fair.category_weights),
            "owners": list(owners),
            "token": lease_token,
            "gate": LIMIT_GATE,
        }
        sql = _claim_fair_sql(tenants is not None, int(default_lease_ms))
        with self.statement() as conn:
            rows = conn.exec_driver_sql(sql, params).all()
            if len(rows) > 1 or (rows and rows[0][2] is not None):
                self._events_written(conn)
        if rows and rows[0][0] != "0":
            return None
        leased = [JobRecord(*r[2:]) for r in rows if r[2] is not None]
        return FairClaim(leased, int(rows[0][1]) - len(leased) if rows else 0)

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
        leases only what the admission lets through. Rate limits are read
        the same way: their buckets are read under the scopes' advisory locks
        and rewritten, in the same transaction, for the jobs actually leased.
        """
        if not claims:
            return []
        if limits is not None:
            with self.tx() as conn:
                admission, admitted = self._admit_in(conn, limits, claims)
                leased = self._claim_in(conn, admitted, lease_token, now, default_lease_ms)
                if admission.rate_keys:
                    self._rate_buckets_write(conn, admission.charge({r.id for r in leased}))
                return leased
        with self.statement() as conn:
            return self._claim_in(conn, claims, lease_token, now, default_lease_ms)

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
                WITH done AS (
                UPDATE wfj_jobs AS j
                SET status = {JobStatus.RUNNING:d}, attempt = j.attempt + 1, lease_owner = c.owner,
                    lease_token = :token, started_at = :now,
                    lease_expires_at = :now + COALESCE(j.heartbeat_timeout_ms, {int(default_lease_ms)}) * 1000,
                    {event_tx_bump("j")}
                FROM (
                    SELECT x.id, i.owner FROM wfj_jobs x
                    JOIN unnest(CAST(:ids AS text[]), CAST(:owners AS text[])) AS i(id, owner)
                      ON x.id = i.id
                    WHERE x.status + 0 = {JobStatus.PENDING:d} AND x.due_at <= :now AND NOT {pause_blocks("x")}
                      AND {ordering_allows("x")}
                    FOR UPDATE OF x SKIP LOCKED
                ) c
                WHERE j.id = c.id
                RETURNING j.*
                ), {event_ctes("done", f"{JobEventKind.STARTED:d}", ":now")}
                SELECT * FROM done
                """
            params = {
                "ids": [c.job_id for c in claims],
                "owners": [c.owner for c in claims],
                "token": lease_token,
                "now": now,
            }
            leased = [JobRecord(*r) for r in conn.exec_driver_sql(driver_sql(sql), params)]
            if leased:
                self._events_written(conn)
            return leased
        stmt = sa.text(
            f"""
            UPDATE wfj_jobs AS x
            SET status = {JobStatus.RUNNING:d}, attempt = attempt + 1, lease_owner = :owner, lease_token = :token,
                started_at = :now, lease_expires_at = {lease_expr}
            WHERE id = :id AND status = {JobStatus.PENDING:d} AND due_at <= :now
              AND NOT {pause_blocks("x")} AND {ordering_allows("x")}
            RETURNING *
            """
        )
        out: list[JobRow] = []
        for c in claims:
            row = conn.execute(
                stmt, {"id": c.job_id, "owner": c.owner, "token": lease_token, "now": now}
            ).first()
            if row is not None:
                out.append(JobRecord(*row))
        self._record_events(
            conn, [EventEntry(r.id, JobEventKind.STARTED) for r in out], now, bump=False
        )
        return out

    async def job_complete_on_loop(
        self, completions: Sequence[Completion], now: int
    ) -> dict[str, JobStatus] | None:
        """``job_complete_many`` of plain jobs on the event loop (``_run_on_loop``),
        or None when completions take the store's threads (SQLite,
        ``WFJOBS_STORE_ON_LOOP=0``, or ``LOOP_COMPLETIONS`` completions already
        on the loop).

        One autocommit statement, the one ``job_complete_many`` sends first on
        the threads: jobs with an ordering key or a group are skipped (their
        end needs a transaction, ``job_end.jobs_ended``) and left out of the
        answer, like leases no longer valid. A value the database refuses
        raises ``InvalidArgument`` and changes nothing; the threads' path then
        sets that completion aside and writes its neighbours.
        """
        if (
            not self._loop_statements
            or not completions
            or self._completing_on_loop >= LOOP_COMPLETIONS
        ):
            return None
        self._completing_on_loop += 1
        try:
            rows = await self._run_on_loop(
                _completion_sql(False), _completion_params(completions, now)
            )
        finally:
            self._completing_on_loop -= 1
        out = {row[0]: JobStatus(row[1]) for row in rows}
        self._after_commit(bool(out))
        return out

    def job_complete_many(
        self,
        completions: Sequence[Completion],
        now: int,
        *,
        wake: bool = False,
        set_aside: SetAside | None = None,
        plain_tried: bool = False,
    ) -> dict[str, JobStatus]:
        """Record successful outcomes; returns the new status of each job whose
        lease was still valid.

        A job whose cancel was requested ends CANCELLED even though its attempt
        completed: the guarded write itself decides, so a completion racing a
        cancel request cannot slip through. The attempt is recorded COMPLETED
        and the job keeps the reported result, so nothing is hidden. A first
        attempt that completes its job writes no attempt row: the job row is
        its record (``schema.first_attempt_completed``). ``wake``
        tells every replica that running slots were freed (concurrency limits).

        A completion whose write the database refuses (a value it cannot
        store) changes nothing and is handed to ``set_aside`` (logged when it
        is None); the others are written. The batch is written at once; only
        when the database refuses it is it written again one completion at a
        time, each under its own savepoint. ``plain_tried``: these completions
        were just tried by ``job_complete_on_loop`` (its statement is not sent
        again).
        """
        if not completions:
            return {}
        out: dict[str, JobStatus] = {}
        try:
            if wake or not self.is_postgres or plain_tried:
                return self._complete_in_tx(completions, now, wake)
            with self.statement() as conn:
                # Jobs with an ordering key or a group are left to a
                # transaction whose job end follows (``job_end.jobs_ended``).
                out = self._complete_refusable(conn, completions, now, ordered=False)
            rest = [c for c in completions if c.job_id not in out]
            if rest:
                out.update(self._complete_in_tx(rest, now, wake))
            return out
        except _BatchRefused as refused:
            completions = [c for c in completions if c.job_id not in out]
            if len(completions) == 1:
                (set_aside or _log_set_aside)(completions[0].job_id, refused.error)
                return out
        applied: dict[str, JobStatus] = dict(out)
        with self.tx() as conn:
            for c in completions:
                try:
                    with conn.begin_nested():
                        applied.update(self._complete_in(conn, [c], now, ordered=True, wake=wake))
                except ROW_WRITE_ERRORS as e:
                    (set_aside or _log_set_aside)(c.job_id, e)
        return applied

    def _complete_in_tx(
        self, completions: Sequence[Completion], now: int, wake: bool
    ) -> dict[str, JobStatus]:
        with self.tx() as conn:
            return self._complete_refusable(conn, completions, now, ordered=True, wake=wake)

    def _complete_refusable(
        self,
        conn: sa.Connection,
        completions: Sequence[Completion],
        now: int,
        *,
        ordered: bool,
        wake: bool = False,
    ) -> dict[str, JobStatus]:
        """``_complete_in``; a value the database refuses ends the transaction."""
        try:
            return self._complete_in(conn, completions, now, ordered=ordered, wake=wake)
        except ROW_WRITE_ERRORS as e:
            raise _BatchRefused(e) from e

    def _complete_in(
        self,
        conn: sa.Connection,
        completions: Sequence[Completion],
        now: int,
        *,
        ordered: bool,
        wake: bool = False,
    ) -> dict[str, JobStatus]:
        """Write the completions; with ``ordered`` false (an autocommit statement),
        jobs with an ordering key or a group are skipped (not in the answer). With
        ``ordered``, the completed jobs' keys are locked by the same statement
        (after their rows), then the job end follows (``job_end.jobs_ended``).
        ``wake`` tells every replica that running slots were freed."""
        if self.is_postgres:
            out: dict[str, JobStatus] = {}
            ended = Ended()
            for job_id, status, tenant_id, ordering_key, group_id, *_ in conn.exec_driver_sql(
                _completion_sql(ordered), _completion_params(completions, now)
            ):
                out[job_id] = JobStatus(status)
                ended.add(tenant_id, ordering_key, group_id)
            if out:
                # The statement wrote the events (``_COMPLETION_EVENTS_SQL``).
                self._events_written(conn)
            self._jobs_ended(conn, ended, now, keys_locked=True, wake=[now] if out and wake else [])
            return out
        update = sa.text(
            f"""
            UPDATE wfj_jobs SET status = {_COMPLETED_STATUS_SQL},
                last_error = {_COMPLETED_ERROR_SQL},
                last_error_kind = {_COMPLETED_KIND_SQL}, result = :result, result_content_type = :ctype,
                finished_at = :now, lease_token = {_COMPLETED_TOKEN_SQL}, lease_expires_at = NULL
            WHERE id = :id AND lease_token = :token AND status = {JobStatus.RUNNING:d}
            RETURNING id, attempt, lease_owner, started_at, status, last_error, last_error_kind,
                tenant_id, ordering_key, group_id
            """
        )
        applied: dict[str, JobStatus] = {}
        events: list[EventEntry] = []
        ended = Ended()
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
            applied[row.id] = JobStatus(row.status)
            events.append(_completion_event(row))
            ended.add(row.tenant_id, row.ordering_key, row.group_id)
            if row.status == JobStatus.COMPLETED and row.attempt == 1:
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
                    "reported_token": c.lease_token,
                },
            )
        self._jobs_ended(conn, ended, now, events=events, wake=[now] if applied and wake else [])
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
        events: list[EventEntry] = []
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
                    "reported_token": end.reported_token,
                }
            )
            for kind in events_of_ended_attempt(end.outcome, end.new_status):
                detail = kind != JobEventKind.RETRY_SCHEDULED
                events.append(
                    EventEntry(
                        end.job_id,
                        kind,
                        end.error if detail else None,
                        end.error_kind if detail else None,
                    )
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
                """
                + (f", {event_tx_bump()}" if self.is_postgres else "")
                + " WHERE id = :b_id"
            ),
            updates,
        )
        conn.execute(job_attempts.insert(), attempts)
        # Every retry's due time, and "now" when the freed slots may admit
        # a waiting job.
        due = [e.due_at or now for e in ends if e.new_status == JobStatus.PENDING]
        if wake:
            due.append(now)
        ended = Ended()
        for e in ends:
            if e.new_status != JobStatus.PENDING:
                row = by_id[e.job_id]
                ended.add(row.tenant_id, row.ordering_key, row.group_id)
        self._jobs_ended(conn, ended, now, events=events, wake=due)

    def attempt_reported_many(self, refs: Sequence[tuple[str, str]]) -> dict[str, int]:
        """Of (job id, lease token) pairs, the outcome of each job's attempt that a
        report under that token ended (see ``reported_token``; for a completed
        first attempt, the token the job row kept), by job id."""
        if not refs:
            return {}
        token_of = dict(refs)
        recorded = sa.select(
            job_attempts.c.job_id, job_attempts.c.reported_token, job_attempts.c.outcome
        ).where(
            job_attempts.c.job_id.in_(list(token_of)),
            job_attempts.c.reported_token.isnot(None),
        )
        # A completed first attempt: the job row keeps its report's token.
        described = sa.select(
            jobs.c.id,
            jobs.c.lease_token,
            sa.literal(int(AttemptOutcome.COMPLETED), sa.SmallInteger),
        ).where(
            jobs.c.id.in_(list(token_of)),
            sa.text(first_attempt_completed(jobs.name)),
            jobs.c.lease_token.isnot(None),
        )
        query = sa.union_all(recorded, described)
        with self.statement() as conn:
            return {
                job_id: int(outcome)
                for job_id, token, outcome in conn.execute(query)
                if token_of[job_id] == token
            }

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
            # In id order, as the completion's (``_completion_params``).
            ordered = sorted(refs)
            params = {
                "ids": [r[0] for r in ordered],
                "tokens": [r[1] for r in ordered],
                "now": now,
            }
            with self.statement() as conn:
                return [tuple(r) for r in conn.exec_driver_sql(driver_sql(sql), params)]
        stmt = sa.text(
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
                row = conn.execute(stmt, {"id": job_id, "token": token, "now": now}).first()
                if row is not None:
                    out.append((row[0], row[1], bool(row[2])))
        return out

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
