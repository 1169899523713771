"""A real PostgreSQL restart mid-run, twice: ``pg_ctl stop -m immediate`` (a
crash: the server comes back through WAL recovery) and ``-m fast`` (a clean
shutdown that disconnects every client).

The cluster is the test's own (initdb on a free port), never the machine's
shared server. Two coordinator replicas and three workers run throughout, and
jobs keep being enqueued through the outage. While the database is gone both
replicas report NOT_SERVING; once it is back they turn SERVING again without
being restarted, every acknowledged enqueue completes and no job has its
outcome recorded twice. The summary line gives the longest recovery: from the
server accepting connections again to both replicas SERVING.
"""

from __future__ import annotations

import shutil
import time

import pytest
from faults.harness import (
    NOT_SERVING,
    SERVING,
    CoordinatorProcess,
    PgCluster,
    SteadyEnqueuer,
    WorkerPool,
    check_run,
    count_starts,
    enqueue_work,
    scaled,
    wait_all_completed,
    wait_health,
)

from wfj_testing import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def own_cluster():
    PgCluster.skip_unless_available()
    root = PgCluster.workspace()
    cluster = PgCluster(root, "primary")
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()
        shutil.rmtree(root, ignore_errors=True)


def test_postgres_restarted_immediate_and_fast(tmp_path, own_cluster) -> None:
    url = own_cluster.create_database()
    total = scaled(1500)
    first = CoordinatorProcess(url, tmp_path, name="first")
    second = CoordinatorProcess(url, tmp_path, name="second")
    targets = [first.target, second.target]
    pool = WorkerPool(
        f"ipv4:{first.target},{second.target}", tmp_path, 3, "--concurrency", "20", "--round-robin"
    )
    steady: SteadyEnqueuer | None = None
    recoveries: list[float] = []
    try:
        ids = enqueue_work(first.target, total, ms=20)
        steady = SteadyEnqueuer(second.target)
        for mode in ("immediate", "fast"):
            goal = count_starts(pool.records) + scaled(300)
            wait_until(lambda goal=goal: count_starts(pool.records) >= goal, 60, "progress")
            own_cluster.stop(mode)
            wait_health(targets, NOT_SERVING, 30, f"both replicas NOT_SERVING (-m {mode})")
            acknowledged = len(steady.acknowledged)
            own_cluster.start()
            back = time.monotonic()
            wait_health(targets, SERVING, 60, f"both replicas SERVING again (-m {mode})")
            recoveries.append(time.monotonic() - back)
            wait_until(
                lambda n=acknowledged: len(steady.acknowledged) > n, 30, "enqueues to resume"
            )
        steady_ids = steady.stop()
        steady = None
        ids += steady_ids
        wait_all_completed(url, len(ids), 120)
    finally:
        if steady is not None:
            steady.stop()
        pool.stop()
        first.stop()
        second.stop()
    for coordinator in (first, second):
        assert coordinator.starts == 1, "a coordinator was restarted"
        assert "unexpected error" not in coordinator.log_text(), "a database error became INTERNAL"
    check_run(url, ids, pool.records, 2, "postgres restarts", recovery_s=max(recoveries))
