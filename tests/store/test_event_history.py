"""The event log on a PostgreSQL cluster of the test's own: prepared
transactions and the release horizon, and cursors across a failover.

The machine's shared server runs with ``max_prepared_transactions = 0`` and
must not be restarted or failed over, so these tests start their own cluster
(as the fault scenarios do)."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import time
from collections.abc import Iterator

import psycopg
import pytest
from faults.harness import PgCluster

from coordinator.errors import OutOfRange
from coordinator.model import EventCursor, EventFilter, JobEventKind
from coordinator.store import open_store
from coordinator.store.migrate import upgrade
from wfj_engine import Harness, run
from wfj_testing import wait_until

K = JobEventKind


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    PgCluster.skip_unless_available()
    root = PgCluster.workspace()
    primary = PgCluster(root, "events").init(max_prepared_transactions="4")
    try:
        primary.start()
        primary.create_database("other")
        yield primary
    finally:
        primary.destroy()
        shutil.rmtree(root, ignore_errors=True)


def _database(cluster: PgCluster, name: str) -> str:
    url = cluster.create_database(name)
    store = open_store(url)
    try:
        upgrade(store)
    finally:
        store.dispose()
    return url


def _kinds_read(store, job_id: str) -> tuple[list[JobEventKind], bool]:
    page = store.event_read(EventFilter(job_id=job_id), None, 10)
    return [e.kind for e in page.events], page.held_back


def _prepare(cluster: PgCluster, database: str, gid: str) -> None:
    """A transaction holding an id, prepared (two-phase commit) in ``database``."""
    with psycopg.connect(cluster.admin_url(database)) as conn:
        conn.execute("SELECT pg_current_xact_id()")
        conn.execute(f"PREPARE TRANSACTION '{gid}'")


def _finish_prepared(cluster: PgCluster, database: str, gid: str) -> None:
    with psycopg.connect(cluster.admin_url(database), autocommit=True) as conn:
        conn.execute(f"ROLLBACK PREPARED '{gid}'")


def test_a_prepared_transaction_holds_events_back_only_in_the_coordinator_s_database(
    cluster: PgCluster,
) -> None:
    """A prepared transaction is in every snapshot and never in
    pg_stat_activity: one of another database must not hold the log back
    (it can never write it); one of the coordinator's own database may still
    commit events, so it holds back those after it until it ends."""
    url = _database(cluster, "prepared")

    async def scenario(h: Harness) -> None:
        store = h.engine.store
        _prepare(cluster, "other", "wfj-other-db")
        try:
            job = await h.enqueue()
            got = wait_until(
                lambda: _kinds_read(store, job) if _kinds_read(store, job)[0] else None,
                10,
                "the event to be released past another database's prepared transaction",
            )
            assert got == ([K.ENQUEUED], False)
            _prepare(cluster, "prepared", "wfj-own-db")
            try:
                held = await h.enqueue()
                time.sleep(0.2)
                assert _kinds_read(store, held) == ([], True)
            finally:
                _finish_prepared(cluster, "prepared", "wfj-own-db")
            assert wait_until(
                lambda: _kinds_read(store, held)[0] or None, 10, "the held event after rollback"
            ) == [K.ENQUEUED]
        finally:
            _finish_prepared(cluster, "other", "wfj-other-db")

    run(url, scenario)


async def _first(watch) -> EventCursor:
    _, position = await anext(watch)
    await watch.aclose()
    return position


def test_a_cursor_of_another_history_is_refused_after_a_failover(cluster: PgCluster) -> None:
    """A promoted standby starts a new timeline: a cursor handed out before
    names the old history and is OUT_OF_RANGE (its transaction ids may be
    handed out again); the position alone (a cursor of before histories
    existed) is read in the current history."""
    url = _database(cluster, "history")
    held: dict[str, EventCursor] = {}

    async def before(h: Harness) -> None:
        job = await h.enqueue()
        await asyncio.sleep(0)
        events = wait_until(
            lambda: h.engine.store.event_read(EventFilter(job_id=job), None, 10).events or None,
            10,
            "the enqueue's event",
        )
        held["event"] = events[0].cursor
        held["tail"] = await _first(h.engine.events.watch(EventFilter(), None))
        assert held["event"].history == held["tail"].history != ""
        # Resuming on the same history works.
        assert await _first(h.engine.events.watch(EventFilter(), held["event"])) == held["event"]

    run(url, before)
    with psycopg.connect(cluster.admin_url(), autocommit=True) as conn:
        # The base backup starts with a spread checkpoint: leave it nothing to write.
        conn.execute("CHECKPOINT")
    standby = cluster.standby("history-standby")
    try:
        standby.start()
        # The base backup holds every event committed before it.
        assert _event_rows(standby, "history") > 0
        standby.promote()
        promoted = standby.url("history")

        async def after(h: Harness) -> None:
            bounds = h.engine.store.event_bounds()
            assert bounds.history not in ("", held["event"].history)
            with pytest.raises(OutOfRange, match=r"belongs to database history .*from_oldest"):
                await _first(h.engine.events.watch(EventFilter(), held["event"]))
            untagged = dataclasses.replace(held["event"], history="")
            resumed = await _first(h.engine.events.watch(EventFilter(), untagged))
            assert resumed == untagged and resumed.history == bounds.history

        run(promoted, after)
    finally:
        standby.destroy()


def _event_rows(cluster: PgCluster, database: str) -> int:
    with psycopg.connect(cluster.admin_url(database), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM wfj_job_events").fetchone()
    return int(row[0]) if row else 0


def test_a_watch_ends_when_the_history_changes_under_it(store_url: str) -> None:
    """A read of a watch that comes from another history than the watch began
    in (its pool reconnected to a promoted standby) ends it OUT_OF_RANGE
    rather than go on from a position that may skip events."""

    async def scenario(h: Harness) -> None:
        store = h.engine.store
        read = store.event_read

        def after_failover(*args, **kwargs):
            return dataclasses.replace(read(*args, **kwargs), history="0badf00d")

        store.event_read = after_failover  # type: ignore[method-assign]
        watch = h.engine.events.watch(EventFilter(), None)
        await anext(watch)
        with pytest.raises(OutOfRange, match="belongs to database history"):
            await anext(watch)

    run(store_url, scenario)
