"""Real coordinator and worker processes over loopback gRPC, on both stores."""

from __future__ import annotations

import collections
import time

from wfj_testing import read_records, wait_until
from worker_sdk import AdminClient, JobRequest, SchedulerClient


def test_two_workers_complete_2000_jobs_exactly_once(e2e_database, processes) -> None:
    coordinator = processes["coordinator"](e2e_database)
    workers = [processes["worker"](coordinator.target, "--concurrency", "100") for _ in range(2)]
    total = 2000
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        # Enqueue only once both workers are connected and wait with credit: one
        # worker must not finish every job before the other has connected.
        wait_until(
            lambda: (
                {w.worker_id for w in admin.list_workers() if w.credits > 0}
                == {"worker-2", "worker-3"}
            ),
            60,
            "both workers to connect and grant credit",
        )
        started = time.monotonic()
        ids: list[str] = []
        for first in range(0, total, 250):
            batch = [
                JobRequest("noop", {"n": i}, tenant_id=f"tenant-{i % 4}")
                for i in range(first, first + 250)
            ]
            ids.extend(r.job_id for r in scheduler.enqueue_batch(batch))
        wait_until(lambda: admin.get_stats().completed == total, 120, "all jobs to complete")
        elapsed = time.monotonic() - started
        print(
            f"\n2000 jobs end to end on {e2e_database.split(':')[0]}: {total / elapsed:.0f} jobs/s"
        )
        stats = admin.get_stats()
        assert (stats.pending, stats.running, stats.faulted) == (0, 0, 0)
        sample = [admin.get_job(job_id) for job_id in ids[::97]]
    records = read_records(*(w.record for w in workers))
    starts = collections.Counter(job_id for event, job_id, *_ in records if event == "start")
    assert set(starts) == set(ids)
    assert max(starts.values()) == 1, "some handler ran twice without a crash"
    assert {w for event, _, w, _ in records} == {"worker-2", "worker-3"}, "both workers took jobs"
    for job in sample:
        assert [a.outcome for a in job.attempts] == ["COMPLETED"]


def test_killed_worker_job_is_finished_by_another(e2e_database, processes) -> None:
    coordinator = processes["coordinator"](e2e_database)
    doomed = processes["worker"](coordinator.target)
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        job = scheduler.enqueue("sleep", {"seconds": 3600}, heartbeat_timeout=2)
        wait_until(lambda: read_records(doomed.record), 30, "the first worker to start the job")
        doomed.kill()
        survivor = processes["worker"](coordinator.target)
        # The second worker can only get the job after the dead worker's lease expires.
        wait_until(lambda: read_records(survivor.record), 30, "the second worker to start the job")
        admin_view = admin.get_job(job.id)
        assert admin_view.status == "RUNNING"
        assert admin_view.attempt == 2
        assert [a.outcome for a in admin_view.attempts] == ["LEASE_EXPIRED"]
        assert admin_view.attempts[0].worker_id == "worker-2"
