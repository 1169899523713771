"""Races through the engine, forced into a known interleaving on both stores.

The racing calls are the engine's own (``report_one``, the reaper run,
``enqueue_one``); a ``wfj_races.Gate`` holds what their store writes need until
every racer is blocked, so each test exercises the interleaving it names.
Callers whose outcome lost get ``LeaseLost``, which the API answers with
FAILED_PRECONDITION.
"""

from __future__ import annotations

import asyncio
import threading

import grpc
import pytest

from coordinator.api.errors import status_for
from coordinator.errors import LeaseLost
from coordinator.model import AttemptOutcome, Completion, Failure, JobStatus, LeasedForFailure
from wfj_engine import Harness, run
from wfj_races import Gate
from wfj_testing import SECOND, make_job


def _accepted(outcomes: list[object]) -> list[object]:
    return [o for o in outcomes if not isinstance(o, BaseException)]


def _assert_lost(outcomes: list[object], n: int) -> None:
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(lost) == n, outcomes
    for error in lost:
        assert isinstance(error, LeaseLost), error
        assert status_for(error) == grpc.StatusCode.FAILED_PRECONDITION


async def _open(gate: Gate, waiting: int) -> None:
    await asyncio.to_thread(gate.open, waiting=waiting)


def test_two_completes_and_a_fail_on_one_token_one_wins(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, token)] = await h.lease()
        with Gate(store_url) as gate:
            gate.watch(h.engine.store)
            gate.lock_job(job_id)
            racers = [
                asyncio.create_task(h.engine.report_one(Completion(job_id, token, b"one"))),
                asyncio.create_task(h.engine.report_one(Completion(job_id, token, b"two"))),
                asyncio.create_task(
                    h.engine.report_one(Failure(job_id, token, "boom", non_retryable=True))
                ),
            ]
            # PostgreSQL: all three wait on the row; SQLite: the store thread
            # waits on the write lock with the other two queued behind it.
            await _open(gate, 3 if h.engine.store.is_postgres else 1)
            outcomes = await asyncio.gather(*racers, return_exceptions=True)
        # One report is recorded; a second completion under the same token
        # is the same report resent: answered "already recorded", not applied.
        [winner] = [o for o in _accepted(outcomes) if not o.already_recorded]
        resent = [o for o in _accepted(outcomes) if o.already_recorded]
        if winner.status == JobStatus.COMPLETED:
            assert len(resent) == 1 and resent[0].status == JobStatus.COMPLETED
            _assert_lost(outcomes, 1)
        else:
            assert resent == []
            _assert_lost(outcomes, 2)
        job, attempts = await h.job(job_id)
        assert job.status == winner.status
        assert len(attempts) == 1
        if winner.status == JobStatus.COMPLETED:
            assert attempts[0].outcome == AttemptOutcome.COMPLETED
            assert job.result in (b"one", b"two")
        else:
            assert winner.status == JobStatus.FAULTED
            assert (attempts[0].outcome, job.last_error) == (AttemptOutcome.FAILED, "boom")

    run(store_url, scenario)


def test_stale_and_live_holders_reporting_at_once(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(heartbeat_timeout_ms=2_000)
        [(_, stale)] = await h.lease(worker="w1")
        h.clock.advance(3)
        assert (await h.chores.lease_reaper.run_once(h.clock.now_us())).reclaimed == 1
        [(_, live)] = await h.lease(worker="w2")
        with Gate(store_url) as gate:
            gate.watch(h.engine.store)
            gate.lock_job(job_id)
            racers = [
                asyncio.create_task(h.engine.report_one(Completion(job_id, stale, b"old"))),
                asyncio.create_task(h.engine.report_one(Completion(job_id, live, b"new"))),
            ]
            # PostgreSQL: the stale write matches no row and does not wait.
            await _open(gate, 1)
            stale_outcome, live_outcome = await asyncio.gather(*racers, return_exceptions=True)
        _assert_lost([stale_outcome], 1)
        assert live_outcome.accepted and live_outcome.status == JobStatus.COMPLETED
        job, attempts = await h.job(job_id)
        assert (job.status, job.result) == (JobStatus.COMPLETED, b"new")
        assert [(a.number, a.outcome, a.worker_id) for a in attempts] == [
            (1, AttemptOutcome.LEASE_EXPIRED, "w1"),
            (2, AttemptOutcome.COMPLETED, "w2"),
        ]

    run(store_url, scenario)


def test_completion_while_the_reaper_holds_the_expired_attempt_loses(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(heartbeat_timeout_ms=2_000)
        [(_, token)] = await h.lease()
        selected, release = threading.Event(), threading.Event()
        decide = h.chores.lease_reaper.decide

        def held(now: int, row: LeasedForFailure):
            # Runs between the reaper's select and its update, rows locked.
            selected.set()
            assert release.wait(30)
            return decide(now, row)

        h.chores.lease_reaper.decide = held  # type: ignore[method-assign]
        h.clock.advance(3)
        with Gate(store_url) as gate:
            gate.open(waiting=0)
            reaper = asyncio.create_task(h.chores.lease_reaper.run_once(h.clock.now_us()))
            assert await asyncio.to_thread(selected.wait, 30)
            completion = asyncio.create_task(
                h.engine.report_one(Completion(job_id, token, b"late"))
            )
            if h.engine.store.is_postgres:
                await asyncio.to_thread(gate.wait_blocked, 1)  # on the reaper's row lock
            else:
                await asyncio.sleep(0)  # queued behind the reaper on the store thread
            assert not completion.done()
            release.set()
            reaped = await reaper
            outcome = (await asyncio.gather(completion, return_exceptions=True))[0]
        assert reaped.reclaimed == 1
        _assert_lost([outcome], 1)
        job, attempts = await h.job(job_id)
        assert (job.status, job.result, job.lease_token) == (JobStatus.PENDING, None, None)
        assert [a.outcome for a in attempts] == [AttemptOutcome.LEASE_EXPIRED]

    run(store_url, scenario)


def test_enqueues_of_one_key_on_two_engines_get_the_job_being_stored(store_url: str) -> None:
    if store_url.startswith("sqlite"):
        pytest.skip("replicas share PostgreSQL; a SQLite file has one coordinator")

    async def main() -> None:
        replicas = [Harness(store_url), Harness(store_url)]
        try:
            for h in replicas:
                # Lanes known to both replicas: their inserts take the one-statement path.
                await h.engine.enqueue_one(make_job(tenant_id="t-idem"))
            winner = make_job(tenant_id="t-idem", idempotency_key="order-9")
            with Gate(store_url) as gate:
                gate.insert(winner)
                callers = [
                    asyncio.create_task(
                        replicas[i % 2].engine.enqueue_one(
                            make_job(tenant_id="t-idem", idempotency_key="order-9")
                        )
                    )
                    for i in range(20)
                ]
                # Neighbours in the same group commits, without a key.
                neighbours = [
                    asyncio.create_task(h.engine.enqueue_one(make_job(tenant_id="t-idem")))
                    for h in replicas
                ]
                # One group commit per replica, each waiting on the gate's row.
                await _open(gate, 2)
                answers = await asyncio.gather(*callers, *neighbours, return_exceptions=True)
            errors = [a for a in answers if isinstance(a, BaseException)]
            assert errors == []
            keyed, unkeyed = answers[:20], answers[20:]
            assert {(row.id, dedup) for row, dedup in keyed} == {(winner.id, True)}
            assert all(not dedup and row.id != winner.id for row, dedup in unkeyed)
        finally:
            for h in replicas:
                await h.engine.stop()

    asyncio.run(main())


def test_reaper_reclaim_and_completion_commit_one_outcome(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(heartbeat_timeout_ms=2_000)
        [(_, token)] = await h.lease()
        h.clock.advance(3)
        reap_at = h.clock.now_us() + SECOND
        with Gate(store_url) as gate:
            gate.watch(h.engine.store)
            gate.lock_job(job_id)
            completion = asyncio.create_task(h.engine.report_one(Completion(job_id, token, b"r")))
            if h.engine.store.is_postgres:
                # The completion waits on the row; a reaper run meanwhile skips
                # the locked row (SKIP LOCKED) instead of waiting or reclaiming it.
                # (Run once the gate is open, the reaper could lock the row in
                # the instant before the woken completion does, and win: also
                # one outcome, but not the interleaving this test names.)
                await asyncio.to_thread(gate.wait_blocked, 1)
                reaped = await h.chores.lease_reaper.run_once(reap_at)
                assert reaped.reclaimed == 0
                assert not completion.done()
                await _open(gate, 1)
                outcome = (await asyncio.gather(completion, return_exceptions=True))[0]
            else:
                # One writer at a time: whichever reaches the write lock first wins.
                reaper = asyncio.create_task(h.chores.lease_reaper.run_once(reap_at))
                await _open(gate, 1)
                outcome = (await asyncio.gather(completion, return_exceptions=True))[0]
                reaped = await reaper
        job, attempts = await h.job(job_id)
        assert len(attempts) == 1
        if isinstance(outcome, BaseException):
            _assert_lost([outcome], 1)
            assert reaped.reclaimed == 1 and job.status == JobStatus.PENDING
            assert attempts[0].outcome == AttemptOutcome.LEASE_EXPIRED
        else:
            assert reaped.reclaimed == 0 and job.status == JobStatus.COMPLETED
            assert attempts[0].outcome == AttemptOutcome.COMPLETED
        if h.engine.store.is_postgres:
            assert job.status == JobStatus.COMPLETED

    run(store_url, scenario)
