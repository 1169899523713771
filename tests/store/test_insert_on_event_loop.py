"""The insert of a group commit on the event loop (``job_insert_many_async``).

On PostgreSQL a small batch without idempotency or ordering keys, of lanes known,
is one statement on an async connection, with the same SQL and answers as
``job_insert_many``; every other batch, and every batch on SQLite, is left to
the threaded query (None). Database errors map to the same domain errors.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from coordinator.errors import InvalidArgument, StoreUnavailable
from coordinator.model import DirectLeases, JobStatus
from coordinator.store import Store
from coordinator.store.base import wake_payload
from wfj_testing import T0, make_job


def _on_loop(store: Store, coro_fn):
    async def scenario():
        try:
            return await coro_fn()
        finally:
            await store.aio_close()

    return asyncio.run(scenario())


def test_a_small_batch_of_known_lanes_is_stored_on_the_event_loop(store: Store) -> None:
    store.job_insert_many([make_job()])  # the lane becomes known
    written: list[int] = []
    store.add_event_listener(lambda: written.append(1))
    jobs = [make_job(priority=3), make_job(payload=b"\x00\x01binary")]
    result = _on_loop(store, lambda: store.job_insert_many_async(jobs))
    if not store.is_postgres:
        assert result is None  # SQLite keeps its thread
        assert all(store.job_get(j.id) is None for j in jobs)
        return
    assert result == [(j.id, False, JobStatus.PENDING) for j in jobs]
    assert written == [1]  # the commit wrote events: listeners heard once
    rows = [store.job_get(j.id) for j in jobs]
    assert [r.status for r in rows if r is not None] == [JobStatus.PENDING] * 2
    assert rows[0] is not None and rows[0].priority == 3
    assert rows[1] is not None and rows[1].payload == b"\x00\x01binary"


def test_offered_jobs_are_leased_by_the_insert(store: Store) -> None:
    store.job_insert_many([make_job()])
    offered, kept = make_job(), make_job()
    direct = DirectLeases({offered.id: "w-idle"}, "tok-direct", T0, 30_000)
    result = _on_loop(store, lambda: store.job_insert_many_async([offered, kept], direct))
    if not store.is_postgres:
        assert result is None
        return
    assert result == [
        (offered.id, False, JobStatus.RUNNING),
        (kept.id, False, JobStatus.PENDING),
    ]
    row = store.job_get(offered.id)
    assert row is not None
    assert (row.lease_owner, row.lease_token, row.attempt) == ("w-idle", "tok-direct", 1)


def test_batches_it_cannot_take_are_left_to_the_threaded_query(store: Store) -> None:
    store.job_insert_many([make_job()])
    keyed = make_job(idempotency_key="k-1")
    ordered = make_job(ordering_key="o-1")  # needs its key's lock (store/ordering.py)
    new_lane = make_job(job_type="never-seen")
    for batch in ([keyed], [make_job(), ordered], [make_job(), new_lane], []):
        assert _on_loop(store, lambda b=batch: store.job_insert_many_async(b)) is None
    assert all(store.job_get(j.id) is None for j in (keyed, ordered, new_lane))


def test_a_value_the_database_refuses_is_invalid_argument(store: Store) -> None:
    if not store.is_postgres:
        pytest.skip("SQLite stores NUL in text; the event loop path is PostgreSQL's")
    store.job_insert_many([make_job()])
    refused = make_job(correlation_id="nul\x00here")
    with pytest.raises(InvalidArgument, match="refused a value of this request"):
        _on_loop(store, lambda: store.job_insert_many_async([refused]))
    assert store.job_get(refused.id) is None


def test_a_dropped_connection_is_store_unavailable_and_the_next_insert_works(
    store: Store,
) -> None:
    if not store.is_postgres:
        pytest.skip("a SQLite file has no server connection to lose")
    store.job_insert_many([make_job()])
    raw = store.url.replace("postgresql+psycopg://", "postgresql://")

    async def scenario() -> None:
        first = make_job()
        assert await store.job_insert_many_async([first]) is not None
        # The database drops every idle connection of this test's database
        # (the one the insert above returned to the pool among them).
        with psycopg.connect(raw, autocommit=True) as other:
            other.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend' AND state = 'idle'"
            )
        with pytest.raises(StoreUnavailable):
            await store.job_insert_many_async([make_job()])
        # Each dropped pooled connection fails the one statement that finds it
        # (no check per checkout); the pool replaces it and callers retry.
        later = make_job()
        for _ in range(5):
            try:
                result = await store.job_insert_many_async([later])
                break
            except StoreUnavailable:
                continue
        assert result == [(later.id, False, JobStatus.PENDING)]

    _on_loop(store, scenario)


@pytest.mark.parametrize("path", ["thread", "event loop"])
def test_only_jobs_stored_pending_wake_the_replicas(store: Store, path: str) -> None:
    """A job leased at insert has nothing left to acquire: its commit sends no
    ``wfj_wake`` (and so takes no notify lock); a PENDING job's does."""
    if not store.is_postgres:
        pytest.skip("SQLite has no LISTEN/NOTIFY; one coordinator wakes itself")
    store.job_insert_many([make_job()])
    raw = store.url.replace("postgresql+psycopg://", "postgresql://")
    leased, later = make_job(due_at=T0), make_job(due_at=T0 + 3_600 * 1_000_000)
    direct = DirectLeases({leased.id: "w-idle"}, "tok-direct", T0, 30_000)
    with psycopg.connect(raw, autocommit=True) as listener:
        listener.execute("LISTEN wfj_wake")
        for jobs, offers in (([leased], direct), ([later], None)):
            if path == "thread":
                store.job_insert_many(jobs, offers)
            else:
                _on_loop(store, lambda j=jobs, o=offers: store.job_insert_many_async(j, o))
        # Notifications arrive in commit order: the first is the PENDING job's.
        [first] = list(listener.notifies(timeout=10, stop_after=1))
    assert first.payload == wake_payload([later.due_at])
    assert store.job_get(leased.id).status == JobStatus.RUNNING  # type: ignore[union-attr]


def test_event_loop_connections_never_jit_compile(store: Store) -> None:
    if not store.is_postgres:
        pytest.skip("JIT is PostgreSQL's")
    pool = store._aio  # type: ignore[attr-defined]

    async def jit() -> str:
        async with pool.connection() as conn:
            row = await (await conn.execute("SHOW jit")).fetchone()
            return str(row[0])

    assert _on_loop(store, jit) == "off"
