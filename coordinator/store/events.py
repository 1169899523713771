"""Named queries over the job event log (``wfj_job_events``).

Design note. Every job state change writes its events in the same
transaction, usually in the same statement (data-modifying CTEs fed by the
``RETURNING`` rows of the change), so an event exists if and only if its
change committed. A log row holds the events of one statement: on
PostgreSQL one row per statement (per ``ord``, below) with one array per
event column, element ``n`` being the statement's n-th event; on SQLite one
row per event. A row costs PostgreSQL a heap tuple, an index entry and their
WAL whatever it holds, so a batch of 100 completions pays that once instead
of 100 times. Readers unnest the rows and page through the events in
``(ord, id, n)`` order:

* ``id`` is an identity column; ``ord`` is the writing transaction's id
  (``pg_current_xact_id()``) on PostgreSQL and 0 on SQLite.
* SQLite has one writer at a time (``BEGIN IMMEDIATE``): ids are committed in
  order, so ``(0, id)`` is commit order and a reader sees every committed row.
* On PostgreSQL ids are drawn before commit, so a later-committing
  transaction can hold a lower id: reading "every id above my cursor" could
  skip it. Readers therefore see only the *released* part of the log: rows
  whose ``ord`` is below the oldest transaction still running
  (``pg_snapshot_xmin(pg_current_snapshot())``). Every transaction below that
  horizon has ended, and every transaction still to write an event has an id
  at or above it, so no event can later appear below the horizon: a reader
  that has read everything below it resumes from its cursor without a gap.
  Transactions of *other databases* of the server are left out of that
  horizon (``HORIZON_SQL``): they never write this log, and a long one (a
  report, a dump) would otherwise hold every watcher back for as long as it
  runs. Only an id positively known to be another database's is left out:
  of the reader's snapshot's running transactions (``pg_snapshot_xip``), those
  that ``pg_stat_activity`` shows as a backend of another database (an id
  whose transaction ended meanwhile, or a session the role may not see,
  counts as this database's), so everything below the horizon that will ever
  commit an event here is visible to the reader.
* Two transactions can change the same job in an order opposite to their
  ids (the older one waited for the younger one's row lock). So that a job's
  events still sort in commit order, a state change sets the job's
  ``event_tx`` to ``GREATEST(event_tx, its transaction id)`` and its events
  take that as ``ord``: a job's later event never sorts before its earlier one.
  A statement writes one row per ``ord`` among its events: one, the
  transaction's own id, unless some jobs carry a younger ``event_tx``
  (theirs go into a row under that ``ord``).

A transaction that stays open holds the horizon back (its events, and any
committed after it started, wait); watchers re-read shortly while events sit
above the horizon. Retention deletes a prefix of the released log, whole
rows, and records where it stopped (``purged through``), so a reader whose
cursor falls before that is told so instead of silently missing events.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from coordinator.model import (
    EVENT_HISTORY_LENGTH,
    WHOLE_ROW,
    EventCursor,
    EventFilter,
    JobEvent,
    JobEventKind,
    JobStatus,
    NewJob,
)
from coordinator.store.base import Family, driver_sql
from coordinator.store.schema import cluster_flags

# The writing transaction's id, as a bigint (PostgreSQL).
XID_SQL = "(pg_current_xact_id()::text::bigint)"

# The release horizon (PostgreSQL; see the design note): the oldest running
# transaction of the current snapshot that is not known to be another
# database's, else the snapshot's next id. ``backend_xid`` is 32-bit; running
# ids differ in their low 32 bits, so those identify them.
HORIZON_SQL = (
    "(SELECT COALESCE((SELECT min(x::text::bigint) FROM pg_snapshot_xip(q.s) AS x "
    "WHERE mod(x::text::bigint, 4294967296) NOT IN (SELECT a.backend_xid::text::bigint "
    "FROM pg_stat_activity a WHERE a.backend_xid IS NOT NULL AND a.datid IS DISTINCT FROM "
    "(SELECT oid FROM pg_database WHERE datname = current_database()) "
    "UNION ALL SELECT p.transaction::text::bigint FROM pg_prepared_xacts p "
    "WHERE p.database <> current_database())), "
    "pg_snapshot_xmax(q.s)::text::bigint) FROM (SELECT pg_current_snapshot() AS s) q)"
)
# What identifies the server's history (PostgreSQL; see ``EventCursor.history``):
# its system identifier and the timeline it writes WAL on (a promoted standby
# keeps the identifier and starts a new timeline).
HISTORY_SQL = (
    "((SELECT system_identifier::text FROM pg_control_system()) || '/' || "
    "substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))"
)
# The next transaction id (PostgreSQL): no cursor handed out has an ``ord`` at or above it.
NEXT_XID_SQL = "(pg_snapshot_xmax(pg_current_snapshot())::text::bigint)"


def history_tag(identity: str) -> str:
    """The ``EventCursor.history`` of a server history (``HISTORY_SQL``'s value)."""
    return hashlib.sha256(identity.encode()).hexdigest()[:EVENT_HISTORY_LENGTH]


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
# What a CTE's RETURNING must give for ``event_ctes`` to read it.
EVENT_SOURCE_COLUMNS = (
    "id",
    "event_tx",
    *REF_COLUMNS,
    "status",
    "attempt",
    "due_at",
    "group_id",
)

# The event columns of a log row, scalars on SQLite and arrays on PostgreSQL.
EVENT_COLUMNS = (
    "kind",
    "created_at",
    "job_id",
    *REF_COLUMNS,
    "status",
    "attempt",
    "due_at",
    "error",
    "error_kind",
    "group_id",
)
# PostgreSQL: each event column's array column and element type.
_ARRAY_COLUMNS = {
    "kind": ("kinds", "smallint"),
    "created_at": ("created_ats", "bigint"),
    "job_id": ("job_ids", "text"),
    "tenant_id": ("tenant_ids", "text"),
    "job_type": ("job_types", "text"),
    "definition_id": ("definition_ids", "text"),
    "definition_version": ("definition_versions", "integer"),
    "instance_id": ("instance_ids", "text"),
    "activity_id": ("activity_ids", "text"),
    "activity_node_id": ("activity_node_ids", "text"),
    "bookmark_id": ("bookmark_ids", "text"),
    "correlation_id": ("correlation_ids", "text"),
    "status": ("statuses", "smallint"),
    "attempt": ("attempts", "integer"),
    "due_at": ("due_ats", "bigint"),
    "error": ("errors", "text"),
    "error_kind": ("error_kinds", "text"),
    "group_id": ("group_ids", "text"),
}
_ROW_INSERT = (
    "INSERT INTO wfj_job_events (ord, created_at, events, "
    + ", ".join(_ARRAY_COLUMNS[c][0] for c in EVENT_COLUMNS)
    + ") "
)
_SQLITE_INSERT_COLUMNS = "ord, " + ", ".join(EVENT_COLUMNS)

# The cluster flag that records the last event cursor retention deleted.
PURGED_THROUGH_FLAG = "events.purged_through"

_MAX_ID = 2**63 - 1

# A filtered page looks through up to this many times its size of events.
_FILTERED_READ_FACTOR = 20


def event_tx_bump(alias: str = "") -> str:
    """The SET expression of ``event_tx`` for a state change (PostgreSQL)."""
    prefix = f"{alias}." if alias else ""
    return f"event_tx = GREATEST({prefix}event_tx, {XID_SQL})"


def event_returning(alias: str) -> str:
    """The RETURNING list ``event_ctes`` reads from a changed row."""
    return ", ".join(f"{alias}.{c}" for c in EVENT_SOURCE_COLUMNS)


def event_ctes(
    source: str,
    kind: str,
    created_at: str,
    *,
    error: str = "NULL",
    error_kind: str = "NULL",
    joins: str = "",
    order: str = "",
    name: str = "ev",
) -> str:
    """A CTE (PostgreSQL) that writes the events of the changed rows of CTE ``source``.

    ``source`` has the columns of ``EVENT_SOURCE_COLUMNS`` (as ``s``); the
    other arguments are SQL expressions over it and ``joins``; ``order``
    gives the events' order within the statement, required when a job has
    several events in it. The events go into one log row per ``event_tx``
    (nearly always one: the transaction's own id; another only for jobs a
    younger transaction changed first), each row's arrays in that order:
    the aggregate reads its input sorted by ``event_tx`` then ``order``.
    Returns ``"{name} AS (...)"``, to place among a WITH's CTEs.
    """
    refs = ", ".join(f"s.{c} AS {c}" for c in REF_COLUMNS)
    # One event per job needs no order (jobs' events are unordered among
    # themselves within a statement): the rows are aggregated as they come.
    sort = f" ORDER BY s.event_tx, {order}" if order else ""
    rows = (
        f"SELECT s.event_tx AS ord, {kind} AS kind, {created_at} AS created_at, "
        f"s.id AS job_id, {refs}, s.status AS status, s.attempt AS attempt, s.due_at AS due_at, "
        f"{error} AS error, {error_kind} AS error_kind, s.group_id AS group_id "
        f"FROM {source} AS s {joins}{sort}"
    )
    aggregated = ", ".join(
        f"array_agg(CAST(r.{c} AS {_ARRAY_COLUMNS[c][1]}))" for c in EVENT_COLUMNS
    )
    return (
        f"{name} AS ({_ROW_INSERT}SELECT r.ord, max(r.created_at), count(*), {aggregated} "
        f"FROM ({rows}) AS r GROUP BY r.ord)"
    )


# The event columns an ENQUEUED event takes from its job as given (``NewJob``
# fields of the same names), and the statement writing them as one log row.
_ENQUEUED_FIELDS = ("id", *REF_COLUMNS, "due_at", "group_id")
_ENQUEUED_VALUES = operator.attrgetter(*_ENQUEUED_FIELDS)
_ENQUEUED_CONSTANTS = {
    "kind": f"{JobEventKind.ENQUEUED:d}",
    "created_at": ":now",
    "status": f"{JobStatus.PENDING:d}",
    "attempt": "0",
    "error": "NULL",
    "error_kind": "NULL",
}


def _enqueued_array(column: str) -> str:
    """The array of ``column`` in the ENQUEUED log row: a parameter, or a constant filled in."""
    element = _ARRAY_COLUMNS[column][1]
    field = "id" if column == "job_id" else column
    if field in _ENQUEUED_FIELDS:
        return f"CAST(:q_{field} AS {element}[])"
    value = _ENQUEUED_CONSTANTS[column]
    return f"array_fill(CAST({value} AS {element}), ARRAY[CAST(:n AS integer)])"


_ENQUEUED_SQL = driver_sql(
    f"{_ROW_INSERT}VALUES ({XID_SQL}, :now, :n, "
    + ", ".join(_enqueued_array(c) for c in EVENT_COLUMNS)
    + ")"
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
    # The page stopped at its size (events or log rows read): read on at once.
    more: bool = False
    # The history the page was read in (``EventCursor.history``; "" on SQLite);
    # every cursor of the page carries it.
    history: str = ""


@dataclass(frozen=True, slots=True)
class EventLogBounds:
    """Where the log stands, for checking a cursor a client brings back."""

    # The current history (``EventCursor.history``; "" on SQLite).
    history: str
    # Watching from here sees only later events (``event_tail``).
    tail: EventCursor
    # No cursor this log handed out is after this one.
    end: EventCursor


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


class EventQueries(Family):
    """Writes events for changed jobs; reads, bounds and purges the log."""

    def record_events(
        self, conn: sa.Connection, entries: Sequence[EventEntry], now: int, *, bump: bool
    ) -> None:
        """Write ``entries`` (in order) from their jobs as this transaction left them.

        ``bump``: the statements that changed the jobs did not set ``event_tx``
        (PostgreSQL), so it is set here.
        """
        if not entries:
            return
        self._events_written(conn)
        if not self.is_postgres:
            refs = ", ".join(REF_COLUMNS)
            conn.execute(
                sa.text(
                    f"INSERT INTO wfj_job_events ({_SQLITE_INSERT_COLUMNS}) "
                    f"SELECT 0, :kind, :now, id, {refs}, status, attempt, due_at, :error, "
                    ":error_kind, group_id FROM wfj_jobs WHERE id = :job_id"
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
            f"c AS ({changed}), "
            + event_ctes(
                "c",
                "e.kind",
                ":now",
                error="e.error",
                error_kind="e.error_kind",
                joins="JOIN e ON e.job_id = s.id",
                order="e.n",
            )
            + " SELECT 1"
        )
        conn.exec_driver_sql(driver_sql(sql), {**_entries_params(entries), "now": now})

    def record_enqueued(self, conn: sa.Connection, new_jobs: Sequence[NewJob], now: int) -> None:
        """Write ENQUEUED, at ``now``, for ``new_jobs``, stored PENDING by this transaction.

        On PostgreSQL the log row is built from the jobs' own values (every
        column an event copies is the job's as given; status PENDING, attempt
        0, ``ord`` the transaction's id, which a new row's ``event_tx`` is by
        default), so the rows just stored are not read back.
        """
        if not new_jobs:
            return
        if not self.is_postgres:
            self.record_events(
                conn, [EventEntry(j.id, JobEventKind.ENQUEUED) for j in new_jobs], now, bump=False
            )
            return
        self._events_written(conn)
        params: dict[str, Any] = {"now": now, "n": len(new_jobs)}
        for name, column in zip(
            _ENQUEUED_FIELDS, zip(*map(_ENQUEUED_VALUES, new_jobs), strict=True), strict=True
        ):
            params[f"q_{name}"] = list(column)
        conn.exec_driver_sql(_ENQUEUED_SQL, params)

    def event_read(self, flt: EventFilter, after: EventCursor | None, limit: int) -> EventPage:
        """Up to ``limit`` released events matching ``flt`` after ``after``, in order.

        ``after`` None reads from the oldest event kept.

        Raises:
            EventsPurged: retention deleted events after ``after``.
        """
        start = after or EventCursor(0, 0)
        params: dict[str, Any] = {"o": start.ord, "i": start.id, "k": start.n, "n": limit}
        clauses: list[str] = []
        # PostgreSQL: the same tests on a row's arrays, to skip rows with no match.
        row_clauses: list[str] = []
        for column, value in (
            ("tenant_id", flt.tenant_id),
            ("definition_id", flt.definition_id),
            ("instance_id", flt.instance_id),
            ("correlation_id", flt.correlation_id),
            ("job_type", flt.job_type),
            ("job_id", flt.job_id),
            ("group_id", flt.group_id),
        ):
            if value:
                clauses.append(f"u.{column} = :f_{column}")
                row_clauses.append(f"AND :f_{column} = ANY({_ARRAY_COLUMNS[column][0]}) ")
                params[f"f_{column}"] = value
        if flt.kinds:
            kinds = ", ".join(str(int(k)) for k in flt.kinds)
            clauses.append(f"u.kind IN ({kinds})")
            row_clauses.append(f"AND kinds && CAST(ARRAY[{kinds}] AS smallint[]) ")
        horizon: int | None = None
        history = ""
        with self.tx() as conn:
            if self.is_postgres:
                bounds = conn.exec_driver_sql(f"SELECT {HORIZON_SQL}, {HISTORY_SQL}").one()
                horizon = int(bounds[0])
                history = history_tag(bounds[1])
                params["horizon"] = horizon
                # The rows from the cursor's on that may match, as many as
                # hold the page's budget of events (found by their event
                # counts), then unnested and filtered; an event's cursor is
                # its row's when it is the row's last.
                rows_cte = (
                    "WITH r AS MATERIALIZED (SELECT * FROM (SELECT b.*, "
                    "sum(b.left_) OVER (ORDER BY b.ord, b.id) - b.left_ AS ahead "
                    "FROM (SELECT *, events - CASE WHEN (ord, id) = (:o, :i) THEN :k ELSE 0 END "
                    "AS left_ FROM wfj_job_events WHERE (ord, id) >= (:o, :i) AND ord < :horizon "
                    "AND NOT ((ord, id) = (:o, :i) AND events <= :k) "
                    + "".join(row_clauses)
                    + "ORDER BY ord, id LIMIT :budget) AS b) AS w WHERE w.ahead < :budget) "
                )
                # A filtered read looks through more events per page (only
                # the matching ones come back).
                params["budget"] = limit * (_FILTERED_READ_FACTOR if clauses else 1)
                arrays = ", ".join(f"r.{_ARRAY_COLUMNS[c][0]}" for c in EVENT_COLUMNS)
                page = (
                    f"SELECT r.ord, r.id, CASE WHEN u.pos = r.events THEN {WHOLE_ROW} "
                    "ELSE u.pos END AS n, u.* "
                    f"FROM r CROSS JOIN LATERAL unnest({arrays}) "
                    f"WITH ORDINALITY AS u({', '.join(EVENT_COLUMNS)}, pos) "
                    "WHERE (r.ord, r.id, u.pos) > (:o, :i, :k) "
                    + "".join(f"AND {c} " for c in clauses)
                    + "ORDER BY r.ord, r.id, u.pos LIMIT :n"
                )
                # Where the rows read end, and whether released rows follow.
                rows_read = (
                    "(SELECT ord FROM r ORDER BY ord DESC, id DESC LIMIT 1) AS last_ord, "
                    "(SELECT id FROM r ORDER BY ord DESC, id DESC LIMIT 1) AS last_id, "
                    "EXISTS (SELECT 1 FROM wfj_job_events x, "
                    "(SELECT ord, id FROM r ORDER BY ord DESC, id DESC LIMIT 1) AS l "
                    "WHERE (x.ord, x.id) > (l.ord, l.id) AND x.ord < :horizon) AS rows_follow, "
                )
            else:
                # One event per row: a cursor inside a row is past its event.
                page = (
                    f"SELECT u.ord, u.id, {WHOLE_ROW} AS n, "
                    + ", ".join(f"u.{c}" for c in EVENT_COLUMNS)
                    + " FROM wfj_job_events u WHERE (u.ord, u.id) > (:o, :i) "
                    + "".join(f"AND {c} " for c in clauses)
                    + "ORDER BY u.ord, u.id LIMIT :n"
                )
                rows_cte = ""
                rows_read = "NULL AS last_ord, NULL AS last_id, false AS rows_follow, "
            params["flag"] = PURGED_THROUGH_FLAG
            # One statement, so the purge mark and the page come from one snapshot.
            sql = sa.text(
                rows_cte
                + "SELECT (SELECT value FROM wfj_cluster_flags WHERE name = :flag) AS purged, "
                + rows_read
                + "e.ord AS e_ord, e.id AS e_id, e.n AS e_n, "
                + ", ".join(f"e.{c}" for c in EVENT_COLUMNS)
                + ", j.result, j.result_content_type "
                f"FROM (SELECT 1) AS one LEFT JOIN ({page}) AS e ON true "
                # Only a COMPLETED event reads its job (for the result): the
                # other events probe the key with NULL, which finds nothing.
                "LEFT JOIN wfj_jobs j ON j.id = "
                f"CASE WHEN e.kind = {int(JobEventKind.COMPLETED)} THEN e.job_id END "
                "ORDER BY e.ord, e.id, e.n"
            )
            rows = conn.execute(sql, params).all()
            purged = _parse_flag(rows[0].purged) if rows else None
            if purged is not None and after is not None and after < purged:
                raise EventsPurged(purged)
            events = [_event_of(r, history) for r in rows if r[_EVENT_AT + 1] is not None]
            held_back = False
            if len(events) < limit and horizon is not None:
                held_back = bool(
                    conn.exec_driver_sql(
                        "SELECT EXISTS (SELECT 1 FROM wfj_job_events WHERE ord >= %(h)s)",
                        {"h": horizon},
                    ).scalar()
                )
        if len(events) >= limit:
            return EventPage(events, events[-1].cursor, held_back, more=True, history=history)
        if rows and rows[0].rows_follow:
            # The rows read held fewer (matching) events than ``limit``.
            last_row = EventCursor(int(rows[0].last_ord), int(rows[0].last_id))
            return EventPage(
                events, max(last_row, start).in_history(history), held_back, True, history
            )
        if horizon is not None:
            # Every event below the horizon has been seen.
            scanned = EventCursor(horizon - 1, _MAX_ID, history=history) if horizon > 0 else None
        else:
            scanned = self._newest_cursor()
        if scanned is not None and scanned <= start:
            scanned = None
        return EventPage(events, scanned, held_back, history=history)

    def _newest_cursor(self) -> EventCursor | None:
        with self.statement() as conn:
            row = conn.execute(
                sa.text("SELECT ord, id FROM wfj_job_events ORDER BY ord DESC, id DESC LIMIT 1")
            ).first()
        return EventCursor(int(row.ord), int(row.id)) if row is not None else None

    def event_tail(self) -> EventCursor:
        """Where the released log ends now: watching from here sees only later events."""
        return self.event_bounds().tail

    def event_bounds(self) -> EventLogBounds:
        """The current history, the tail, and the last cursor this log can have handed out."""
        if self.is_postgres:
            with self.statement() as conn:
                row = conn.exec_driver_sql(
                    f"SELECT {HORIZON_SQL}, {HISTORY_SQL}, {NEXT_XID_SQL}"
                ).one()
            history = history_tag(row[1])
            return EventLogBounds(
                history,
                EventCursor(max(int(row[0]) - 1, 0), _MAX_ID, history=history),
                EventCursor(max(int(row[2]) - 1, 0), _MAX_ID, history=history),
            )
        with self.statement() as conn:
            # AUTOINCREMENT: the largest id ever given, even once purged.
            given = conn.execute(
                sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'wfj_job_events'")
            ).scalar()
        tail = self._newest_cursor() or EventCursor(0, 0)
        return EventLogBounds("", tail, max(tail, EventCursor(0, int(given or 0))))

    def event_notify(self) -> None:
        """Tell every replica that job events were committed (PostgreSQL NOTIFY ``wfj_events``)."""
        if self.is_postgres:
            with self.statement() as conn:
                conn.exec_driver_sql("SELECT pg_notify('wfj_events', '')")

    async def event_notify_on_loop(self) -> bool:
        """``event_notify`` sent by the event loop itself (``_run_on_loop``); False
        when loop statements are off and the store's threads must send it."""
        if not self._loop_statements:
            return False
        await self._run_on_loop("SELECT pg_notify('wfj_events', '')", {})
        return True

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

        Deletes a prefix of the log in order, whole rows: it stops at the
        first row holding an event that is younger, or once ``limit`` events
        are deleted (the last row may take it past ``limit``; fewer than
        ``limit`` means the purge is done for now). It records the last
        cursor deleted. On PostgreSQL one replica at a time purges
        (transaction-level advisory lock). Returns the events deleted.
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
                horizon_sql = f"WHERE ord < {HORIZON_SQL} "
            events = "cardinality(job_ids)" if self.is_postgres else "1"
            rows = conn.execute(
                sa.text(
                    f"SELECT ord, id, created_at, {events} AS events FROM wfj_job_events "
                    f"{horizon_sql}"
                    "ORDER BY ord, id LIMIT :n"
                ),
                {"n": limit},
            ).all()
            last: EventCursor | None = None
            count = 0
            for row in rows:
                if row.created_at >= before or count >= limit:
                    break
                last = EventCursor(int(row.ord), int(row.id))
                count += int(row.events)
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


# Enum members by stored number, looked up once per event read.
_KINDS = {int(k): k for k in JobEventKind}
_STATUSES = {int(st): st for st in JobStatus}
# Where a page row's event columns start (after purged, last_ord, last_id, rows_follow).
_EVENT_AT = 4


def _event_of(row: Any, history: str) -> JobEvent:
    """The event of a page row: e_ord, e_id, e_n, ``EVENT_COLUMNS``, result, its content type."""
    v = row[_EVENT_AT:]
    kind = _KINDS[v[3]]
    completed = kind is JobEventKind.COMPLETED
    return JobEvent(
        EventCursor(v[0], v[1], v[2], history),
        kind,
        v[4],
        v[5],
        v[6],
        v[7],
        v[8],
        v[9],
        v[10],
        v[11],
        v[12],
        v[13],
        v[14],
        _STATUSES[v[15]],
        v[16],
        v[17],
        v[18],
        v[19],
        v[21] if completed else None,
        v[22] if completed else None,
        group_id=v[20],
    )


__all__ = [
    "EVENT_SOURCE_COLUMNS",
    "EventEntry",
    "EventLogBounds",
    "EventPage",
    "EventQueries",
    "EventsPurged",
    "event_ctes",
    "event_returning",
    "event_tx_bump",
]
