"""Named queries of the autoscaling figures (docs/autoscaling.md).

One grouped statement over the PENDING and RUNNING rows of the job types
asked for (``ix_wfj_jobs_ready`` and the leases index keep it off finished
rows): per job type, the jobs a worker could start now (PENDING, due, not
held behind their ordering key, not covered by a pause), those scheduled
later, those a pause holds, those running, and the due time of the oldest
startable one. The pause test is ``pause_blocks``: with no pause in force
its leading uncorrelated EXISTS skips the per-row check.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from coordinator.model import JobStatus, ScalingFigures
from coordinator.store.base import StoreBase
from coordinator.store.pauses import pause_blocks


class ScalingQueries(StoreBase):
    """The backlog figures KEDA and the gauges scale workers by."""

    def job_scaling_figures(
        self, now: int, job_types: Sequence[str] = (), tenant_id: str = "", category: int = 0
    ) -> list[ScalingFigures]:
        """Figures per job type (every type with pending or running jobs when
        ``job_types`` is empty), optionally of one tenant and one category."""
        paused = pause_blocks("x")
        pending = f"x.status = {JobStatus.PENDING:d}"
        ready = f"{pending} AND NOT x.ordering_held AND x.due_at <= :now AND NOT {paused}"
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
        sql = sa.text(
            f"""
            SELECT x.job_type,
                SUM(CASE WHEN {ready} THEN 1 ELSE 0 END) AS ready,
                SUM(CASE WHEN {pending} AND x.due_at > :now AND NOT {paused}
                    THEN 1 ELSE 0 END) AS scheduled,
                SUM(CASE WHEN {pending} AND {paused} THEN 1 ELSE 0 END) AS pause_held,
                SUM(CASE WHEN x.status = {JobStatus.RUNNING:d} THEN 1 ELSE 0 END) AS running,
                MIN(CASE WHEN {ready} THEN x.due_at END) AS oldest_ready_due_at
            FROM wfj_jobs x
            WHERE {" AND ".join(where)}
            GROUP BY x.job_type
            """
        )
        if job_types:
            sql = sql.bindparams(sa.bindparam("types", expanding=True))
        with self.statement() as conn:
            return [
                ScalingFigures(
                    r.job_type,
                    int(r.ready or 0),
                    int(r.scheduled or 0),
                    int(r.pause_held or 0),
                    int(r.running or 0),
                    r.oldest_ready_due_at,
                )
                for r in conn.execute(sql, params)
            ]


__all__ = ["ScalingQueries"]
