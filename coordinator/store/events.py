"""Named queries over the job event log (``wfj_job_events``).

Design note. Every job state change writes its events in the same
transaction, usually in the same statement (a data-modifying CTE fed by the
``RETURNING`` rows of the change), so an event exists if and only if its
change committed. Readers page through the log in ``(ord, id)`` order:

* ``id`` is an identity column; ``ord`` is the writing transaction's id
  (``pg_current_xact_id()``) on PostgreSQL and 0 on SQLite.
* SQLite has one writer at a time (``BEGIN IMMEDIATE``): ids are committed in
  order, so ``(0, id)`` is commit order and a reader sees every committed row.
* On PostgreSQL ids are drawn before commit, so a later-committing
  transaction can hold a lower id: reading "every id above my cursor" could
  skip it. Readers therefore see only the *released* part of the log: events
  whose ``ord`` is below the oldest transaction still running
  (``pg_snapshot_xmin(pg_current_snapshot())``). Every transaction below that
  horizon has ended, and every transaction still to write an event has an id
  at or above it, so no event can later appear below the horizon: a reader
  that has read everything below it resumes from its cursor without a gap.
* Two transactions can change the same job in an order opposite to their
  ids (the older one waited for the younger one's row lock). So that a job's
  events still sort in commit order, a state change sets the job's
  ``event_tx`` to ``GREATEST(event_tx, its transaction id)`` and its events
  take that as ``ord``: a job's later event never sorts before its earlier one.

A transaction that stays open holds the horizon back (its events, and any
committed after it started, wait); watchers re-read shortly while events sit
above the horizon. Retention deletes a prefix of the released log and records
where it stopped (``purged through``), so a reader whose cursor falls before
that is told so instead of silently missing events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from coordinator.model import EventCursor, EventFilter, JobEvent, JobEventKind, JobStatus
from coordinator.store.base import StoreBase, driver_sql
from coordinator.store.schema import cluster_flags

# The writing transaction's id, as a bigint (PostgreSQL).
XID_SQL = "(pg_current_xact_id()::text::bigint)"

# The job columns an event copies (its workflow references).
REF_COLUMNS = (
    "tenant_id",
    "job_type",
    "definition_id",
    "definition_version",
    "instance_id",
    "activity_id",
    "activity_node_id",
    "bookmark_id",
    "correlation_id",
)
# What a CTE's RETURNING must give for ``event_insert_sql`` to read it.
EVENT_SOURCE_COLUMNS = ("id", "event_tx", *REF_COLUMNS, "status", "attempt", "due_at")

_INSERT_COLUMNS = (
    "ord, kind, created_at, job_id, "
    + ", ".join(REF_COLUMNS)
    + ", status, attempt, due_at, error, error_kind"
)

# The cluster flag that records the last event cursor retention deleted.
PURGED_THROUGH_FLAG = "events.purged_through"

_MAX_ID = 2**63 - 1


def event_tx_bump(alias: str = "") -> str:
    """The SET expression of ``event_tx`` for a state change (PostgreSQL)."""
    prefix = f"{alias}." if alias else ""
    return f"event_tx = GREATEST({prefix}event_tx, {XID_SQL})"


def event_returning(alias: str) -> str:
    """The RETURNING list ``event_insert_sql`` reads from a changed row."""
    return ", ".join(f"{alias}.{c}" for c in EVENT_SOURCE_COLUMNS)


def event_insert_sql(
    source: str,
    kind: str,
    created_at: str,
    *,
    error: str = "NULL",
    error_kind: str = "NULL",
    tail: str = "",
) -> str:
    """``INSERT INTO wfj_job_events … SELECT … FROM source`` for a CTE of changed rows.

    ``source`` has the columns of ``EVENT_SOURCE_COLUMNS`` (as ``s``); the
    other arguments are SQL expressions over it; ``tail`` adds joins, WHERE
    and ORDER BY (events take ids in that order).
    """
    refs = ", ".join(f"s.{c}" for c in REF_COLUMNS)
    return (
        f"INSERT INTO wfj_job_events ({_INSERT_COLUMNS}) "
        f"SELECT s.event_tx, {kind}, {created_at}, s.id, {refs}, s.status, s.attempt, "
        f"s.due_at, {error}, {error_kind} FROM {source} AS s {tail}"
    )


@dataclass(frozen=True, slots=True)
class EventEntry:
    """One event to write for a job whose row this transaction changed."""

    job_id: str
    kind: JobEventKind
    error: str | None = None
    error_kind: str | None = None


@dataclass(frozen=True, slots=True)
class EventPage:
    """A page of the released log after a cursor."""

    events: list[JobEvent]
    # Everything up to here has been read (a filtered page may end past its
    # last event); None when nothing was released after the cursor.
    scanned_to: EventCursor | None
    # Committed events wait above the release horizon (PostgreSQL): read again soon.
    held_back: bool


class EventsPurged(Exception):
    """The cursor is older than what retention keeps."""

    def __init__(self, purged_through: EventCursor) -> None:
        super().__init__(str(purged_through))
        self.purged_through = purged_through


def _entries_params(entries: Sequence[EventEntry]) -> dict[str, Any]:
    return {
        "e_ids": [e.job_id for e in entries],
        "e_kinds": [int(e.kind) for e in entries],
        "e_errors": [e.error for e in entries],
        "e_error_kinds": [e.error_kind for e in entries],
    }


def _parse_flag(value: str | None) -> EventCursor | None:
    return EventCursor.parse(value) if value else None


class EventQueries(StoreBase):
    """Writes events for changed jobs; reads, bounds and purges the log."""

    def _record_events(
        self, conn: sa.Connection, entries: Sequence[EventEntry], now: int, *, bump: bool
    ) -> None:
        """Write ``entries`` (in order) from their jobs as this transaction left them.

        ``bump``: the statements that changed the jobs did not set ``event_tx``
        (PostgreSQL), so it is set here.
        """
        if not entries:
            return
        self._events_written(conn)
        refs = ", ".join(REF_COLUMNS)
        if not self.is_postgres:
            conn.execute(
                sa.text(
                    f"INSERT INTO wfj_job_events ({_INSERT_COLUMNS}) "
                    f"SELECT 0, :kind, :now, id, {refs}, status, attempt, due_at, :error, "
                    ":error_kind FROM wfj_jobs WHERE id = :job_id"
                ),
                [
                    {
                        "kind": int(e.kind),
                        "now": now,
                        "job_id": e.job_id,
                        "error": e.error,
                        "error_kind": e.error_kind,
                    }
                    for e in entries
                ],
            )
            return
        columns = ", ".join(f"j.{c}" for c in EVENT_SOURCE_COLUMNS)
        if bump:
            changed = (
                f"UPDATE wfj_jobs j SET {event_tx_bump('j')} "
                "WHERE j.id IN (SELECT job_id FROM e) "
                f"RETURNING {columns}"
            )
        else:
            changed = f"SELECT {columns} FROM wfj_jobs j WHERE j.id IN (SELECT job_id FROM e)"
        sql = (
            "WITH e AS (SELECT * FROM unnest(CAST(:e_ids AS text[]), CAST(:e_kinds AS int[]), "
            "CAST(:e_errors AS text[]), CAST(:e_error_kinds AS text[])) WITH ORDINALITY "
            "AS e(job_id, kind, error, error_kind, n)), "
            f"c AS ({changed}) "
            + event_insert_sql(
                "c",
                "e.kind",
                ":now",
                error="e.error",
                error_kind="e.error_kind",
                tail="JOIN e ON e.job_id = s.id ORDER BY e.n",
            )
        )
        conn.exec_driver_sql(driver_sql(sql), {**_entries_params(entries), "now": now})

    def event_read(self, flt: EventFilter, after: EventCursor | None, limit: int) -> EventPage:
        """Up to ``limit`` released events matching ``flt`` after ``after``, in order.

        ``after`` None reads from the oldest event kept.

        Raises:
            EventsPurged: retention deleted events after ``after``.
        """
        start = after or EventCursor(0, 0)
        params: dict[str, Any] = {"o": start.ord, "i": start.id, "n": limit}
        clauses = ["(e.ord, e.id) > (:o, :i)"]
        for column, value in (
            ("tenant_id", flt.tenant_id),
            ("definition_id", flt.definition_id),
            ("instance_id", flt.instance_id),
            ("correlation_id", flt.correlation_id),
            ("job_type", flt.job_type),
            ("job_id", flt.job_id),
        ):
            if value:
                clauses.append(f"e.{column} = :f_{column}")
                params[f"f_{column}"] = value
        if flt.kinds:
            clauses.append(f"e.kind IN ({', '.join(str(int(k)) for k in flt.kinds)})")
        horizon: int | None = None
        with self.tx() as conn:
            if self.is_postgres:
                horizon = int(
                    conn.exec_driver_sql(
                        "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
                    ).scalar_one()
                )
                clauses.append("e.ord < :horizon")
                params["horizon"] = horizon
            params["flag"] = PURGED_THROUGH_FLAG
            # One statement, so the purge mark and the page come from one snapshot.
            sql = sa.text(
                "SELECT (SELECT value FROM wfj_cluster_flags WHERE name = :flag) AS purged, "
                "e.*, j.result, j.result_content_type "
                "FROM (SELECT 1) AS one "
                "LEFT JOIN (SELECT * FROM wfj_job_events e WHERE "
                + " AND ".join(clauses)
                + " ORDER BY e.ord, e.id LIMIT :n) AS e ON true "
                f"LEFT JOIN wfj_jobs j ON e.kind = {int(JobEventKind.COMPLETED)} "
                "AND j.id = e.job_id "
                "ORDER BY e.ord, e.id"
            )
            rows = conn.execute(sql, params).all()
            purged = _parse_flag(rows[0].purged) if rows else None
            if purged is not None and after is not None and after < purged:
                raise EventsPurged(purged)
            events = [_event_of(r) for r in rows if r.id is not None]
            held_back = False
            if len(events) < limit and horizon is not None:
                held_back = bool(
                    conn.exec_driver_sql(
                        "SELECT EXISTS (SELECT 1 FROM wfj_job_events WHERE ord >= %(h)s)",
                        {"h": horizon},
                    ).scalar()
                )
        if len(events) >= limit:
            return EventPage(events, events[-1].cursor, held_back)
        if horizon is not None:
            # Every event below the horizon has been seen.
            scanned = EventCursor(horizon - 1, _MAX_ID) if horizon > 0 else None
        else:
            scanned = self._newest_cursor()
        if scanned is not None and scanned <= start:
            scanned = None
        return EventPage(events, scanned, held_back)

    def _newest_cursor(self) -> EventCursor | None:
        with self.statement() as conn:
            row = conn.execute(
                sa.text("SELECT ord, id FROM wfj_job_events ORDER BY ord DESC, id DESC LIMIT 1")
            ).first()
        return EventCursor(int(row.ord), int(row.id)) if row is not None else None

    def event_tail(self) -> EventCursor:
        """Where the released log ends now: watching from here sees only later events."""
        if self.is_postgres:
            with self.statement() as conn:
                horizon = int(
                    conn.exec_driver_sql(
                        "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
                    ).scalar_one()
                )
            return EventCursor(max(horizon - 1, 0), _MAX_ID)
        return self._newest_cursor() or EventCursor(0, 0)

    def event_notify(self) -> None:
        """Tell every replica that job events were committed (PostgreSQL NOTIFY ``wfj_events``)."""
        if self.is_postgres:
            with self.statement() as conn:
                conn.exec_driver_sql("SELECT pg_notify('wfj_events', '')")

    def event_purged_through(self) -> EventCursor | None:
        """The last cursor retention deleted (events after it are kept); None if none."""
        with self.statement() as conn:
            value = conn.execute(
                sa.text("SELECT value FROM wfj_cluster_flags WHERE name = :flag"),
                {"flag": PURGED_THROUGH_FLAG},
            ).scalar()
        return _parse_flag(value)

    def event_purge(self, before: int, limit: int) -> int:
        """Delete up to ``limit`` of the oldest released events created before ``before``.

        Deletes a prefix of the log in order (it stops at the first event that
        is younger), and records the last cursor deleted. On PostgreSQL one
        replica at a time purges (transaction-level advisory lock).
        """
        if limit <= 0:
            return 0
        with self.tx() as conn:
            horizon_sql = ""
            if self.is_postgres:
                got = conn.execute(
                    sa.text("SELECT pg_try_advisory_xact_lock(hashtext('wfj_event_retention'))")
                ).scalar()
                if not got:
                    return 0
                horizon_sql = "WHERE ord < pg_snapshot_xmin(pg_current_snapshot())::text::bigint "
            rows = conn.execute(
                sa.text(
                    f"SELECT ord, id, created_at FROM wfj_job_events {horizon_sql}"
                    "ORDER BY ord, id LIMIT :n"
                ),
                {"n": limit},
            ).all()
            last: EventCursor | None = None
            count = 0
            for row in rows:
                if row.created_at >= before:
                    break
                last = EventCursor(int(row.ord), int(row.id))
                count += 1
            if last is None:
                return 0
            conn.execute(
                sa.text("DELETE FROM wfj_job_events WHERE (ord, id) <= (:o, :i)"),
                {"o": last.ord, "i": last.id},
            )
            conn.execute(
                self._insert(cluster_flags)
                .values(name=PURGED_THROUGH_FLAG, value=str(last), updated_at=before)
                .on_conflict_do_update(
                    index_elements=["name"],
                    set_={"value": str(last), "updated_at": before},
                )
            )
            return count


def _event_of(row: Any) -> JobEvent:
    completed = row.kind == JobEventKind.COMPLETED
    return JobEvent(
        cursor=EventCursor(int(row.ord), int(row.id)),
        kind=JobEventKind(row.kind),
        created_at=row.created_at,
        job_id=row.job_id,
        tenant_id=row.tenant_id,
        job_type=row.job_type,
        definition_id=row.definition_id,
        definition_version=row.definition_version,
        instance_id=row.instance_id,
        activity_id=row.activity_id,
        activity_node_id=row.activity_node_id,
        bookmark_id=row.bookmark_id,
        correlation_id=row.correlation_id,
        status=JobStatus(row.status),
        attempt=row.attempt,
        due_at=row.due_at,
        error=row.error,
        error_kind=row.error_kind,
        result=row.result if completed else None,
        result_content_type=row.result_content_type if completed else None,
    )


__all__ = [
    "EVENT_SOURCE_COLUMNS",
    "EventEntry",
    "EventPage",
    "EventQueries",
    "EventsPurged",
    "event_insert_sql",
    "event_returning",
    "event_tx_bump",
]
