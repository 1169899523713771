"""Inline (transactional) execution on both stores."""

from __future__ import annotations

import pytest

from coordinator.errors import FailedPrecondition
from coordinator.model import (
    Completion,
    ConcurrencyLimit,
    JobFilter,
    JobStatus,
    LimitKind,
    PauseKind,
    PauseScope,
)
from wfj_engine import Harness, run
from wfj_testing import make_job


def test_inline_job_is_leased_to_the_caller_at_enqueue(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        row, dedup, token = await h.engine.enqueue_inline(
            make_job(), "http-1", enqueue_if_paused=False
        )
        assert (row.status, row.lease_owner, row.attempt, dedup) == (
            JobStatus.RUNNING,
            "http-1",
            1,
            False,
        )
        assert token and row.lease_token == token
        assert await h.lease() == [], "a remote worker must not get an inline job"
        await h.engine.report([Completion(row.id, token, b"done")])
        job, attempts = await h.job(row.id)
        assert job.status == JobStatus.COMPLETED
        assert [(a.worker_id, a.outcome) for a in attempts] == [("http-1", 1)]

    run(store_url, scenario)


def test_inline_caller_dies_and_a_worker_finishes(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        row, _, _ = await h.engine.enqueue_inline(
            make_job(heartbeat_timeout_ms=1_000), "http-1", enqueue_if_paused=False
        )
        h.clock.advance(2)
        assert (await h.chores.lease_reaper.run_once(h.clock.now_us())).reclaimed == 1
        [(leased, token)] = await h.lease()
        assert (leased.id, leased.attempt) == (row.id, 2)

    run(store_url, scenario)


def test_inline_request_for_a_paused_scope(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.pause(PauseScope(PauseKind.DEFINITION, "", "def-1"), "ops", "", None)
        with pytest.raises(FailedPrecondition, match=r"paused \(definition def-1\)"):
            await h.engine.enqueue_inline(make_job(), "http-1", enqueue_if_paused=False)
        page = await h.engine.list_jobs(JobFilter(), 10, "")
        assert page.jobs == [], "a refused inline call stores nothing"
        row, _, token = await h.engine.enqueue_inline(make_job(), "http-1", enqueue_if_paused=True)
        assert (row.status, token, row.lease_token) == (JobStatus.PENDING, None, None)

    run(store_url, scenario)


def test_inline_idempotency(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        first, _, token = await h.engine.enqueue_inline(
            make_job(idempotency_key="req-1"), "http-1", enqueue_if_paused=False
        )
        again, dedup, token2 = await h.engine.enqueue_inline(
            make_job(idempotency_key="req-1"), "http-2", enqueue_if_paused=False
        )
        assert (again.id, dedup, token2) == (first.id, True, None)

    run(store_url, scenario)


def test_inline_runs_take_a_slot_under_concurrency_limits(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_limit(ConcurrencyLimit(LimitKind.JOB_TYPE, "noop", 1))
        first, _, token = await h.engine.enqueue_inline(
            make_job(), "http-1", enqueue_if_paused=False
        )
        assert first.status == JobStatus.RUNNING and token
        # The inline run holds the only slot: neither a worker nor a second
        # inline call gets another job of the type.
        await h.engine.enqueue([make_job()])
        assert await h.lease() == []
        with pytest.raises(FailedPrecondition, match=r"concurrency limit full \(job type noop"):
            await h.engine.enqueue_inline(make_job(), "http-2", enqueue_if_paused=False)
        page = await h.engine.list_jobs(JobFilter(statuses=[JobStatus.RUNNING]), 10, "")
        assert [j.id for j in page.jobs] == [first.id]
        # Asked to queue instead, the job is stored PENDING and not leased.
        queued, _, none = await h.engine.enqueue_inline(
            make_job(), "http-2", enqueue_if_paused=True
        )
        assert (queued.status, none, queued.lease_token) == (JobStatus.PENDING, None, None)
        # The slot frees: an inline call runs again.
        await h.engine.report([Completion(first.id, token, b"done")])
        again, _, token = await h.engine.enqueue_inline(
            make_job(), "http-3", enqueue_if_paused=False
        )
        assert again.status == JobStatus.RUNNING and token

    run(store_url, scenario)
