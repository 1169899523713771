"""A job's last error describes its current state or is empty (both stores)."""

from __future__ import annotations

from coordinator.api.convert import job_to_proto
from coordinator.model import AttemptOutcome, Completion, Failure, JobStatus, Release
from wfj_engine import Harness, run
from wfj_testing import make_job


async def _complete(h: Harness, job_id: str) -> None:
    [(row, token)] = await h.lease()
    assert row.id == job_id
    [result] = await h.engine.report([Completion(job_id, token, b"ok")])
    assert result.status == JobStatus.COMPLETED


async def _assert_no_error(h: Harness, job_id: str) -> None:
    job, _ = await h.job(job_id)
    assert job.status == JobStatus.COMPLETED
    assert (job.last_error, job.last_error_kind) == (None, None)
    assert job_to_proto(job).last_error == ""


def test_cancel_retry_success_leaves_no_stale_error(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        cancelled = await h.engine.ops.cancel_job(job_id, "sent by mistake")
        assert cancelled.last_error == "cancelled: sent by mistake"
        retried = await h.engine.ops.retry_job(job_id, keep_attempts=False)
        assert (retried.status, retried.last_error) == (JobStatus.PENDING, None)
        await _complete(h, job_id)
        await _assert_no_error(h, job_id)

    run(store_url, scenario)


def test_failure_then_success_leaves_the_error_in_the_history_only(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=3)
        [(_, token)] = await h.lease()
        await h.engine.report([Failure(job_id, token, "boom", "IOError")])
        job, _ = await h.job(job_id)
        assert (job.status, job.last_error, job.last_error_kind) == (
            JobStatus.PENDING,
            "boom",
            "IOError",
        )
        h.clock.advance(3600)
        await _complete(h, job_id)
        await _assert_no_error(h, job_id)
        _, attempts = await h.job(job_id)
        assert [(a.outcome, a.error) for a in attempts] == [
            (AttemptOutcome.FAILED, "boom"),
            (AttemptOutcome.COMPLETED, None),
        ]

    run(store_url, scenario)


def test_inline_hand_off_then_success_leaves_no_stale_error(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        row, _, token = await h.engine.enqueue_inline(make_job(), "http-1", enqueue_if_paused=False)
        await h.engine.report([Release(row.id, token, "handed off: too slow for a request")])
        job, _ = await h.job(row.id)
        assert (job.status, job.last_error) == (
            JobStatus.PENDING,
            "handed off: too slow for a request",
        )
        await _complete(h, row.id)
        await _assert_no_error(h, row.id)

    run(store_url, scenario)


def test_retry_of_a_faulted_job_clears_its_error(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=1)
        [(_, token)] = await h.lease()
        await h.engine.report([Failure(job_id, token, "boom")])
        assert (await h.job(job_id))[0].last_error == "boom"
        retried = await h.engine.ops.retry_job(job_id, keep_attempts=True)
        assert (retried.status, retried.last_error, retried.last_error_kind) == (
            JobStatus.PENDING,
            None,
            None,
        )

    run(store_url, scenario)
