"""Session identity (SPEC §5.13, §5.18): a lease belongs to the session it was
granted to, whatever worker id another stream announces (both stores)."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.engine import LeaseBatch, WorkerSession
from coordinator.errors import AlreadyExists, StoreUnavailable
from coordinator.model import FairClaim, JobStatus
from wfj_engine import Harness, run
from wfj_testing import make_job


def _delivered(session: WorkerSession) -> list:
    out = []
    while not session.outbox.empty():
        item = session.outbox.get_nowait()
        if isinstance(item, LeaseBatch):
            out.extend(item.jobs)
    return out


def _session(worker_id: str, principal: str, tenants: set[str]) -> WorkerSession:
    return WorkerSession(
        worker_id,
        frozenset({"noop"}),
        tenants=frozenset(tenants),
        principal=principal,
        credential=principal,
    )


def _after_claim(h: Harness, hook) -> None:
    """Run ``hook`` on the loop right after the store leases, before delivery."""
    loop = asyncio.get_running_loop()
    store = h.engine.store
    for name in ("job_claim", "job_claim_fair"):
        original = getattr(store, name)

        def wrapped(*args, _original=original, **kwargs):
            answer = _original(*args, **kwargs)
            leased = answer.rows if isinstance(answer, FairClaim) else answer
            if leased:
                loop.call_soon_threadsafe(hook)
            return answer

        setattr(store, name, wrapped)


def test_hello_colliding_with_another_credential_is_refused(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        a = _session("w", "key-a", {"a"})
        h.engine.open_session(a)
        with pytest.raises(AlreadyExists, match="under a different credential"):
            h.engine.open_session(_session("w", "key-b", {"b"}))
        # The connected worker keeps its stream and its id.
        assert not a.closed and h.engine.dispatcher.sessions["w"] is a
        # The same credential reconnecting replaces its own stream.
        again = _session("w", "key-a", {"a"})
        h.engine.open_session(again)
        assert a.closed and h.engine.dispatcher.sessions["w"] is again

    run(store_url, scenario)


def test_no_crossing_when_another_credential_announces_the_same_id_mid_acquisition(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.enqueue([make_job(tenant_id="a") for _ in range(5)])
        a = _session("w", "key-a", {"a"})
        b = _session("w", "key-b", {"b"})
        refused: list[Exception] = []

        def hello_b() -> None:
            try:
                h.engine.open_session(b)
            except AlreadyExists as e:
                refused.append(e)

        _after_claim(h, hello_b)
        h.engine.open_session(a)
        h.engine.grant(a, 5)
        while await h.engine.dispatcher.run_pass():
            pass
        assert refused, "the colliding hello was not refused"
        assert _delivered(b) == []
        got = _delivered(a)
        assert len(got) == 5 and {r.tenant_id for r in got} == {"a"}

    run(store_url, scenario)


def test_a_replaced_session_never_gets_its_successors_jobs(store_url: str) -> None:
    """Jobs leased to a stream that was replaced go back; the new stream asked for none."""

    async def scenario(h: Harness) -> None:
        ids = [job_id for job_id, _, _ in await h.engine.enqueue([make_job() for _ in range(3)])]
        first = _session("w", "key-a", {"tenant-a"})
        second = _session("w", "key-a", {"tenant-a"})
        _after_claim(h, lambda: h.engine.open_session(second))
        h.engine.open_session(first)
        h.engine.grant(first, 3)
        await h.engine.dispatcher.run_pass()
        assert _delivered(second) == [] and _delivered(first) == []
        for job_id in ids:
            row, _ = await h.job(job_id)
            # Handed back at once, the attempt refunded.
            assert (row.status, row.lease_token) == (JobStatus.PENDING, None)
            assert row.max_attempts - row.counted_attempts == 3

    run(store_url, scenario)


def test_delivery_refuses_jobs_outside_the_sessions_scope(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        [(job_id, _, _)] = await h.engine.enqueue([make_job(tenant_id="b")])
        [(row, token)] = await h.lease(1)
        session = _session("scoped", "key-a", {"a"})
        h.engine.open_session(session)
        orphans = h.engine.dispatcher.deliver([(session, [row])], token)
        assert orphans == [(job_id, token)]
        assert _delivered(session) == [] and session.in_flight == {}

    run(store_url, scenario)


def test_direct_dispatch_goes_to_the_offered_session_only(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        if not h.engine.store.is_postgres:
            pytest.skip("direct dispatch at insert is the PostgreSQL path")
        # The lane's first job creates it; direct leasing serves known lanes.
        await h.engine.enqueue_one(make_job(tenant_id="a", job_type="warm"))
        await h.engine.enqueue([make_job(tenant_id="a")])
        await h.lease(1)
        a = _session("w", "key-a", {"a"})
        b = _session("w", "key-b", {"b"})
        h.engine.open_session(a)
        h.engine.grant(a, 1)
        refused: list[Exception] = []

        def hello_b() -> None:
            try:
                h.engine.open_session(b)
            except AlreadyExists as e:
                refused.append(e)

        h.after_insert(hello_b)
        row, _ = await h.engine.enqueue_one(make_job(tenant_id="a"))
        assert row.status == JobStatus.RUNNING and refused
        # The caller is answered before delivery: wait for the job to reach a.
        batch = await asyncio.wait_for(a.outbox.get(), 10)
        assert isinstance(batch, LeaseBatch) and [r.id for r in batch.jobs] == [row.id]
        assert _delivered(a) == [] and _delivered(b) == []

    run(store_url, scenario)


def test_direct_dispatch_answers_callers_when_handing_back_fails(store_url: str) -> None:
    """The store failing while jobs leased to a departed worker are handed back
    still answers every caller (their jobs are committed)."""

    async def scenario(h: Harness) -> None:
        if not h.engine.store.is_postgres:
            pytest.skip("direct dispatch at insert is the PostgreSQL path")
        await h.engine.enqueue_one(make_job(job_type="warm"))
        await h.engine.enqueue([make_job()])
        await h.lease(1)
        session = _session("w", "key-a", {"tenant-a"})
        h.engine.open_session(session)
        h.engine.grant(session, 1)

        async def store_down(refs, reason) -> None:
            raise StoreUnavailable("the database cannot be reached")

        h.after_insert(session.close)  # the worker leaves meanwhile
        h.engine.attempts.hand_back = store_down
        row, dedup = await asyncio.wait_for(h.engine.enqueue_one(make_job()), 10)
        assert row.status == JobStatus.RUNNING and not dedup
        stored, _ = await h.job(row.id)
        assert stored.lease_token == row.lease_token

    run(store_url, scenario)


def test_a_cancelled_enqueue_caller_leaves_no_per_job_state(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        if not h.engine.store.is_postgres:
            pytest.skip("direct dispatch at insert is the PostgreSQL path")
        await h.engine.enqueue_one(make_job(job_type="warm"))
        await h.engine.enqueue([make_job()])
        await h.lease(1)
        session = _session("w", "key-a", {"tenant-a"})
        h.engine.open_session(session)
        h.engine.grant(session, 1)
        inserted = asyncio.Event()
        h.after_insert(inserted.set)
        job = make_job()
        caller = asyncio.create_task(h.engine.enqueue_one(job))
        await inserted.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        # The job was leased at insert and still reaches its worker ...
        batch = await asyncio.wait_for(session.outbox.get(), 10)
        [delivered] = batch.jobs
        assert delivered.id == job.id and session.in_flight == {job.id: delivered.lease_token}
        # ... and no map of the engine keeps anything about it.
        for name, value in vars(h.engine).items():
            if isinstance(value, dict):
                assert job.id not in value, f"engine.{name} still holds the job"

    run(store_url, scenario)


def test_a_rejected_outcome_keeps_the_current_holders_entry(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        from coordinator.model import Completion

        [(job_id, _, _)] = await h.engine.enqueue([make_job()])
        stale = _session("stale", "key-a", {"tenant-a"})
        h.engine.open_session(stale)
        h.engine.grant(stale, 1)
        await h.engine.dispatcher.run_pass()
        [first] = _delivered(stale)
        # The operator unlocks the job; another worker holds it now.
        await h.engine.ops.unlock_job(job_id)
        h.engine.close_session(stale)
        live = _session("live", "key-a", {"tenant-a"})
        h.engine.open_session(live)
        h.engine.grant(live, 1)
        await h.engine.dispatcher.run_pass()
        [second] = _delivered(live)
        assert second.id == job_id and live.in_flight == {job_id: second.lease_token}
        [result] = await h.engine.report([Completion(job_id, first.lease_token, b"", "")])
        assert not result.accepted
        assert live.in_flight == {job_id: second.lease_token}
        [result] = await h.engine.report([Completion(job_id, second.lease_token, b"", "")])
        assert result.accepted and live.in_flight == {}

    run(store_url, scenario)


def test_ending_a_session_hands_back_its_jobs_and_pushes_nothing_more(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        from coordinator.errors import Unauthenticated

        ids = [j for j, _, _ in await h.engine.enqueue([make_job() for _ in range(3)])]
        session = _session("w", "key-a", {"tenant-a"})
        h.engine.open_session(session)
        h.engine.grant(session, 10)
        await h.engine.dispatcher.run_pass()
        assert set(session.in_flight) == set(ids)
        revoked = Unauthenticated("the credential 'a' was revoked")
        assert await h.engine.end_session(session, revoked, "worker credential revoked") == 3
        assert session.closed and session.ended_by is revoked
        for job_id in ids:
            row, _ = await h.job(job_id)
            assert (row.status, row.last_error) == (JobStatus.PENDING, "worker credential revoked")
            assert row.max_attempts - row.counted_attempts == 3
        # Jobs leased to it afterwards (a pass that was in flight) go back too.
        [(row, token)] = await h.lease(1, worker="other")
        assert h.engine.dispatcher.deliver([(session, [row])], token) == [(row.id, token)]
        assert "w" not in h.engine.dispatcher.sessions

    run(store_url, scenario)
