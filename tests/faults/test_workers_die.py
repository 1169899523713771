"""Workers SIGKILLed and restarted at random moments over a run of 5,000 jobs.

Every job completes, its outcome is recorded once, and every re-execution is
explained by an expired lease in its attempt history.
"""

from __future__ import annotations

import random

import pytest
from faults.harness import (
    CoordinatorProcess,
    WorkerPool,
    check_run,
    count_starts,
    count_status,
    enqueue_work,
    scaled,
    wait_all_completed,
)

from coordinator.model import JobStatus
from wfj_testing import wait_until

pytestmark = pytest.mark.e2e


def test_workers_killed_at_random_lose_nothing(tmp_path, fault_database) -> None:
    total = scaled(5000)
    coordinator = CoordinatorProcess(fault_database, tmp_path)
    # 3 x 10 handlers on 10-40 ms jobs: about 1,200 jobs/s, so the run lasts
    # seconds however fast the coordinator is and every planned kill lands.
    pool = WorkerPool(coordinator.target, tmp_path, 3, "--concurrency", "10")
    rng = random.Random(20240607)
    # Eight kills at random points spread over the first 70% of the run.
    kill_at = [int(total * (0.05 + 0.08 * k)) + rng.randrange(0, total // 50 + 1) for k in range(8)]
    try:
        ids = enqueue_work(coordinator.target, total, ms=40, min_ms=10)

        def finished() -> bool:
            return count_status(fault_database, JobStatus.COMPLETED) >= total

        for goal in kill_at:
            wait_until(
                lambda goal=goal: count_starts(pool.records) >= goal or finished(),
                120,
                "progress between kills",
                interval=0.02,
            )
            if finished():
                break
            pool.kill_one(rng)
        wait_all_completed(fault_database, total, 120)
    finally:
        pool.stop()
        coordinator.stop()
    summary = check_run(fault_database, ids, pool.records, pool.kills, "workers die")
    assert summary.kills >= 5
