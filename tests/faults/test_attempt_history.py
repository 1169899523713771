"""Regression: a released attempt and the attempt after it both stay in the history.

Found by the workers-die scenario: a job handed back unstarted ("worker
disconnected") had its attempt number reused by the next lease, so recording
that attempt's outcome hit the history's unique (job, number) key and the
outcome could never be recorded.
"""

from __future__ import annotations

from coordinator.model import AttemptOutcome, Completion, JobStatus, Release
from wfj_engine import Harness, run


def test_release_then_complete_records_both_attempts(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=1)
        [(_, token)] = await h.lease()
        await h.engine.report([Release(job_id, token, "worker disconnected")])
        [(row, token2)] = await h.lease()
        # The release did not use up the only attempt.
        assert row.id == job_id and row.counted_attempts <= row.max_attempts == 1
        [result] = await h.engine.report([Completion(job_id, token2, b"ok")])
        assert result.accepted
        job, attempts = await h.job(job_id)
        assert job.status == JobStatus.COMPLETED
        assert [(a.number, a.outcome) for a in attempts] == [
            (1, AttemptOutcome.RELEASED),
            (2, AttemptOutcome.COMPLETED),
        ]

    run(store_url, scenario)
