"""Statements the event loop runs itself (``StoreCore._run_on_loop``): which single
enqueues go in there on each store (``job_insert_on_loop``), that a job the
database refuses there fails only its own caller, that a connection the
database dropped fails one commit as UNAVAILABLE and the next connects again,
the events notification sent from the loop, and the ``WFJOBS_STORE_ON_LOOP``
switch."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import psycopg._queries as psycopg_queries
import pytest
import sqlalchemy as sa

from coordinator.errors import StoreUnavailable
from coordinator.model import EventFilter, JobEventKind, JobStatus
from coordinator.store import open_store
from coordinator.store.base import loop_statements_setting
from wfj_engine import Harness, refused_in_a_shared_commit, run
from wfj_testing import make_job


def _count_thread_inserts(h: Harness) -> list[int]:
    """Sizes of the inserts that went through the store's threads."""
    calls: list[int] = []
    threaded = h.engine.store.job_insert_many

    def insert(jobs, *args, **kwargs):
        calls.append(len(jobs))
        return threaded(jobs, *args, **kwargs)

    h.engine.store.job_insert_many = insert  # type: ignore[method-assign]
    return calls


def _events_of(h: Harness, job_id: str) -> list[int]:
    page = h.engine.store.event_read(EventFilter(job_id=job_id), None, 100)
    return [event.kind for event in page.events]


def test_plain_single_enqueues_of_a_stored_lane_go_in_on_the_loop(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        threaded = _count_thread_inserts(h)
        first, _ = await h.engine.enqueue_one(make_job())  # its lane is new: the threads
        assert threaded == [1]
        rows = [await h.engine.enqueue_one(make_job()) for _ in range(3)]
        keyed, _ = await h.engine.enqueue_one(make_job(idempotency_key="k"))
        ordered, _ = await h.engine.enqueue_one(make_job(ordering_key="o"))
        if h.engine.store.is_postgres:
            # Plain jobs of a stored lane: no thread; a key or an ordering key: the threads.
            assert threaded == [1, 1, 1]
        else:
            assert threaded == [1] * 6  # SQLite has no loop statement
        for row, deduplicated in rows:
            assert not deduplicated
            stored, _ = await h.job(row.id)
            assert stored.status == JobStatus.PENDING
            assert _events_of(h, row.id) == [JobEventKind.ENQUEUED]
        for row in (first, keyed, ordered):
            assert (await h.job(row.id))[0].status == JobStatus.PENDING

    run(store_url, scenario)


def test_the_loop_sends_the_insert_as_postgresql_text_without_parsing_it_again(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group-commit insert is longer than psycopg's 4,096-byte cache of
    parsed statements: on the loop it goes as ``$n`` text through a raw cursor,
    so psycopg's query conversion never sees it, and its values (one JSON
    parameter: bytes, text beyond ASCII, the largest integers, booleans and
    NULLs) arrive as they were."""
    converted: list[str] = []
    convert = psycopg_queries.PostgresQuery.convert

    def spy(self: Any, query: Any, params: Any) -> None:
        text = query.decode() if isinstance(query, bytes) else str(query)
        if "INSERT INTO wfj_jobs" in text:
            converted.append(text)
        convert(self, query, params)

    async def scenario(h: Harness) -> None:
        if not h.engine.store.is_postgres:
            pytest.skip("SQLite has no loop statement")
        await h.engine.enqueue_one(make_job())  # a new lane: through the threads
        monkeypatch.setattr(psycopg_queries.PostgresQuery, "convert", spy)
        payload = bytes(range(256)) * 3
        job = make_job(
            payload=payload,
            content_type="application/octet-stream",
            correlation_id='"quoted" \\ back\\slash \u00e9t\u00e9 \U0001f680 \n tab\t',
            priority=-(2**31),
            execution_timeout_ms=366 * 86_400_000,
            definition_version=2**31 - 1,
            ordering_skip_failed=True,
        )
        row, _ = await h.engine.enqueue_one(job)
        assert converted == []
        stored, _ = await h.job(row.id)
        assert stored.status == JobStatus.PENDING
        assert stored.payload == payload
        assert stored.content_type == "application/octet-stream"
        assert stored.correlation_id == job.correlation_id
        assert (stored.priority, stored.execution_timeout_ms) == (-(2**31), 366 * 86_400_000)
        assert stored.definition_version == 2**31 - 1
        assert stored.idempotency_key is None
        assert _events_of(h, row.id) == [JobEventKind.ENQUEUED]

    run(store_url, scenario)


def test_a_job_refused_on_the_loop_fails_only_its_own_caller(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        store = h.engine.store
        if not store.is_postgres:
            pytest.skip("SQLite has no loop statement (test_group_commit covers its threads)")
        await h.engine.enqueue_one(make_job())
        await h.engine.enqueue_one(make_job(job_type="refused"))  # both lanes stored
        with store.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "ALTER TABLE wfj_jobs ADD CONSTRAINT wfj_test_refuse "
                    "CHECK (job_type <> 'refused') NOT VALID"
                )
            )
        try:
            # Hold the first loop commit so that the next callers share one.
            release = asyncio.Event()
            calls: list[int] = []
            on_loop = store.job_insert_on_loop

            async def insert(jobs, *args, **kwargs):
                calls.append(len(jobs))
                if len(calls) == 1:
                    await release.wait()
                return await on_loop(jobs, *args, **kwargs)

            store.job_insert_on_loop = insert  # type: ignore[method-assign]
            held = asyncio.create_task(h.engine.enqueue_one(make_job()))
            while not calls:
                await asyncio.sleep(0)
            await refused_in_a_shared_commit(h, held, calls, release.set)
        finally:
            with store.engine.begin() as conn:
                conn.execute(sa.text("ALTER TABLE wfj_jobs DROP CONSTRAINT wfj_test_refuse"))

    run(store_url, scenario)


def test_dropped_loop_connections_fail_one_commit_and_the_next_reconnects(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        store = h.engine.store
        if not store.is_postgres:
            pytest.skip("SQLite has no loop statement")
        await h.engine.enqueue_one(make_job())
        await h.engine.enqueue_one(make_job())  # on the loop: its connection is open
        pool = store._core._loop_pool
        assert pool is not None
        # Every connection of the loop's pool is dropped, as a server restart would.
        pids = {conn.info.backend_pid for conn in pool._pool}
        assert pids
        with store.engine.begin() as admin:
            for pid in pids:
                admin.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        lost = make_job()
        with pytest.raises(StoreUnavailable):
            await h.engine.enqueue_one(lost)
        row, _ = await h.engine.enqueue_one(make_job())
        async with pool.connection() as conn:
            assert conn.info.backend_pid not in pids
        assert (await h.job(row.id))[0].status == JobStatus.PENDING
        with pytest.raises(Exception, match="not found"):
            await h.job(lost.id)

    run(store_url, scenario)


def test_store_on_loop_switch(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if store_url.startswith("sqlite"):
        pytest.skip("SQLite has no loop statement")
    assert loop_statements_setting()
    monkeypatch.setenv("WFJOBS_STORE_ON_LOOP", "0")
    store = open_store(store_url)
    try:
        assert asyncio.run(store.job_insert_on_loop([make_job()])) is None
        assert asyncio.run(store.event_notify_on_loop()) is False
    finally:
        store.dispose()
    monkeypatch.setenv("WFJOBS_STORE_ON_LOOP", "yes")
    with pytest.raises(ValueError, match="WFJOBS_STORE_ON_LOOP='yes' is neither 1"):
        loop_statements_setting()


def test_the_events_notification_goes_out_from_the_loop(store_url: str) -> None:
    if store_url.startswith("sqlite"):
        pytest.skip("SQLite has no replicas to notify")
    import psycopg

    store = open_store(store_url)
    dsn = store_url.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        with psycopg.connect(dsn, autocommit=True) as listener:
            listener.execute("LISTEN wfj_events")

            async def notify() -> bool:
                try:
                    return await store.event_notify_on_loop()
                finally:
                    await store.loop_close()

            assert asyncio.run(notify()) is True
            heard = [n.channel for n in listener.notifies(timeout=5, stop_after=1)]
        assert heard == ["wfj_events"]
    finally:
        store.dispose()


def test_a_url_naming_several_hosts_gives_the_loop_connection_every_host() -> None:
    """A failover URL (``host:port,host:port``, as docs/deployment.md shows) opens
    the store, and the loop's own connection is given every host and port."""
    store = open_store(
        "postgresql://root@127.0.0.1:5432,127.0.0.1:5433/wfjobs"
        "?target_session_attrs=read-write&connect_timeout=5"
    )
    try:
        params = store._core._loop_params
        assert params is not None
        assert (params["host"], params["port"]) == ("127.0.0.1,127.0.0.1", "5432,5433")
        assert params["target_session_attrs"] == "read-write"
    finally:
        store.dispose()


def test_a_fault_after_the_statement_is_not_answered_as_a_refused_value(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a value the driver cannot send is the caller's fault
    (``InvalidArgument``); a ``ValueError`` raised once the statement ran (a
    fault of the coordinator's own) stays what it is."""
    if store_url.startswith("sqlite"):
        pytest.skip("SQLite has no loop statement")

    async def fetch_fails(self: psycopg.AsyncRawCursor[Any]) -> list[Any]:
        raise ValueError("a fault in reading the rows")

    store = open_store(store_url)
    try:
        store.job_insert_many([make_job()])  # the lane is stored: the next go on the loop
        assert asyncio.run(store.job_insert_on_loop([make_job()])) is not None
        monkeypatch.setattr(psycopg.AsyncRawCursor, "fetchall", fetch_fails)
        with pytest.raises(ValueError, match="a fault in reading the rows"):
            asyncio.run(store.job_insert_on_loop([make_job()]))
    finally:
        store.dispose()
