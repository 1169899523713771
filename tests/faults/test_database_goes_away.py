"""PostgreSQL goes away mid-run.

The machine's PostgreSQL server is shared with other test runs, so it is never
restarted here. Instead the test does to its own database what a restart does
to a coordinator: every backend connection is killed (``pg_terminate_backend``),
and for a while new connections are refused (``ALTER DATABASE … ALLOW_CONNECTIONS
false``). Meanwhile health is NOT_SERVING, calls fail with UNAVAILABLE (never
INTERNAL), and afterwards the coordinator recovers by itself and every job
completes exactly once.
"""

from __future__ import annotations

import grpc
import psycopg
import pytest
from conftest import PG_ADMIN_URL
from faults.harness import (
    CoordinatorProcess,
    WorkerPool,
    check_run,
    count_starts,
    enqueue_work,
    scaled,
    wait_all_completed,
)
from grpc_health.v1 import health_pb2, health_pb2_grpc

from wfj_testing import wait_until
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc

pytestmark = pytest.mark.e2e


def terminate_backends(database: str) -> int:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return len(rows)


def allow_connections(database: str, allowed: bool) -> None:
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {str(allowed).lower()}')


def health_status(channel: grpc.Channel) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return stub.Check(health_pb2.HealthCheckRequest(), timeout=10).status


def test_database_connections_killed_and_refused(tmp_path, pg_url) -> None:
    database = pg_url.rsplit("/", 1)[1]
    total = scaled(2000)
    coordinator = CoordinatorProcess(pg_url, tmp_path)
    pool = WorkerPool(coordinator.target, tmp_path, 2, "--concurrency", "25")
    channel = grpc.insecure_channel(coordinator.target)
    kills = 0
    try:
        ids = enqueue_work(coordinator.target, total, ms=20)
        # Connections killed under a running coordinator, three times.
        for _ in range(3):
            goal = count_starts(pool.records) + 300
            wait_until(lambda goal=goal: count_starts(pool.records) >= goal, 60, "progress")
            kills += terminate_backends(database)
        # The database refuses connections for a while.
        allow_connections(database, False)
        try:
            kills += terminate_backends(database)
            wait_until(
                lambda: health_status(channel) == health_pb2.HealthCheckResponse.NOT_SERVING,
                30,
                "health to turn NOT_SERVING",
            )
            scheduler = spb_grpc.JobSchedulerServiceStub(channel)
            with pytest.raises(grpc.RpcError) as info:
                scheduler.GetJob(spb.GetJobRequest(job_id=ids[0]), timeout=10)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE, info.value.details()
        finally:
            allow_connections(database, True)
        wait_until(
            lambda: health_status(channel) == health_pb2.HealthCheckResponse.SERVING,
            30,
            "health to turn SERVING again",
        )
        wait_all_completed(pg_url, total, 120)
    finally:
        channel.close()
        pool.stop()
        coordinator.stop()
    log = coordinator.log_text()
    assert "unexpected error" not in log, "a database failure became INTERNAL"
    check_run(pg_url, ids, pool.records, kills, "database goes away")
