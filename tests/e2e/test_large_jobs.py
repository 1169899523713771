"""Large jobs through a real coordinator and worker process: batches never
exceed what the worker's channel accepts, on both stores."""

from __future__ import annotations

import pytest

from wfj_testing import read_records, wait_until
from worker_sdk import AdminClient, JobRequest, SchedulerClient

BLOB = "x" * 900_000  # a JSON payload of about 0.9 MiB, under the 1 MiB limit


@pytest.mark.parametrize(
    "receive_limit", [None, 4 * 1024 * 1024], ids=["sdk-default", "grpc-default-4MiB"]
)
def test_forty_jobs_of_0_9_mib_to_a_worker_of_concurrency_40_all_complete(
    e2e_database, processes, receive_limit
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        # Enqueued before the worker connects, so its 40 credits lease all of
        # them in one acquisition: one batch of about 36 MB.
        ids = []
        for first in range(0, 40, 4):
            batch = [JobRequest("noop", {"n": i, "blob": BLOB}) for i in range(first, first + 4)]
            ids.extend(r.job_id for r in scheduler.enqueue_batch(batch))
        args = ["--concurrency", "40"]
        if receive_limit:
            args += ["--max-receive-bytes", str(receive_limit)]
        worker = processes["worker"](coordinator.target, *args)
        wait_until(lambda: admin.get_stats().completed == 40, 90, "all 40 jobs to complete")
        for job_id in ids:
            job = admin.get_job(job_id)
            assert [a.outcome for a in job.attempts] == ["COMPLETED"], job.attempts
    starts = [job_id for event, job_id, *_ in read_records(worker.record) if event == "start"]
    assert sorted(starts) == sorted(ids)
    assert "larger than max" not in worker.log()
