"""The job event log: every state change writes its events in its own
transaction, and readers see them in commit order without gaps (both stores)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from coordinator.errors import LeaseLost
from coordinator.model import (
    Completion,
    EventCursor,
    EventFilter,
    Failure,
    JobEventKind,
    JobStatus,
    Release,
)
from coordinator.store import open_store
from coordinator.store.events import EventEntry, EventsPurged
from coordinator.store.migrate import MIGRATIONS_DIR, upgrade
from wfj_engine import Harness, run
from wfj_testing import T0, make_job

K = JobEventKind


def _read(store, flt: EventFilter, after: EventCursor | None, limit: int = 10_000):
    """A page read once every committed event is released (PostgreSQL: a transaction
    open in the test's database holds the release horizon back for a moment)."""
    deadline = time.monotonic() + 30
    while True:
        page = store.event_read(flt, after, limit)
        if not page.held_back or time.monotonic() > deadline:
            return page
        time.sleep(0.01)


def _read_all(store, flt: EventFilter, size: int) -> list:
    """Every event matching ``flt``, read in pages of ``size`` as a watcher pages."""
    seen, cursor = [], None
    while True:
        page = _read(store, flt, cursor, size)
        seen.extend(page.events)
        assert len(page.events) <= size
        if not page.more:
            return seen
        cursor = page.scanned_to
        assert cursor is not None


def _log(h: Harness, **flt: object) -> list:
    return _read(h.engine.store, EventFilter(**flt), None).events


def _kinds(h: Harness, job_id: str) -> list[JobEventKind]:
    return [e.kind for e in _log(h, job_id=job_id)]


def test_a_job_s_life_is_enqueued_started_completed(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(
            tenant_id="acme",
            definition_id="order-flow",
            instance_id="wf-42",
            correlation_id="c-7",
            bookmark_id="bm-1",
        )
        [(_, token)] = await h.lease()
        await h.engine.report_one(Completion(job_id, token, b'{"ok":1}', "application/json"))
        events = _log(h, job_id=job_id)
        assert [e.kind for e in events] == [K.ENQUEUED, K.STARTED, K.COMPLETED]
        for e in events:
            assert (e.tenant_id, e.job_type, e.definition_id, e.instance_id) == (
                "acme",
                "noop",
                "order-flow",
                "wf-42",
            )
            assert (e.correlation_id, e.bookmark_id) == ("c-7", "bm-1")
        assert [e.attempt for e in events[1:]] == [1, 1]
        done = events[-1]
        assert done.status == JobStatus.COMPLETED
        assert (done.result, done.result_content_type) == (b'{"ok":1}', "application/json")
        assert events[0].cursor < events[1].cursor < events[2].cursor

    run(store_url, scenario)


def test_failed_attempts_write_the_failure_then_the_job_s_fate(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=2)
        [(_, token)] = await h.lease()
        await h.engine.report_one(Failure(job_id, token, "boom", "ValueError"))
        h.clock.advance(600)
        [(_, token)] = await h.lease()
        await h.engine.report_one(Failure(job_id, token, "boom again", "ValueError"))
        events = _log(h, job_id=job_id)
        assert [e.kind for e in events] == [
            K.ENQUEUED,
            K.STARTED,
            K.ATTEMPT_FAILED,
            K.RETRY_SCHEDULED,
            K.STARTED,
            K.ATTEMPT_FAILED,
            K.FAULTED,
        ]
        assert (events[2].error, events[2].error_kind, events[2].attempt) == (
            "boom",
            "ValueError",
            1,
        )
        assert events[3].status == JobStatus.PENDING and events[3].due_at is not None
        assert (events[6].error, events[6].status) == ("boom again", JobStatus.FAULTED)

    run(store_url, scenario)


def test_operator_actions_releases_and_expiries_write_events(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        pending = await h.enqueue()
        await h.engine.ops.cancel_job(pending, "not needed")
        await h.engine.ops.retry_job(pending, keep_attempts=False)
        assert _kinds(h, pending) == [K.ENQUEUED, K.CANCELLED, K.RETRY_SCHEDULED]
        assert _log(h, job_id=pending)[1].error == "cancelled: not needed"

        [(_, token)] = await h.lease(n=1)
        await h.engine.report_one(Release(pending, token, "shutting down"))
        assert _kinds(h, pending)[-2:] == [K.STARTED, K.RELEASED]

        [(_, token)] = await h.lease(n=1)
        await h.engine.ops.unlock_job(pending)
        assert _kinds(h, pending)[-3:] == [K.STARTED, K.ATTEMPT_FAILED, K.RETRY_SCHEDULED]
        assert _log(h, job_id=pending)[-2].error_kind == "Unlocked"

        expiring = await h.enqueue(heartbeat_timeout_ms=1_000)
        await h.lease(n=2)
        h.clock.advance(5)
        await h.chores.lease_reaper.run_once(h.clock.now_us())
        assert _kinds(h, expiring)[-2:] == [K.ATTEMPT_FAILED, K.RETRY_SCHEDULED]
        assert _log(h, job_id=expiring)[-2].error_kind == "LeaseExpired"

        replay = await h.engine.ops.replay_job(expiring)
        assert _kinds(h, replay.id) == [K.ENQUEUED]

    run(store_url, scenario)


@pytest.mark.parametrize("size", [3, 200])
def test_batches_write_one_enqueued_event_per_stored_job(store_url: str, size: int) -> None:
    async def scenario(h: Harness) -> None:
        jobs = [make_job(idempotency_key=f"k{i % (size - 1)}") for i in range(size)]
        results = await h.engine.enqueue(jobs)
        stored = {job_id for job_id, deduplicated, _ in results if not deduplicated}
        assert len(stored) == size - 1
        events = _log(h, kinds=(K.ENQUEUED,))
        assert sorted(e.job_id for e in events) == sorted(stored)
        # Enqueuing the same keys again stores nothing and writes nothing.
        await h.engine.enqueue([make_job(idempotency_key="k0")])
        assert len(_log(h)) == size - 1

    run(store_url, scenario)


def test_a_bulk_enqueue_s_events_carry_each_stored_job_s_values(store_url: str) -> None:
    """A batch past the single-statement size (COPY on PostgreSQL) writes each
    job's ENQUEUED event with the values the job is stored with."""

    async def scenario(h: Harness) -> None:
        jobs = [
            make_job(
                tenant_id=f"tenant-{i % 3}",
                job_type=f"type-{i % 2}",
                definition_id=f"def-{i % 5}",
                definition_version=i,
                activity_id=f"act-{i}",
                activity_node_id=f"node-{i}",
                bookmark_id=f"bm-{i}",
                correlation_id=f"corr-{i}",
                due_at=T0 + i * 1000,
            )
            for i in range(150)
        ]
        await h.engine.enqueue(jobs)
        events = _log(h, kinds=(K.ENQUEUED,))
        assert sorted(e.job_id for e in events) == sorted(j.id for j in jobs)
        for event in events:
            row = h.engine.store.job_get(event.job_id)
            assert row is not None
            assert (
                event.tenant_id,
                event.job_type,
                event.definition_id,
                event.definition_version,
                event.instance_id,
                event.activity_id,
                event.activity_node_id,
                event.bookmark_id,
                event.correlation_id,
                event.status,
                event.attempt,
                event.due_at,
                event.error,
                event.error_kind,
                event.group_id,
            ) == (
                row.tenant_id,
                row.job_type,
                row.definition_id,
                row.definition_version,
                row.instance_id,
                row.activity_id,
                row.activity_node_id,
                row.bookmark_id,
                row.correlation_id,
                JobStatus.PENDING,
                0,
                row.due_at,
                None,
                None,
                row.group_id,
            )

    run(store_url, scenario)


def test_a_log_row_s_arrays_are_stored_lz4_compressed(store_url: str) -> None:
    """A batch's log row is compressed with lz4 where the server has it (migration 0024)."""
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite's log has one row per event: nothing to compress")

    async def scenario(h: Harness) -> None:
        with h.engine.store.engine.connect() as conn:
            has_lz4 = conn.exec_driver_sql(
                "SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
                "WHERE name = 'default_toast_compression'"
            ).scalar()
        if not has_lz4:
            pytest.skip("this PostgreSQL was built without lz4")
        await h.engine.enqueue([make_job() for _ in range(300)])
        with h.engine.store.engine.connect() as conn:
            methods = conn.exec_driver_sql(
                "SELECT pg_column_compression(job_ids), pg_column_compression(instance_ids) "
                "FROM wfj_job_events ORDER BY ord DESC, id DESC LIMIT 1"
            ).one()
        assert tuple(methods) == ("lz4", "lz4")

    run(store_url, scenario)


def test_a_refused_outcome_writes_no_event(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        await h.lease()
        with pytest.raises(LeaseLost):
            await h.engine.report_one(Completion(job_id, "not-the-token"))
        assert _kinds(h, job_id) == [K.ENQUEUED, K.STARTED]

    run(store_url, scenario)


def test_filters_select_events(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        a = await h.enqueue(tenant_id="a", instance_id="i-1", correlation_id="x")
        b = await h.enqueue(tenant_id="b", instance_id="i-2", job_type="other")
        await h.engine.ops.cancel_job(b, "")
        assert [e.job_id for e in _log(h, tenant_id="a")] == [a]
        assert [e.job_id for e in _log(h, instance_id="i-2")] == [b, b]
        assert [e.job_id for e in _log(h, correlation_id="x")] == [a]
        assert [e.job_id for e in _log(h, job_type="other", kinds=(K.CANCELLED,))] == [b]
        assert _log(h, definition_id="nope") == []

    run(store_url, scenario)


def test_pages_resume_after_their_last_cursor(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        for _ in range(7):
            await h.enqueue()
        store = h.engine.store
        seen = []
        cursor = None
        while True:
            page = _read(store, EventFilter(), cursor, 3)
            seen.extend(page.events)
            if not page.events:
                break
            cursor = page.events[-1].cursor
        assert len(seen) == 7
        assert [e.cursor for e in seen] == sorted(e.cursor for e in seen)
        # The tail is past everything: watching from it sees only later events.
        tail = store.event_tail()
        assert _read(store, EventFilter(), tail).events == []
        late = await h.enqueue()
        assert [e.job_id for e in _read(store, EventFilter(), tail).events] == [late]

    run(store_url, scenario)


def test_retention_purges_a_prefix_and_refuses_older_cursors(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        store = h.engine.store
        old = [await h.enqueue() for _ in range(3)]
        first = _log(h)
        h.clock.advance(3600)
        await h.engine.enqueue([make_job(created_at=h.clock.now_us())])
        assert len(_log(h)) == 4  # released: retention deletes only released events
        assert store.event_purge(T0 + 1, 2) == 2
        assert store.event_purged_through() == first[1].cursor
        assert store.event_purge(T0 + 1, 10) == 1
        purged = store.event_purged_through()
        assert purged == first[2].cursor
        with pytest.raises(EventsPurged) as refused:
            store.event_read(EventFilter(), first[0].cursor, 10)
        assert refused.value.purged_through == purged
        kept = _read(store, EventFilter(), purged).events
        assert len(kept) == 1 and kept[0].job_id not in old
        assert store.event_purge(T0 + 1, 10) == 0

    run(store_url, scenario)


# -- PostgreSQL: ids are drawn before commit ------------------------------------------


def _pg_only(store_url: str) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer: ids are committed in order")


def test_a_reader_never_skips_an_event_committed_later_with_a_lower_id(store_url: str) -> None:
    _pg_only(store_url)

    async def scenario(h: Harness) -> None:
        store = h.engine.store
        first = await h.enqueue()
        side = open_store(store_url)
        try:
            with side.engine.connect() as conn:
                tx = conn.begin()
                # This transaction writes an event (the lower id) and stays open.
                side._events.record_events(
                    conn, [EventEntry(first, K.RETRY_SCHEDULED)], T0, bump=True
                )
                second = await h.enqueue()  # commits with a higher id
                page = store.event_read(EventFilter(), _log_start(h, first), 10)
                assert page.events == [] and page.held_back
                position = page.scanned_to
                tx.commit()
            page = _read(store, EventFilter(), position)
            assert [(e.job_id, e.kind) for e in page.events] == [
                (first, K.RETRY_SCHEDULED),
                (second, K.ENQUEUED),
            ]
            assert page.events[0].cursor.id < page.events[1].cursor.id
        finally:
            side.dispose()

    run(store_url, scenario)


def test_a_transaction_open_in_another_database_holds_no_event_back(store_url: str) -> None:
    _pg_only(store_url)
    from conftest import PG_ADMIN_URL

    async def scenario(h: Harness) -> None:
        store = h.engine.store
        # A long transaction in another database of the server, holding a
        # transaction id (a report, a dump): it never writes this log.
        with psycopg.connect(PG_ADMIN_URL) as other:
            other.execute("SELECT pg_current_xact_id()")
            job = await h.enqueue()
            deadline = time.monotonic() + 10
            while True:
                page = store.event_read(EventFilter(job_id=job), None, 10)
                if [e.kind for e in page.events] == [K.ENQUEUED] or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert [e.kind for e in page.events] == [K.ENQUEUED], page
            tail = store.event_tail()
            assert tail.ord >= page.events[0].cursor.ord
            other.rollback()

    run(store_url, scenario)


def _log_start(h: Harness, job_id: str) -> EventCursor:
    """The cursor of ``job_id``'s first event (read while nothing is held back)."""
    return _read(h.engine.store, EventFilter(job_id=job_id), None, 1).events[0].cursor


def test_a_job_s_events_keep_commit_order_when_an_older_transaction_writes_last(
    store_url: str,
) -> None:
    _pg_only(store_url)

    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        side = open_store(store_url)
        try:
            with side.engine.connect() as conn:
                tx = conn.begin()
                older_xid = conn.exec_driver_sql("SELECT pg_current_xact_id()::text::bigint")
                older_xid = older_xid.scalar_one()
                # A younger transaction cancels the job and commits first ...
                await h.engine.ops.cancel_job(job_id, "")
                # ... then the older one writes the job's next event.
                side._events.record_events(
                    conn, [EventEntry(job_id, K.RETRY_SCHEDULED)], T0, bump=True
                )
                tx.commit()
        finally:
            side.dispose()
        events = _log(h, job_id=job_id)
        assert [e.kind for e in events] == [K.ENQUEUED, K.CANCELLED, K.RETRY_SCHEDULED]
        # Its own transaction id sorts before the cancel's; the job's order wins.
        assert older_xid < events[1].cursor.ord
        assert events[1].cursor < events[2].cursor

    run(store_url, scenario)


def test_events_are_in_the_same_transaction_as_the_change(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        store = h.engine.store
        with pytest.raises(RuntimeError), store.tx() as conn:
            store._events.record_events(conn, [EventEntry(job_id, K.FAULTED)], T0, bump=True)
            raise RuntimeError("roll back")
        assert _kinds(h, job_id) == [K.ENQUEUED]
        with store.tx() as conn:
            count = conn.execute(sa.text("SELECT count(*) FROM wfj_job_events")).scalar()
        assert count == 1

    run(store_url, scenario)


def test_commits_that_write_events_call_the_listeners(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        calls: list[int] = []
        h.engine.store.add_event_listener(lambda: calls.append(1))
        job_id = await h.enqueue()
        assert calls == [1]
        await h.engine.get_job(job_id)
        await h.lease()
        assert len(calls) == 2
        await asyncio.sleep(0)

    run(store_url, scenario)


def test_direct_dispatch_and_inline_runs_write_enqueued_then_started(store_url: str) -> None:
    from coordinator.engine import WorkerSession

    async def scenario(h: Harness) -> None:
        # Direct leasing serves known lanes: the first job of the lane creates it.
        await h.engine.enqueue([make_job()])
        await h.lease(1, worker="drain-first")
        session = WorkerSession("idle", frozenset({"noop"}))
        h.engine.open_session(session)
        h.engine.grant(session, 1)
        row, _ = await h.engine.enqueue_one(make_job())
        expected = [K.ENQUEUED, K.STARTED] if row.status == JobStatus.RUNNING else [K.ENQUEUED]
        assert h.engine.store.is_sqlite or row.status == JobStatus.RUNNING
        assert _kinds(h, row.id) == expected
        h.engine.close_session(session)

        inline, _, token = await h.engine.enqueue_inline(
            make_job(), "inline-worker", enqueue_if_paused=False
        )
        assert token
        assert _kinds(h, inline.id) == [K.ENQUEUED, K.STARTED]
        await h.engine.report_one(Completion(inline.id, token, b"done"))
        assert _kinds(h, inline.id) == [K.ENQUEUED, K.STARTED, K.COMPLETED]

    run(store_url, scenario)


# -- rows that hold a statement's events ------------------------------------------------


def test_a_batch_s_events_read_in_order_in_pages_of_any_size(store_url: str) -> None:
    """A batch writes its events in one statement (one log row on PostgreSQL);
    pages of any size, resumed from any cursor, read each event once, in order."""

    async def scenario(h: Harness) -> None:
        jobs = [make_job(tenant_id="a" if i % 3 else "b") for i in range(30)]
        await h.engine.enqueue(jobs)
        leased = await h.lease(n=30)
        assert len(leased) == 30
        store = h.engine.store
        store.job_complete_many(
            [Completion(row.id, token) for row, token in leased], h.clock.now_us()
        )
        everything = _log(h)
        assert len(everything) == 90
        cursors = [e.cursor for e in everything]
        assert cursors == sorted(cursors) and len(set(cursors)) == 90
        for job in jobs:
            assert _kinds(h, job.id) == [K.ENQUEUED, K.STARTED, K.COMPLETED]
        for size in (1, 7, 29):
            assert _read_all(store, EventFilter(), size) == everything
        # Resuming from any event's cursor (as written on the wire) gives the rest.
        for i in (0, 14, 29, 30, 61, 89):
            after = EventCursor.parse(str(everything[i].cursor))
            assert _read(store, EventFilter(), after).events == everything[i + 1 :]
        # Filters apply to each event of a row.
        b_jobs = {j.id for j in jobs if j.tenant_id == "b"}
        completed_b = _log(h, tenant_id="b", kinds=(K.COMPLETED,))
        assert {e.job_id for e in completed_b} == b_jobs and len(completed_b) == 10
        # Filtered pages of any size, resumed from their cursors, give the same.
        for size in (1, 4, 100):
            assert _read_all(store, EventFilter(tenant_id="b", kinds=(K.COMPLETED,)), size) == (
                completed_b
            )

    run(store_url, scenario)


def test_retention_refuses_a_cursor_inside_a_purged_row(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        store = h.engine.store
        await h.engine.enqueue([make_job() for _ in range(5)])
        batch = _log(h)
        h.clock.advance(3600)
        await h.engine.enqueue([make_job(created_at=h.clock.now_us())])
        assert store.event_purge(T0 + 1, 10) == 5
        purged = store.event_purged_through()
        assert purged == batch[-1].cursor
        for event in batch[:-1]:
            with pytest.raises(EventsPurged):
                store.event_read(EventFilter(), event.cursor, 10)
        assert len(_read(store, EventFilter(), purged).events) == 1

    run(store_url, scenario)


def test_cursors_read_in_both_forms() -> None:
    assert EventCursor.parse("12-34") == EventCursor(12, 34)
    assert str(EventCursor(12, 34)) == "12-34"
    assert EventCursor.parse("12-34-5") == EventCursor(12, 34, 5)
    assert str(EventCursor(12, 34, 5)) == "12-34-5"
    assert EventCursor(12, 34, 5) < EventCursor(12, 34) < EventCursor(12, 35, 1)
    for bad in ("", "12", "12-x", "1-2-3-4", "1-2-0", "1--2", "-1-2"):
        with pytest.raises(ValueError):
            EventCursor.parse(bad)


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_mig_ev")
    try:
        yield url
    finally:
        drop()


def test_migration_keeps_the_log_and_the_cursors_handed_out_before(fresh_url: str) -> None:
    store = open_store(fresh_url)
    try:
        upgrade(store, "0014")
        with store.engine.begin() as conn:
            for i, kind in enumerate((K.ENQUEUED, K.STARTED, K.COMPLETED)):
                conn.execute(
                    sa.text(
                        "INSERT INTO wfj_job_events (ord, kind, created_at, job_id, tenant_id,"
                        " job_type, definition_id, definition_version, instance_id, activity_id,"
                        " activity_node_id, bookmark_id, correlation_id, status, attempt)"
                        " VALUES (:ord, :kind, :at, 'j1', 't', 'noop', 'd', 2, 'i', '', '', '',"
                        " 'c', 1, :attempt)"
                    ),
                    # ord: a past transaction's id (PostgreSQL), 0 on SQLite.
                    {
                        "ord": 7 if store.is_postgres else 0,
                        "kind": int(kind),
                        "at": T0 + i,
                        "attempt": min(i, 1),
                    },
                )
            # The cursors the old layout handed out: "ORD-ID" of each row.
            before = [
                f"{o}-{i}"
                for o, i in conn.execute(sa.text("SELECT ord, id FROM wfj_job_events ORDER BY id"))
            ]
        upgrade(store)
        store.check_schema()
        after = _read(store, EventFilter(), None).events
        # The same positions (on PostgreSQL the cursors now also name their history).
        assert [e.cursor for e in after] == [EventCursor.parse(c) for c in before]
        assert [str(e.cursor).split(".")[0] for e in after] == before
        assert [e.kind for e in after] == [K.ENQUEUED, K.STARTED, K.COMPLETED]
        # An old cursor names the same position.
        resumed = _read(store, EventFilter(), EventCursor.parse(before[0])).events
        assert resumed == after[1:]
        assert [e.definition_version for e in after] == [2, 2, 2]
        # New events sort after the old ones.
        store.job_insert_many([make_job()])
        assert len(_read(store, EventFilter(), after[-1].cursor).events) == 1

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        with store.engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0014")
        with store.engine.connect() as conn:
            kinds = (
                conn.execute(sa.text("SELECT kind FROM wfj_job_events ORDER BY ord, id"))
                .scalars()
                .all()
            )
        assert kinds == [int(K.ENQUEUED), int(K.STARTED), int(K.COMPLETED), int(K.ENQUEUED)]
    finally:
        store.dispose()
