"""A job enqueued while a worker waits with free credit is leased at insert."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.engine import LeaseBatch, WorkerSession
from coordinator.model import JobCategory, JobStatus, PauseKind, PauseScope
from wfj_engine import Harness, run
from wfj_testing import make_job


def _delivered(session: WorkerSession) -> list:
    out = []
    while not session.outbox.empty():
        item = session.outbox.get_nowait()
        if isinstance(item, LeaseBatch):
            out.extend(item.jobs)
    return out


def test_idle_worker_gets_the_job_at_insert(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        # The lane's first job creates it; direct leasing serves known lanes.
        await h.engine.enqueue([make_job(job_type="other")])
        await h.engine.enqueue_one(make_job(job_type="noop", tenant_id="warm-up"))
        session = WorkerSession("idle", frozenset({"noop"}), tenants=frozenset({"tenant-a"}))
        h.engine.open_session(session)
        await h.engine.enqueue([make_job()])  # tenant-a's lane, before any credit
        [(first, _)] = await h.lease(1, worker="drain-first")
        h.engine.grant(session, 2)
        dispatcher = h.engine.dispatcher
        at_insert = dispatcher.leased_at_insert
        row, _ = await h.engine.enqueue_one(make_job())
        stored, _ = await h.job(row.id)
        if h.engine.store.is_postgres:
            # Leased in the insert statement, not by an acquisition pass, and counted so.
            assert (row.status, stored.status) == (JobStatus.RUNNING, JobStatus.RUNNING)
            assert stored.lease_owner == "idle" and session.credits == 1
            [delivered] = _delivered(session)
            assert delivered.id == row.id and delivered.lease_token == stored.lease_token
            assert dispatcher.leased_at_insert == at_insert + 1
        else:
            # The SQLite store has no direct path: the job waits for a pass.
            assert stored.status == JobStatus.PENDING and session.credits == 2
            assert dispatcher.leased_at_insert == at_insert == 0

    run(store_url, scenario)


def test_paused_job_is_not_leased_at_insert_and_credit_comes_back(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.pause(PauseScope(PauseKind.DEFINITION, "", "def-1"), "ops", "", None)
        session = WorkerSession("idle", frozenset({"noop"}))
        h.engine.open_session(session)
        h.engine.grant(session, 1)
        row, _ = await h.engine.enqueue_one(make_job())
        stored, _ = await h.job(row.id)
        assert stored.status == JobStatus.PENDING and stored.lease_token is None
        assert session.credits == 1
        assert _delivered(session) == []
        assert h.engine.dispatcher.leased_at_insert == 0

    run(store_url, scenario)


def test_keyed_job_is_leased_at_insert_and_its_repeat_returns_it_without_credit(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.enqueue([make_job()])  # the lane exists
        [_] = await h.lease(1, worker="drain-first")
        session = WorkerSession("idle", frozenset({"noop"}))
        h.engine.open_session(session)
        h.engine.grant(session, 2)
        first, dedup_first = await h.engine.enqueue_one(make_job(idempotency_key="order-7"))
        again, dedup_again = await h.engine.enqueue_one(make_job(idempotency_key="order-7"))
        assert (dedup_first, dedup_again) == (False, True)
        assert again.id == first.id
        stored, _ = await h.job(first.id)
        if h.engine.store.is_postgres:
            # The key is settled in the insert statement, which also leases.
            assert stored.status == JobStatus.RUNNING and stored.lease_owner == "idle"
            assert again.lease_token == stored.lease_token
            [delivered] = _delivered(session)
            assert delivered.id == first.id
            assert session.credits == 1
        else:
            assert stored.status == JobStatus.PENDING and session.credits == 2

    run(store_url, scenario)


def test_jobs_leased_at_insert_count_against_the_tenants_fair_share(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        if not h.engine.store.is_postgres:
            pytest.skip("direct dispatch at insert is the PostgreSQL path")
        # Known lanes for both tenants (direct leasing serves known lanes);
        # one job each, so both tenants' clocks stand level.
        await h.engine.enqueue([make_job(tenant_id="a"), make_job(tenant_id="b")])
        await h.lease(2, worker="warm-up")
        # Tenant a has a backlog; before a pass hands out the credit a worker
        # has just granted, tenant b's single enqueues take it at insert.
        await h.engine.enqueue([make_job(tenant_id="a") for _ in range(8)])
        idle = WorkerSession("idle", frozenset({"noop"}))
        h.engine.open_session(idle)
        for _ in range(4):
            h.engine.grant(idle, 1)
            row, _ = await h.engine.enqueue_one(make_job(tenant_id="b"))
            assert row.status == JobStatus.RUNNING
        h.engine.close_session(idle)
        # b was charged for those four: with both tenants backlogged, a now
        # gets most of the next passes (uncharged, they would alternate).
        await h.engine.enqueue([make_job(tenant_id="b") for _ in range(8)])
        leased = await h.lease(4, worker="w2")
        tenants = sorted(row.tenant_id for row, _ in leased)
        assert tenants == ["a", "a", "a", "b"]

    run(store_url, scenario)


def test_jobs_leased_at_insert_count_against_the_categorys_fair_share(store_url: str) -> None:
    """The same within a tenant: direct leases advance their category's clock."""

    async def scenario(h: Harness) -> None:
        if not h.engine.store.is_postgres:
            pytest.skip("direct dispatch at insert is the PostgreSQL path")
        work, sync = JobCategory.ACTIVITY_WORK, JobCategory.INTEGRATION
        await h.engine.enqueue([make_job(category=work), make_job(category=sync)])
        await h.lease(2, worker="warm-up")
        await h.engine.enqueue([make_job(category=work) for _ in range(8)])
        idle = WorkerSession("idle", frozenset({"noop"}))
        h.engine.open_session(idle)
        for _ in range(4):
            h.engine.grant(idle, 1)
            row, _ = await h.engine.enqueue_one(make_job(category=sync))
            assert row.status == JobStatus.RUNNING
        h.engine.close_session(idle)
        await h.engine.enqueue([make_job(category=sync) for _ in range(8)])
        leased = await h.lease(4, worker="w2")
        assert sorted(row.category for row, _ in leased) == [work, work, work, sync]

    run(store_url, scenario)


def test_a_job_leased_at_insert_is_on_its_stream_before_its_caller_resumes(
    store_url: str,
) -> None:
    """The stream's writer wakes before the enqueue callers' answers are built."""

    async def scenario(h: Harness) -> None:
        if not h.engine.store.is_postgres:
            pytest.skip("direct dispatch at insert is the PostgreSQL path")
        await h.engine.enqueue([make_job()])  # the lane becomes known
        await h.lease(1, worker="drain-first")
        session = WorkerSession("idle", frozenset({"noop"}))
        h.engine.open_session(session)
        h.engine.grant(session, 1)
        order: list[str] = []

        async def writer() -> None:
            item = await session.outbox.get()
            assert isinstance(item, LeaseBatch)
            order.append("sent")

        sending = asyncio.create_task(writer())
        await asyncio.sleep(0)  # the writer waits on the outbox, as a stream does
        row, _ = await h.engine.enqueue_one(make_job())
        order.append("answered")
        await sending
        assert row.status == JobStatus.RUNNING
        assert order == ["sent", "answered"]

    run(store_url, scenario)
