"""Named queries for operator views: backlog counts and recent activity."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from coordinator.model import (
    FAILED_OUTCOMES,
    AttemptOutcome,
    Exclusions,
    JobStatus,
)
from coordinator.store.base import Family
from coordinator.store.pauses import JOB_PAUSE_KINDS, LANE_PAUSE_KINDS, pause_blocks
from coordinator.store.rows import BacklogRow, StatusCountRow
from coordinator.store.schema import (
    FINISHED_JOB,
    READY_JOB,
    first_attempt_completed,
    job_attempts,
    jobs,
    ready_job,
)

log = logging.getLogger(__name__)

# PENDING jobs as two parts, each matching a partial index: the ready ones
# (``ix_wfj_jobs_ready``) and those held behind their ordering key
# (``ix_wfj_jobs_ordering_held``; a held job is always PENDING).
_PENDING_PARTS = (sa.text(READY_JOB), sa.text("ordering_held"))


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduledCount:
    """PENDING jobs of a tenant and type not due yet."""

    tenant_id: str
    job_type: str
    n: int


class StatsQueries(Family):
    """Aggregates over ``wfj_jobs`` and ``wfj_job_attempts``."""

    def job_count_by_status(self, tenant_id: str = "", category: int = 0) -> list[StatusCountRow]:
        """(tenant, job type, status, count) rows (of one category when given)."""
        query = sa.select(
            jobs.c.tenant_id, jobs.c.job_type, jobs.c.status, sa.func.count().label("n")
        ).group_by(jobs.c.tenant_id, jobs.c.job_type, jobs.c.status)
        if tenant_id:
            query = query.where(jobs.c.tenant_id == tenant_id)
        if category:
            query = query.where(jobs.c.category == int(category))
        with self.tx() as conn:
            return list(conn.execute(query))

    def job_count_held(self, tenant_id: str = "", category: int = 0) -> int:
        """PENDING jobs held behind an earlier job of their ordering key (of one
        tenant and category when given); they are counted as PENDING too."""
        query = sa.select(sa.func.count()).select_from(jobs).where(sa.text("ordering_held"))
        if tenant_id:
            query = query.where(jobs.c.tenant_id == tenant_id)
        if category:
            query = query.where(jobs.c.category == int(category))
        with self.tx() as conn:
            return int(conn.execute(query).scalar() or 0)

    def job_count_scheduled(
        self, now: int, tenant_id: str = "", category: int = 0
    ) -> list[ScheduledCount]:
        """(tenant, job type, n) of PENDING jobs not due by ``now`` (held ones
        included), each part of the pending set read by its own index."""
        counts: dict[tuple[str, str], int] = {}
        with self.tx() as conn:
            for pending in _PENDING_PARTS:
                query = (
                    sa.select(jobs.c.tenant_id, jobs.c.job_type, sa.func.count().label("n"))
                    .where(pending, jobs.c.due_at > now)
                    .group_by(jobs.c.tenant_id, jobs.c.job_type)
                )
                if tenant_id:
                    query = query.where(jobs.c.tenant_id == tenant_id)
                if category:
                    query = query.where(jobs.c.category == int(category))
                for row in conn.execute(query):
                    key = (row.tenant_id, row.job_type)
                    counts[key] = counts.get(key, 0) + int(row.n)
        return [ScheduledCount(t, j, n) for (t, j), n in sorted(counts.items())]

    def job_oldest_pending_due(
        self, now: int, tenant_id: str = "", category: int = 0
    ) -> int | None:
        """Due time of the oldest job that is due and still PENDING (held ones included)."""
        oldest = []
        for pending in _PENDING_PARTS:
            query = sa.select(sa.func.min(jobs.c.due_at)).where(pending, jobs.c.due_at <= now)
            if tenant_id:
                query = query.where(jobs.c.tenant_id == tenant_id)
            if category:
                query = query.where(jobs.c.category == int(category))
            oldest.append(query.scalar_subquery())
        with self.tx() as conn:
            found = [t for t in conn.execute(sa.select(*oldest)).one() if t is not None]
        return min(found) if found else None

    def job_competing_tenants(self, job_type: str, tenant_id: str, now: int) -> list[str]:
        """The other tenants with a job of ``job_type`` that acquisition could
        start now (pending, due, not held behind its ordering key, not paused),
        in name order: each unpaused lane is probed for one such job, as the
        candidate reads of acquisition find them."""
        sql = sa.text(
            f"""
            SELECT DISTINCT l.tenant_id FROM wfj_lanes l
            WHERE l.job_type = :type AND l.tenant_id <> :tenant
              AND NOT {pause_blocks("l", LANE_PAUSE_KINDS)}
              AND EXISTS (SELECT 1 FROM wfj_jobs x WHERE x.tenant_id = l.tenant_id
                          AND x.job_type = l.job_type AND x.definition_id = l.definition_id
                          AND {ready_job("x")} AND x.due_at <= :now
                          AND NOT {pause_blocks("x", JOB_PAUSE_KINDS)})
            ORDER BY l.tenant_id
            """
        )
        with self.tx() as conn:
            rows = conn.execute(sql, {"type": job_type, "tenant": tenant_id, "now": now})
            return [r.tenant_id for r in rows]

    def job_count_ahead(
        self,
        tenant_id: str,
        priority: int,
        due_at: int,
        job_id: str,
        now: int,
        job_types: Sequence[str] | None = None,
        exclude: Exclusions | None = None,
    ) -> int:
        """Due PENDING jobs of the tenant that acquisition would take before this one.

        Only jobs acquisition would read as candidates count: not held behind
        their ordering key, not paused, of one of ``job_types`` (the types a
        worker serves for the tenant; None: any), outside the scopes of
        ``exclude`` (full concurrency limits, throttled rate limits).
        """
        ex = exclude or Exclusions()
        if job_types is not None:
            job_types = [t for t in job_types if t not in ex.job_types]
            if not job_types:
                return 0
        if tenant_id in ex.tenants:
            return 0
        clauses = [
            "tenant_id = :tenant",
            READY_JOB,
            "due_at <= :now",
            "(priority > :priority OR (priority = :priority "
            "AND (due_at < :due OR (due_at = :due AND id < :id))))",
            f"NOT {pause_blocks('wfj_jobs')}",
        ]
        params: dict[str, Any] = {
            "tenant": tenant_id,
            "now": now,
            "priority": priority,
            "due": due_at,
            "id": job_id,
        }
        # One expanding parameter (a list of job types, definitions, ...) per filter.
        expanding: list[sa.BindParameter[Sequence[str | int]]] = []
        for name, column, values, nullable in (
            ("types", "job_type", job_types, False),
            ("x_types", "job_type", ex.job_types, False),
            ("x_definitions", "definition_id", ex.definitions, False),
            ("x_keys", "concurrency_key", ex.concurrency_keys, True),
            ("x_categories", "category", ex.categories, False),
        ):
            if values is None or (name != "types" and not values):
                continue
            params[name] = sorted(values)
            expanding.append(sa.bindparam(name, expanding=True))
            if name == "types":
                clauses.append(f"{column} IN :{name}")
            elif nullable:
                clauses.append(f"({column} IS NULL OR {column} NOT IN :{name})")
            else:
                clauses.append(f"{column} NOT IN :{name}")
        sql = sa.text(f"SELECT count(*) FROM wfj_jobs WHERE {' AND '.join(clauses)}").bindparams(
            *expanding
        )
        with self.tx() as conn:
            return int(conn.execute(sql, params).scalar() or 0)

    def attempt_outcome_counts(
        self, since: int, category: int = 0, tenant_id: str = ""
    ) -> dict[int, int]:
        """Attempts ended since ``since``, counted by outcome (of jobs of one
        category and of one tenant when given).

        Completed first attempts have no attempt row: they are the jobs that
        ``schema.first_attempt_completed`` describes, finished since ``since``.
        """
        query = (
            sa.select(job_attempts.c.outcome, sa.func.count())
            .where(job_attempts.c.ended_at >= since)
            .group_by(job_attempts.c.outcome)
        )
        # FINISHED_JOB (implied, repeated) lets both planners use ix_wfj_jobs_finished.
        first_completed = sa.select(sa.func.count()).where(
            sa.text(FINISHED_JOB),
            sa.text(first_attempt_completed(jobs.name)),
            jobs.c.finished_at >= since,
        )
        of_jobs = []
        if category:
            of_jobs.append(jobs.c.category == int(category))
        if tenant_id:
            of_jobs.append(jobs.c.tenant_id == tenant_id)
        if of_jobs:
            query = query.where(job_attempts.c.job_id.in_(sa.select(jobs.c.id).where(*of_jobs)))
            first_completed = first_completed.where(*of_jobs)
        with self.tx() as conn:
            counts = {o: n for o, n in conn.execute(query)}
            described = int(conn.execute(first_completed).scalar_one())
        if described:
            completed = int(AttemptOutcome.COMPLETED)
            counts[completed] = counts.get(completed, 0) + described
        return counts

    def job_backlog_by_tenant_type(self, now: int) -> list[BacklogRow]:
        """(tenant, job type, category, count, oldest due time) of PENDING jobs due by ``now``.

        Reads only PENDING rows (through the partial ready index, and the index
        of jobs held behind their ordering key), never the finished ones;
        telemetry caches the answer for several seconds.
        """
        parts = [
            sa.select(jobs.c.tenant_id, jobs.c.job_type, jobs.c.category, jobs.c.due_at).where(
                pending, jobs.c.due_at <= now
            )
            for pending in _PENDING_PARTS
        ]
        rows = sa.union_all(*parts).subquery()
        query = sa.select(
            rows.c.tenant_id,
            rows.c.job_type,
            rows.c.category,
            sa.func.count().label("n"),
            sa.func.min(rows.c.due_at).label("oldest_due_at"),
        ).group_by(rows.c.tenant_id, rows.c.job_type, rows.c.category)
        with self.tx() as conn:
            return list(conn.execute(query))

    def attempt_failure_counts(
        self, since: int, tenant_id: str = "", category: int = 0
    ) -> tuple[int, int]:
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
        if category:
            query = query.where(j.c.category == int(category))
        with self.tx() as conn:
            failed, retried = conn.execute(query).one()
        return int(failed), int(retried)
