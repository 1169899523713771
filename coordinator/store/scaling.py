"""Named queries of the backlog figures (docs/autoscaling.md).

One grouped statement over the PENDING and RUNNING rows (of the job types,
tenant and category asked for; ``ix_wfj_jobs_ready`` and the leases index keep
it off finished rows): each row is put in one ``BacklogState`` (running,
paused, not due, held behind its ordering key, else startable) and counted per
tenant, job type, category and, when a limit names those kinds, definition
and concurrency key, so the engine can hold the startable ones against the
free slots of each limited scope (engine/scaling.py). The pause test is
``pause_blocks``: with no pause in force its leading uncorrelated EXISTS skips
the per-row check.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import sqlalchemy as sa

from coordinator.model import BacklogGroup, BacklogState, JobStatus, LimitKind
from coordinator.store.base import Family
from coordinator.store.pauses import pause_blocks


class ScalingQueries(Family):
    """The backlog KEDA, GetStats and the gauges read."""

    def job_backlog_groups(
        self,
        now: int,
        job_types: Sequence[str] = (),
        tenant_id: str = "",
        category: int = 0,
        kinds: Collection[int] = (),
    ) -> list[BacklogGroup]:
        """PENDING and RUNNING jobs counted by state, tenant, job type and
        category (of ``job_types`` when given, of one tenant and one category
        when given), and by definition and concurrency key when ``kinds`` (the
        limited scope kinds) name them."""
        by_definition = int(LimitKind.DEFINITION) in kinds
        by_key = int(LimitKind.CONCURRENCY_KEY) in kinds
        state = (
            f"CASE WHEN x.status = {JobStatus.RUNNING:d} THEN {BacklogState.RUNNING:d} "
            f"WHEN {pause_blocks('x')} THEN {BacklogState.PAUSED:d} "
            f"WHEN x.due_at > :now THEN {BacklogState.SCHEDULED:d} "
            f"WHEN x.ordering_held THEN {BacklogState.ORDERING:d} "
            f"ELSE {BacklogState.STARTABLE:d} END"
        )
        columns = ["tenant_id", "job_type", "category"]
        columns.append("definition_id" if by_definition else "'' AS definition_id")
        columns.append("concurrency_key" if by_key else "NULL AS concurrency_key")
        where = [f"x.status IN ({JobStatus.PENDING:d}, {JobStatus.RUNNING:d})"]
        params: dict[str, object] = {"now": now}
        if job_types:
            where.append("x.job_type IN :types")
            params["types"] = list(job_types)
        if tenant_id:
            where.append("x.tenant_id = :tenant")
            params["tenant"] = tenant_id
        if category:
            where.append("x.category = :category")
            params["category"] = category
        inner = ", ".join(c if " AS " in c else f"x.{c}" for c in columns)
        sql = sa.text(
            f"""
            SELECT tenant_id, job_type, category, definition_id, concurrency_key, state,
                count(*) AS n, MIN(due_at) AS oldest_due_at
            FROM (SELECT {inner}, x.due_at, {state} AS state
                  FROM wfj_jobs x WHERE {" AND ".join(where)}) s
            GROUP BY tenant_id, job_type, category, definition_id, concurrency_key, state
            """
        )
        if job_types:
            sql = sql.bindparams(sa.bindparam("types", expanding=True))
        with self.statement() as conn:
            return [
                BacklogGroup(
                    r.tenant_id,
                    r.job_type,
                    int(r.category),
                    r.definition_id or "",
                    r.concurrency_key,
                    BacklogState(int(r.state)),
                    int(r.n),
                    r.oldest_due_at,
                )
                for r in conn.execute(sql, params)
            ]


__all__ = ["ScalingQueries"]
