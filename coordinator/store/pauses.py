"""Named queries over pauses (``wfj_pauses``): create, lift, list, the ones
covering a job. Tenant and category weights and the limits are ``scope_settings.py``.

Pause matching is written once, here: ``PAUSE_COLUMNS`` says which job column
each ``PauseKind`` matches, ``pause_covers`` turns that into SQL, and every
query that honours pauses (acquisition, direct dispatch, inline runs,
``pauses_covering``) is built from it. Adding a pause scope is a new
``PauseKind`` member and its entry in ``PAUSE_COLUMNS`` (a column holding
numbers also goes in ``NUMERIC_COLUMNS``: a pause's value is text, so the job's
value is compared as text).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from coordinator.model import (
    JobRow,
    NewJob,
    PauseKind,
    PauseRecord,
    PauseScope,
)
from coordinator.store.base import Family
from coordinator.store.schema import (
    pauses,
)

log = logging.getLogger(__name__)


# The job column whose value a pause of each kind names; None: the pause holds
# back every job of its tenant (its value is unused). A pause whose tenant is
# empty applies to every tenant.
PAUSE_COLUMNS: dict[PauseKind, str | None] = {
    PauseKind.TENANT: None,
    PauseKind.DEFINITION: "definition_id",
    PauseKind.INSTANCE: "instance_id",
    PauseKind.JOB_TYPE: "job_type",
    # The value is the category's number as text ("3": integration).
    PauseKind.CATEGORY: "category",
}


# Job columns of PAUSE_COLUMNS that hold numbers: compared to a pause's value
# as text (CAST(... AS TEXT) writes an integer in decimal on both dialects).
NUMERIC_COLUMNS = frozenset({"category"})


ALL_PAUSE_KINDS = tuple(PAUSE_COLUMNS)


# Columns a lane (``wfj_lanes``) has: pauses of these kinds are checked once
# per lane during acquisition, the other kinds once per job.
LANE_COLUMNS = frozenset({"tenant_id", "job_type", "definition_id"})


LANE_PAUSE_KINDS = tuple(k for k, c in PAUSE_COLUMNS.items() if c is None or c in LANE_COLUMNS)


JOB_PAUSE_KINDS = tuple(k for k in ALL_PAUSE_KINDS if k not in LANE_PAUSE_KINDS)


# A pause row ``p`` that is in force at ``:now``.
ACTIVE_PAUSE = "p.lifted_at IS NULL AND (p.expires_at IS NULL OR p.expires_at > :now)"


def pause_covers(
    subject: Callable[[str], str], kinds: Sequence[PauseKind] = ALL_PAUSE_KINDS
) -> str:
    """SQL true when pause row ``p`` (of one of ``kinds``) covers a job whose
    column ``c`` is the SQL expression ``subject(c)``."""
    matches = []
    for kind in kinds:
        column = PAUSE_COLUMNS[kind]
        if column is None:
            matches.append(f"p.kind = {int(kind)}")
        elif column in NUMERIC_COLUMNS:
            matches.append(f"(p.kind = {int(kind)} AND p.value = CAST({subject(column)} AS TEXT))")
        else:
            matches.append(f"(p.kind = {int(kind)} AND p.value = {subject(column)})")
    return (
        f"(p.tenant_id = '' OR p.tenant_id = {subject('tenant_id')}) "
        f"AND ({' OR '.join(matches) or '1 = 0'})"
    )


def pause_blocks(alias: str, kinds: Sequence[PauseKind] = ALL_PAUSE_KINDS) -> str:
    """SQL that is true when an active pause of one of ``kinds`` covers the job
    or lane row ``alias`` (a lane: only ``LANE_PAUSE_KINDS``).

    The leading uncorrelated EXISTS is computed once per statement: with no
    such pause in force (the common case) the per-row check is skipped entirely.
    """
    if not kinds:
        return "(1 = 0)"
    of_kinds = (
        ""
        if kinds == ALL_PAUSE_KINDS
        else f"kind IN ({', '.join(str(int(k)) for k in kinds)}) AND "
    )
    return (
        f"(EXISTS (SELECT 1 FROM wfj_pauses WHERE {of_kinds}lifted_at IS NULL) "
        f"AND EXISTS (SELECT 1 FROM wfj_pauses p WHERE {ACTIVE_PAUSE} "
        f"AND {pause_covers(lambda column: f'{alias}.{column}', kinds)}))"
    )


_p = pauses.alias("p")


def _active(now: int) -> Any:
    return sa.text(ACTIVE_PAUSE).bindparams(now=now)


class PauseQueries(Family):
    """Queries over ``wfj_pauses``."""

    def pause_create(
        self,
        pause_id: str,
        scope: PauseScope,
        actor: str,
        reason: str,
        expires_at: int | None,
        now: int,
    ) -> PauseRecord:
        """Record a pause.

        On PostgreSQL the transaction also takes a SHARE lock on the jobs
        table: it waits for acquisitions already in flight and holds new ones
        back until commit, so once this returns no acquisition can lease a job
        the pause covers.
        """
        with self.tx() as conn:
            if self.is_postgres:
                conn.execute(sa.text("LOCK TABLE wfj_jobs IN SHARE MODE"))
            conn.execute(
                pauses.insert().values(
                    id=pause_id,
                    kind=int(scope.kind),
                    tenant_id=scope.tenant_id,
                    value=scope.value,
                    actor=actor,
                    reason=reason,
                    created_at=now,
                    expires_at=expires_at,
                )
            )
            if expires_at is not None:
                self._notify_wake(conn, expires_at)
            return _record(conn.execute(sa.select(pauses).where(pauses.c.id == pause_id)).one())

    def pause_lift(self, scope: PauseScope, actor: str, now: int) -> list[PauseRecord]:
        """Lift every active pause on exactly ``scope``; returns the lifted records."""
        where = sa.and_(
            _active(now),
            _p.c.kind == int(scope.kind),
            _p.c.tenant_id == scope.tenant_id,
            _p.c.value == scope.value,
        )
        with self.tx() as conn:
            ids = list(conn.execute(sa.select(_p.c.id).where(where)).scalars())
            if not ids:
                return []
            conn.execute(
                pauses.update().where(pauses.c.id.in_(ids)).values(lifted_at=now, lifted_by=actor)
            )
            self._notify_wake(conn, 0)
            return [_record(r) for r in conn.execute(sa.select(pauses).where(pauses.c.id.in_(ids)))]

    def pause_list(
        self,
        now: int,
        *,
        include_lifted: bool,
        tenant_id: str = "",
        after: tuple[int, str] | None = None,
        limit: int | None = None,
    ) -> list[PauseRecord]:
        """Pauses in (created_at, id) order: in force, or all with
        ``include_lifted``; of ``tenant_id`` (and every tenant's) when given;
        those after ``after`` (a created_at and id), at most ``limit``."""
        query = sa.select(_p).order_by(_p.c.created_at, _p.c.id)
        if not include_lifted:
            query = query.where(_active(now))
        if tenant_id:
            query = query.where(_p.c.tenant_id.in_([tenant_id, ""]))
        if after is not None:
            query = query.where(sa.tuple_(_p.c.created_at, _p.c.id) > sa.tuple_(*after))
        if limit is not None:
            query = query.limit(limit)
        with self.tx() as conn:
            return [_record(r) for r in conn.execute(query)]

    def pause_purge(self, before: int, limit: int) -> int:
        """Delete up to ``limit`` pauses no longer in force since before
        ``before``: lifted before it, or expired before it without a lift.

        The outer DELETE repeats the test on each row as it finds it. A pause
        in force never matches, and a pause that stopped being in force stays
        so (nothing revives a lifted or expired pause), so the purge takes
        nothing an operator still relies on."""
        ended = (
            "(lifted_at IS NOT NULL AND lifted_at < :before) "
            "OR (lifted_at IS NULL AND expires_at IS NOT NULL AND expires_at < :before)"
        )
        sql = sa.text(
            f"DELETE FROM wfj_pauses WHERE id IN (SELECT id FROM wfj_pauses WHERE {ended} "
            f"LIMIT :limit) AND ({ended})"
        )
        if limit <= 0:
            return 0
        with self.tx() as conn:
            return int(conn.execute(sql, {"before": before, "limit": limit}).rowcount or 0)

    def pause_expiries(self, now: int) -> list[int]:
        """The future expiry times of active pauses, earliest first, each once:
        the times a restarted coordinator wakes its dispatcher at."""
        query = (
            sa.select(pauses.c.expires_at)
            .where(pauses.c.lifted_at.is_(None), pauses.c.expires_at > now)
            .distinct()
            .order_by(pauses.c.expires_at)
        )
        with self.tx() as conn:
            return [int(t) for t in conn.execute(query).scalars()]

    def pauses_covering(self, job: NewJob | JobRow, now: int) -> list[PauseRecord]:
        """Active pauses that hold back ``job`` (read: its columns PAUSE_COLUMNS names)."""
        covers = sa.text(f"{ACTIVE_PAUSE} AND {pause_covers(lambda column: ':' + column)}")
        params: dict[str, Any] = {"now": now, "tenant_id": job.tenant_id}
        for column in PAUSE_COLUMNS.values():
            if column is not None:
                value = getattr(job, column)
                params[column] = int(value) if column in NUMERIC_COLUMNS else value
        query = sa.select(_p).where(covers).order_by(_p.c.created_at, _p.c.id)
        with self.tx() as conn:
            return [_record(r) for r in conn.execute(query, params)]


def _record(row: Any) -> PauseRecord:
    return PauseRecord(**row._mapping)
