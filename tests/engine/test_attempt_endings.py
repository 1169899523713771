"""Every way an attempt ends is followed the same way (coordinator/engine/attempts.py):
telemetry hears of it, callers waiting for the job are woken, and the job is no
longer in flight on the stream it was delivered to. Both stores; manual clock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

import pytest

from coordinator.engine import LeaseBatch, WorkerSession
from coordinator.model import AttemptEnd, Completion, Failure, JobRow, JobStatus
from coordinator.telemetry.hooks import EngineTelemetry
from wfj_engine import Harness, run
from wfj_testing import make_job


class Recorded(EngineTelemetry):
    """Which job ids each attempt-ending hook was told of, and with which status."""

    def __init__(self) -> None:
        self.outcome_ends: dict[str, JobStatus] = {}
        self.completed: set[str] = set()
        self.reaped_ends: dict[str, JobStatus] = {}

    def outcomes(self, completed: Collection[str], ends: Mapping[str, AttemptEnd]) -> None:
        self.completed.update(completed)
        self.outcome_ends.update({j: e.new_status for j, e in ends.items()})

    def reaped(self, ends: Sequence[AttemptEnd]) -> None:
        self.reaped_ends.update({e.job_id: e.new_status for e in ends})

    def status_of(self, job_id: str) -> JobStatus | None:
        if job_id in self.completed:
            return JobStatus.COMPLETED
        return self.outcome_ends.get(job_id) or self.reaped_ends.get(job_id)


async def _lease_on_open_stream(h: Harness) -> tuple[WorkerSession, JobRow, str]:
    session = WorkerSession("w1", frozenset({"noop"}), max_batch_size=10)
    h.engine.open_session(session)
    h.engine.grant(session, 1)
    await h.engine.dispatcher.run_pass()
    item = session.outbox.get_nowait()
    assert isinstance(item, LeaseBatch)
    [row] = item.jobs
    return session, row, item.lease_token


Ending = Callable[[Harness, WorkerSession, JobRow, str], Awaitable[None]]


async def _complete(h: Harness, s: WorkerSession, row: JobRow, token: str) -> None:
    await h.engine.report([Completion(row.id, token)])


async def _fail(h: Harness, s: WorkerSession, row: JobRow, token: str) -> None:
    await h.engine.report([Failure(row.id, token, "boom", "IOError")])


async def _lease_expires(h: Harness, s: WorkerSession, row: JobRow, token: str) -> None:
    h.clock.advance(31)
    assert (await h.chores.lease_reaper.run_once(h.clock.now_us())).reclaimed == 1


async def _execution_timeout(h: Harness, s: WorkerSession, row: JobRow, token: str) -> None:
    chore = h.chores.execution_timeouts
    h.clock.advance(1 + chore.config.grace_s + 0.1)
    assert (await chore.run_once()).ended == 1


async def _unlock(h: Harness, s: WorkerSession, row: JobRow, token: str) -> None:
    await h.engine.ops.unlock_job(row.id)


async def _stream_ends(h: Harness, s: WorkerSession, row: JobRow, token: str) -> None:
    assert await h.engine.end_session(s, None, "stream ended") == 1


ENDINGS: dict[str, Ending] = {
    "report-completion": _complete,
    "report-failure": _fail,
    "lease-reaper": _lease_expires,
    "execution-timeout": _execution_timeout,
    "unlock": _unlock,
    "stream-end-hand-back": _stream_ends,
}


@pytest.mark.parametrize("how", sorted(ENDINGS))
def test_each_way_an_attempt_ends_reaches_telemetry_waiters_and_in_flight(
    store_url: str, how: str
) -> None:
    async def scenario(h: Harness) -> None:
        recorded = Recorded()
        h.engine.telemetry = recorded
        await h.engine.enqueue([make_job(execution_timeout_ms=1000, max_attempts=1)])
        session, row, token = await _lease_on_open_stream(h)
        assert session.in_flight == {row.id: token}
        if how != "report-completion":
            # A cancel request makes every ending final, so a waiter is due.
            await h.engine.ops.cancel_job(row.id, "test")
        waiter = h.engine.attempts.waiters.event(row.id)
        await ENDINGS[how](h, session, row, token)
        job, _ = await h.job(row.id)
        expected = JobStatus.COMPLETED if how == "report-completion" else JobStatus.CANCELLED
        assert job.status == expected
        assert recorded.status_of(row.id) == expected
        if how == "lease-reaper":
            assert row.id in recorded.reaped_ends
        assert waiter.is_set()
        assert h.engine.dispatcher.token_of(row.id) is None
        if not session.closed:
            assert row.id not in session.in_flight

    run(store_url, scenario)


def test_a_pending_job_cancelled_wakes_its_waiters_without_an_attempt(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        recorded = Recorded()
        h.engine.telemetry = recorded
        job_id = await h.enqueue()
        waiter = h.engine.attempts.waiters.event(job_id)
        await h.engine.ops.cancel_job(job_id, "not needed")
        assert waiter.is_set()
        # No attempt ran, so no attempt-ending counter moves.
        assert recorded.status_of(job_id) is None

    run(store_url, scenario)


def test_a_hand_back_before_delivery_reaches_telemetry(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        recorded = Recorded()
        h.engine.telemetry = recorded
        session = WorkerSession("w-gone", frozenset({"noop"}))
        h.engine.open_session(session)
        h.engine.grant(session, 1)
        await h.engine.enqueue([make_job()])
        # The worker leaves while the job is being leased to it.
        original = h.engine.store.job_claim

        def claim(*args, **kwargs):
            rows = original(*args, **kwargs)
            session.close()
            return rows

        h.engine.store.job_claim = claim
        original_fair = h.engine.store.job_claim_fair

        def claim_fair(*args, **kwargs):
            rows = original_fair(*args, **kwargs)
            session.close()
            return rows

        h.engine.store.job_claim_fair = claim_fair
        await h.engine.dispatcher.run_pass()
        [job_id] = list(recorded.outcome_ends)
        assert recorded.outcome_ends[job_id] == JobStatus.PENDING
        job, _ = await h.job(job_id)
        assert (job.status, job.released_attempts) == (JobStatus.PENDING, 1)

    run(store_url, scenario)
