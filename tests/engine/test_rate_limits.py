"""Rate limits on both stores: a burst is admitted, then one start per
interval; throttled rows are never touched; a limit set on one replica holds
on another at once, by every way a job starts."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from coordinator.engine import WorkerSession
from coordinator.engine.explain import explain
from coordinator.engine.rate_limits import (
    MAX_SLOW_LEVEL,
    RECOVERY_PERIODS,
    RateBucket,
    interval_us,
    next_start_at,
    push_back,
    take,
)
from coordinator.errors import FailedPrecondition, InvalidArgument
from coordinator.model import Completion, Failure, JobFilter, JobStatus, LimitKind, RateLimit
from wfj_engine import Harness, run
from wfj_testing import T0, make_job

PER_SECOND_5_BURST_3 = RateLimit(LimitKind.JOB_TYPE, "noop", 5, 1000, 3)


def test_gcra_admits_the_burst_then_one_per_interval() -> None:
    limit = PER_SECOND_5_BURST_3
    bucket = RateBucket()
    assert [take(limit, bucket, T0) for _ in range(4)] == [True, True, True, False]
    assert next_start_at(limit, bucket, T0) == T0 + 200_000
    assert not take(limit, bucket, T0 + 199_999)
    assert take(limit, bucket, T0 + 200_000)
    assert not take(limit, bucket, T0 + 200_001)
    # Idle long enough, the whole burst is back (and no more).
    later = T0 + 10_000_000
    assert [take(limit, bucket, later) for _ in range(4)] == [True, True, True, False]


def test_push_back_holds_then_slows_and_recovers() -> None:
    limit = PER_SECOND_5_BURST_3
    bucket = RateBucket()
    push_back(limit, bucket, T0, 2_000_000)
    assert next_start_at(limit, bucket, T0) == T0 + 2_000_000
    assert take(limit, bucket, T0 + 2_000_000)
    # Half the rate now: the next start one doubled interval later, no burst.
    assert next_start_at(limit, bucket, T0 + 2_000_000) == T0 + 2_000_000 + interval_us(limit, 1)
    for _ in range(10):
        push_back(limit, bucket, T0, None)
    assert bucket.slow_level == MAX_SLOW_LEVEL
    recovered = T0 + MAX_SLOW_LEVEL * RECOVERY_PERIODS * 1_000_000 + 100_000_000
    assert next_start_at(limit, bucket, recovered) == recovered
    assert [take(limit, bucket, recovered) for _ in range(4)] == [True, True, True, False]


def _raw_rows(h: Harness, ids: list[str]) -> list[tuple]:
    with h.engine.store.engine.connect() as conn:
        query = sa.text("SELECT * FROM wfj_jobs WHERE id IN :ids ORDER BY id").bindparams(
            sa.bindparam("ids", expanding=True)
        )
        return [tuple(r) for r in conn.execute(query, {"ids": ids})]


def test_burst_then_one_per_interval_and_throttled_rows_untouched(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_rate_limit(PER_SECOND_5_BURST_3)
        ids = [job_id for job_id, _, _ in await h.engine.enqueue([make_job() for _ in range(10)])]
        other = await h.enqueue(job_type="other")
        first = await h.lease(20, types=("noop", "other"))
        assert sorted(r.job_type for r, _ in first) == ["noop", "noop", "noop", "other"]
        waiting = sorted(set(ids) - {r.id for r, _ in first})
        before = _raw_rows(h, waiting)
        # Passes while throttled lease nothing and rewrite nothing.
        assert await h.lease(20) == []
        h.clock.advance(0.1)
        assert await h.lease(20) == []
        assert _raw_rows(h, waiting) == before
        # Explain names the limit and when it admits the next start.
        _, reasons = await explain(h.engine, waiting[0])
        rate = [r for r in reasons if r.kind == "RATE_LIMIT"]
        assert len(rate) == 1 and rate[0].until == T0 + 200_000
        assert "rate limited by job type noop (5 per 1s, burst 3) until" in rate[0].message
        # The dispatcher is told to wake when the limit admits a start.
        assert T0 + 200_000 in h.engine.dispatcher._due
        h.clock.advance(0.1)
        assert len(await h.lease(20)) == 1
        assert await h.lease(20) == []
        h.clock.advance(0.2)
        assert len(await h.lease(20)) == 1
        h.clock.advance(0.4)
        assert len(await h.lease(20)) == 2
        assert other in {r.id for r, _ in first}
        listed = await h.engine.list_rate_limits()
        assert [(limit, until) for limit, until, _ in listed] == [
            (PER_SECOND_5_BURST_3, h.clock.now_us() + 200_000)
        ]

    run(store_url, scenario)


def test_wildcard_limit_applies_to_each_value_and_exact_replaces_it(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_rate_limit(RateLimit(LimitKind.TENANT, "*", 1, 1000, 1))
        await h.engine.set_rate_limit(RateLimit(LimitKind.TENANT, "vip", 10, 1000, 4))
        for tenant in ("a", "b", "vip"):
            await h.engine.enqueue([make_job(tenant_id=tenant) for _ in range(6)])
        leased = await h.lease(50)
        counts = {t: sum(1 for r, _ in leased if r.tenant_id == t) for t in ("a", "b", "vip")}
        assert counts == {"a": 1, "b": 1, "vip": 4}
        assert await h.engine.remove_rate_limit(LimitKind.TENANT, "*")
        assert not await h.engine.remove_rate_limit(LimitKind.TENANT, "*")
        again = await h.lease(50)
        assert {r.tenant_id for r, _ in again} == {"a", "b"} and len(again) == 10

    run(store_url, scenario)


def test_category_rate_limit_named_by_category(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_rate_limit(RateLimit(LimitKind.CATEGORY, "integration", 1, 60_000, 2))
        [(limit, _, _)] = await h.engine.list_rate_limits()
        assert limit.value == "3"
        await h.engine.enqueue([make_job(category=3) for _ in range(5)])
        await h.engine.enqueue([make_job(category=2) for _ in range(5)])
        leased = await h.lease(50)
        assert sorted(r.category for r, _ in leased) == [2] * 5 + [3] * 2

    run(store_url, scenario)


def test_bad_rate_limits_are_refused(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        for bad, message in (
            (RateLimit(LimitKind.TENANT, "", 1, 1000, 1), "value is required"),
            (RateLimit(LimitKind.TENANT, "t", 0, 1000, 1), "starts must be > 0"),
            (RateLimit(LimitKind.TENANT, "t", 1, 0, 1), "period"),
            (RateLimit(LimitKind.TENANT, "t", 1, 1000, -1), "burst"),
        ):
            with pytest.raises(InvalidArgument, match=message):
                await h.engine.set_rate_limit(bad)
        await h.engine.set_rate_limit(RateLimit(LimitKind.TENANT, "t", 7, 1000, 0))
        [(limit, _, _)] = await h.engine.list_rate_limits()
        assert limit.burst == 7

    run(store_url, scenario)


def test_inline_runs_count_and_are_refused_when_throttled(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_rate_limit(RateLimit(LimitKind.JOB_TYPE, "noop", 1, 1000, 1))
        row, _, token = await h.engine.enqueue_inline(make_job(), "http-1", enqueue_if_paused=False)
        assert token is not None and row.status == JobStatus.RUNNING
        with pytest.raises(FailedPrecondition, match="rate limited by job type noop"):
            await h.engine.enqueue_inline(make_job(), "http-1", enqueue_if_paused=False)
        held, _, none = await h.engine.enqueue_inline(make_job(), "http-1", enqueue_if_paused=True)
        assert none is None and held.status == JobStatus.PENDING
        # The inline start used the limit up: a pass leases nothing yet.
        assert await h.lease(5) == []
        h.clock.advance(1)
        assert [r.id for r, _ in await h.lease(5)] == [held.id]

    run(store_url, scenario)


def test_a_rate_limit_holds_on_a_replica_that_has_not_loaded_it(store_url: str) -> None:
    """A replica that has not reloaded the limits after SetRateLimit on
    another replica never starts past it, by any path: the one-statement
    claim, direct dispatch at insert and inline runs."""
    if not store_url.startswith("postgres"):
        pytest.skip("replicas share a PostgreSQL database")

    async def main() -> None:
        a, b = Harness(store_url), Harness(store_url)
        try:
            await b.engine.reload_limits()

            async def not_yet() -> None:
                return None

            real_reload = b.engine.limit_settings.reload_limits
            b.engine.limit_settings.reload_limits = not_yet  # type: ignore[method-assign]
            await a.engine.set_rate_limit(RateLimit(LimitKind.JOB_TYPE, "noop", 1, 60_000, 1))
            assert not b.engine.rates, "b must still hold its old (empty) copy"
            # Direct dispatch at insert to a worker waiting with credit.
            idle = WorkerSession("idle", frozenset({"noop"}))
            b.engine.open_session(idle)
            b.engine.grant(idle, 1)
            row, _ = await b.engine.enqueue_one(make_job())
            assert row.status == JobStatus.PENDING and idle.credits == 1
            b.engine.close_session(idle)
            # Acquisition (the one-statement path b would take without limits).
            b.engine.limit_settings.reload_limits = real_reload  # type: ignore[method-assign]
            await b.engine.enqueue([make_job() for _ in range(4)])
            assert len(await b.lease(5)) == 1
            assert b.engine.rates, "the refused one-statement claim reloads the limits"
            # Inline execution, on both replicas.
            for h in (a, b):
                with pytest.raises(FailedPrecondition, match="rate limited"):
                    await h.engine.enqueue_inline(make_job(), "http-1", enqueue_if_paused=False)
            assert await a.lease(5) == []
            running = await b.engine.list_jobs(JobFilter(statuses=[JobStatus.RUNNING]), 10, "")
            assert len(running.jobs) == 1
        finally:
            await a.engine.stop()
            await b.engine.stop()

    asyncio.run(main())


def test_push_back_holds_the_jobs_rate_limits_once_per_report(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        limit = RateLimit(LimitKind.JOB_TYPE, "noop", 100, 1000, 100)
        await h.engine.set_rate_limit(limit)
        await h.engine.enqueue([make_job() for _ in range(10)])
        await h.engine.enqueue([make_job(job_type="free") for _ in range(2)])
        leased = await h.lease(2) + await h.lease(1, types=("free",))
        (a, ta), (b, tb), (free, tf) = leased
        results = await h.engine.report(
            [
                Completion(a.id, ta, push_back_us=3_000_000),
                Failure(b.id, tb, "429", "Throttled", push_back_us=0),
                Completion(free.id, tf, push_back_us=5_000_000),
            ]
        )
        assert all(r.accepted for r in results)
        [(listed, until, level)] = await h.engine.list_rate_limits()
        # The longest hold asked, and the rate halved once (one report).
        assert (listed, until, level) == (limit, T0 + 3_000_000, 1)
        assert await h.lease(10) == []
        # A resend of the same report is recognised and slows nothing further.
        again = await h.engine.report([Completion(a.id, ta, push_back_us=9_000_000)])
        assert again[0].already_recorded
        assert (await h.engine.list_rate_limits())[0][1:] == (T0 + 3_000_000, 1)
        h.clock.advance(3)
        # After the hold: one start per doubled interval, no burst.
        assert len(await h.lease(10)) == 1
        _, reasons = await explain(
            h.engine,
            (
                await h.engine.list_jobs(
                    JobFilter(statuses=[JobStatus.PENDING], job_type="noop"), 1, ""
                )
            )
            .jobs[0]
            .id,
        )
        assert [r.until for r in reasons if r.kind == "RATE_LIMIT"] == [
            h.clock.now_us() + interval_us(limit, 1)
        ]

    run(store_url, scenario)


def test_push_back_without_a_rate_limit_changes_nothing(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.enqueue([make_job() for _ in range(3)])
        [(row, token)] = await h.lease(1)
        [result] = await h.engine.report([Completion(row.id, token, push_back_us=60_000_000)])
        assert result.accepted
        assert len(await h.lease(5)) == 2
        assert await h.engine.list_rate_limits() == []

    run(store_url, scenario)


def test_retention_deletes_idle_rate_buckets_only(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        from coordinator.chores.retention import RetentionCleaner, RetentionConfig

        await h.engine.set_rate_limit(RateLimit(LimitKind.TENANT, "*", 1, 1000, 1))
        for tenant in ("a", "b", "c"):
            await h.engine.enqueue([make_job(tenant_id=tenant) for _ in range(2)])
        assert len(await h.lease(10)) == 3
        store = h.engine.store
        assert len(store.rate_bucket_list([int(LimitKind.TENANT)])) == 3
        e = h.engine
        cleaner = RetentionCleaner(
            RetentionConfig(batch_size=2),
            clock=e.clock,
            store=e.store,
            run_store=e.run_store,
            attempts=e.attempts,
            dispatcher=e.dispatcher,
        )
        # Not yet due: nothing is idle.
        assert (await cleaner.run_once(h.clock.now_us())).buckets_purged == 0
        h.clock.advance(1)
        first = await cleaner.run_once(h.clock.now_us())
        assert first.buckets_purged == 2 and first.full_batch
        assert (await cleaner.run_once(h.clock.now_us())).buckets_purged == 1
        assert store.rate_bucket_list([int(LimitKind.TENANT)]) == {}
        # The limit holds as before: one start per tenant, then none.
        assert len(await h.lease(10)) == 3
        assert await h.lease(10) == []

    run(store_url, scenario)
