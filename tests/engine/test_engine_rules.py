"""Engine rules (retries, leases, fairness) on both stores, with a manual clock.

The dispatcher loop is not started: tests run single acquisition passes and
reaper runs themselves, so every step is deterministic.
"""

from __future__ import annotations

from collections import Counter

import pytest
import sqlalchemy as sa

from coordinator.errors import InvalidArgument, LeaseLost, NotFound
from coordinator.model import Completion, Failure, JobStatus, RetryPolicy
from wfj_engine import Harness, run
from wfj_testing import SECOND, T0, make_job

NO_JITTER = RetryPolicy(initial_backoff_ms=10_000, backoff_multiplier=2.0, jitter=0.0).to_json()


def test_retry_with_backoff_then_success(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(retry_policy=NO_JITTER, max_attempts=3)
        [(row, token)] = await h.lease()
        [result] = await h.engine.report([Failure(job_id, token, "boom", "IOError")])
        assert result.status == JobStatus.PENDING
        job, _ = await h.job(job_id)
        assert job.due_at == T0 + 10 * SECOND
        h.clock.advance(9)
        assert await h.lease() == []
        h.clock.advance(1)
        [(row, token2)] = await h.lease()
        assert row.attempt == 2
        [(done)] = await h.engine.report([Failure(job_id, token2, "again", "IOError")])
        job, _ = await h.job(job_id)
        assert job.due_at == T0 + 10 * SECOND + 20 * SECOND  # doubled
        h.clock.advance(20)
        [(row, token3)] = await h.lease()
        await h.engine.report([Completion(job_id, token3, b"ok")])
        job, attempts = await h.job(job_id)
        assert job.status == JobStatus.COMPLETED
        assert [a.outcome for a in attempts] == [2, 2, 1]
        assert [a.error for a in attempts] == ["boom", "again", None]

    run(store_url, scenario)


def test_exhausted_attempts_fault_the_job(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(retry_policy=NO_JITTER, max_attempts=2)
        for _ in range(2):
            [(_, token)] = await h.lease()
            await h.engine.report([Failure(job_id, token, "boom", "IOError")])
            h.clock.advance(60)
        job, attempts = await h.job(job_id)
        assert job.status == JobStatus.FAULTED
        assert job.last_error == "boom"
        assert len(attempts) == 2
        assert await h.lease() == []

    run(store_url, scenario)


def test_non_retryable_failures_fault_at_once(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        flagged = await h.enqueue(max_attempts=5)
        by_kind = await h.enqueue(
            max_attempts=5,
            retry_policy=RetryPolicy(non_retryable_error_kinds=("ValidationError",)).to_json(),
        )
        leased = dict((row.id, token) for row, token in await h.lease())
        await h.engine.report(
            [
                Failure(flagged, leased[flagged], "bad input", "ValueError", non_retryable=True),
                Failure(by_kind, leased[by_kind], "bad schema", "ValidationError"),
            ]
        )
        for job_id in (flagged, by_kind):
            job, attempts = await h.job(job_id)
            assert job.status == JobStatus.FAULTED
            assert len(attempts) == 1

    run(store_url, scenario)


def test_handler_chosen_retry_time(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, token)] = await h.lease()
        await h.engine.report([Failure(job_id, token, "later", "", retry_at=T0 + 300 * SECOND)])
        job, _ = await h.job(job_id)
        assert (job.status, job.due_at) == (JobStatus.PENDING, T0 + 300 * SECOND)

    run(store_url, scenario)


def test_expired_lease_counts_as_a_failed_attempt(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        retried = await h.enqueue(heartbeat_timeout_ms=2_000, max_attempts=2)
        faulted = await h.enqueue(heartbeat_timeout_ms=2_000, max_attempts=1)
        leased = dict((row.id, token) for row, token in await h.lease())
        h.clock.advance(3)
        result = await h.chores.lease_reaper.run_once(h.clock.now_us())
        assert result.reclaimed == 2
        job, attempts = await h.job(retried)
        assert job.status == JobStatus.PENDING
        assert [(a.outcome, a.error) for a in attempts] == [(3, "lease expired")]
        job, _ = await h.job(faulted)
        assert job.status == JobStatus.FAULTED
        # The dead worker's late completion is rejected and changes nothing.
        with pytest.raises(LeaseLost, match="lease lost"):
            await h.engine.report_one(Completion(retried, leased[retried], b"late"))
        assert (await h.job(retried))[0].status == JobStatus.PENDING

    run(store_url, scenario)


def test_heartbeat_keeps_a_lease_alive(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(heartbeat_timeout_ms=2_000)
        [(_, token)] = await h.lease()
        for _ in range(5):
            h.clock.advance(1.5)
            [answer] = await h.engine.heartbeat("w1", [(job_id, token)])
            assert answer.state == "extended"
            assert (await h.chores.lease_reaper.run_once(h.clock.now_us())).reclaimed == 0
        [answer] = await h.engine.heartbeat("w1", [(job_id, "not-the-token")])
        assert answer.state == "lost"

    run(store_url, scenario)


def test_unknown_and_malformed_job_ids(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        with pytest.raises(NotFound):
            await h.engine.get_job("0190b6e2-5c1a-7d3e-8f00-123456789abc")
        with pytest.raises(InvalidArgument, match="malformed"):
            await h.engine.get_job("not-an-id")
        with pytest.raises(NotFound):
            await h.engine.report_one(Completion("0190b6e2-5c1a-7d3e-8f00-123456789abc", "t"))

    run(store_url, scenario)


def test_tenants_share_capacity_equally_whatever_their_backlog(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        big = [make_job(tenant_id="big") for _ in range(1000)]
        small = [make_job(tenant_id=f"small-{i}") for i in range(4) for _ in range(50)]
        await h.engine.enqueue(big)
        await h.engine.enqueue(small)
        taken: Counter[str] = Counter()
        # 5 tenants backlogged; 20 passes of 10 jobs = 200 jobs, fair share 40 each.
        for _ in range(20):
            for row, _ in await h.lease(10):
                taken[row.tenant_id] += 1
        assert sum(taken.values()) == 200
        for tenant, count in taken.items():
            assert abs(count - 40) <= 4, (tenant, taken)

    run(store_url, scenario)


def test_quiet_tenant_job_starts_within_a_few_acquisitions(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.enqueue([make_job(tenant_id="busy") for _ in range(2000)])
        for _ in range(10):
            await h.lease(5)
        quiet = await h.enqueue(tenant_id="quiet")
        first_pass = [row.id for row, _ in await h.lease(5)]
        assert quiet in first_pass

    run(store_url, scenario)


def test_weights_scale_shares(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_tenant_weight("heavy", 3)
        await h.engine.enqueue([make_job(tenant_id="heavy") for _ in range(400)])
        await h.engine.enqueue([make_job(tenant_id="light") for _ in range(400)])
        taken: Counter[str] = Counter()
        for _ in range(20):
            for row, _ in await h.lease(10):
                taken[row.tenant_id] += 1
        assert taken["heavy"] == 150 and taken["light"] == 50, taken

    run(store_url, scenario)


def test_an_outcome_named_twice_in_one_report_is_recorded_once(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, token)] = await h.lease()
        first, second = await h.engine.report(
            [Completion(job_id, token, b"a"), Completion(job_id, token, b"b")]
        )
        assert (first.accepted, second.accepted) == (True, False)
        job, attempts = await h.job(job_id)
        assert job.status == JobStatus.COMPLETED and len(attempts) == 1

    run(store_url, scenario)


def test_a_reaper_that_cannot_take_its_lock_waits_instead_of_spinning(store_url: str) -> None:
    """While another replica holds the reaper's lock (it reclaims the expired
    leases), this replica's run ends nothing and waits ``contended_retry_s``
    before the next, instead of the 10 ms floor."""

    async def scenario(h: Harness) -> None:
        if not h.engine.store.capabilities.advisory_lock_leadership:
            pytest.skip("one coordinator per SQLite file: no other replica holds the lock")
        await h.enqueue(heartbeat_timeout_ms=2_000)
        await h.lease()
        h.clock.advance(3)
        reaper = h.chores.lease_reaper
        with h.engine.store.engine.connect() as other:
            other.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext('wfj_lease_reaper'))"))
            result = await reaper.run_once(h.clock.now_us())
            assert (result.reclaimed, result.next_expiry is not None) == (0, True)
            assert reaper.delay_after(result) == reaper.config.contended_retry_s
            other.rollback()
        result = await reaper.run_once(h.clock.now_us())
        assert result.reclaimed == 1
        assert reaper.delay_after(result) == reaper.config.max_interval_s

    run(store_url, scenario)
