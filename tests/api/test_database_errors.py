"""What a PostgreSQL error means for the call and for health, with real
server errors against a real coordinator: a statement past the statement
timeout is DEADLINE_EXCEEDED and a deadlock ABORTED (both retryable), and
neither turns health NOT_SERVING; only a database that cannot be reached does."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import psycopg
import pytest
import sqlalchemy as sa
from grpc_health.v1 import health_pb2, health_pb2_grpc

from coordinator.store import open_store
from coordinator.store.migrate import upgrade
from coordinator.store.schema import jobs
from wfj_testing import Coordinator, wait_until
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
from workflowjobs.v1 import job_pb2
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING


@pytest.fixture
def pg_url(pg_database: str) -> Iterator[str]:
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_errors")
    try:
        yield url
    finally:
        drop()  # type: ignore[operator]


def _health(channel: grpc.Channel) -> int:
    request = health_pb2.HealthCheckRequest()
    return health_pb2_grpc.HealthStub(channel).Check(request, timeout=30).status


def _waiting_on_a_lock(conn: psycopg.Connection, n: int) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return row is not None and row[0] >= n


def test_a_statement_timeout_and_a_deadlock_are_retryable_and_leave_health_serving(
    pg_url: str, tmp_path: Path
) -> None:
    coordinator = Coordinator(
        pg_url, tmp_path / "c.log", args=("--drain-timeout", "5", "--statement-timeout", "5")
    )
    plain = pg_url.replace("+psycopg", "")
    try:
        with (
            grpc.insecure_channel(coordinator.target) as channel,
            psycopg.connect(plain) as holder,
            psycopg.connect(plain, autocommit=True) as probe,
            ThreadPoolExecutor(2) as pool,
        ):
            scheduler = spb_grpc.JobSchedulerServiceStub(channel)
            admin = apb_grpc.AdminServiceStub(channel)

            def enqueue() -> str:
                spec = job_pb2.JobSpec(job_type="later", tenant_id="t")
                return scheduler.Enqueue(spb.EnqueueRequest(job=spec)).job.id

            # A row lock held past the statement timeout: the cancel's UPDATE
            # waits for it and the server cancels the statement.
            job_id = enqueue()
            holder.execute("SELECT id FROM wfj_jobs WHERE id = %s FOR UPDATE", [job_id])
            with pytest.raises(grpc.RpcError) as timed_out:
                admin.CancelJob(apb.CancelJobRequest(job_id=job_id), timeout=60)
            assert timed_out.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert "statement timeout" in timed_out.value.details()
            holder.rollback()
            assert _health(channel) == SERVING
            assert admin.CancelJob(apb.CancelJobRequest(job_id=job_id)).job.status == (
                job_pb2.JOB_STATUS_CANCELLED
            )

            # A deadlock: the group cancel locks its members in id order and
            # waits for the last, which the holder locked; the holder then
            # waits for the first. The server aborts the cancel (the holder's
            # deadlock_timeout is longer, so it is never the one chosen).
            group = scheduler.CreateGroup(
                spb.CreateGroupRequest(
                    tenant_id="t",
                    completion=job_pb2.JobSpec(job_type="fan-in"),
                    members=[job_pb2.JobSpec(job_type="later") for _ in range(2)],
                )
            )
            first, last = sorted(m.job_id for m in group.members)
            holder.execute("SET deadlock_timeout = '60s'")
            holder.execute("SELECT id FROM wfj_jobs WHERE id = %s FOR UPDATE", [last])
            cancel = pool.submit(
                admin.CancelGroup, apb.CancelGroupRequest(group_id=group.group.id), timeout=60
            )
            wait_until(lambda: _waiting_on_a_lock(probe, 1), 30, "the cancel to wait")
            grabbed = pool.submit(
                holder.execute, "SELECT id FROM wfj_jobs WHERE id = %s FOR UPDATE", [first]
            )
            with pytest.raises(grpc.RpcError) as deadlocked:
                cancel.result(60)
            assert deadlocked.value.code() == grpc.StatusCode.ABORTED
            assert "40P01" in deadlocked.value.details()
            grabbed.result(60)
            holder.rollback()
            assert _health(channel) == SERVING
            # Sent again, it goes through.
            done = admin.CancelGroup(apb.CancelGroupRequest(group_id=group.group.id))
            assert sorted(done.cancelled_job_ids) == [first, last]
        assert "NOT_SERVING" not in coordinator.log()
    finally:
        coordinator.stop()


def test_a_statement_the_driver_refuses_is_a_bug_not_an_outage(pg_url: str) -> None:
    """More parameters than the protocol carries: the driver refuses it before
    sending; the database is fine, so the error passes as the bug it is
    (INTERNAL at the API) rather than as StoreUnavailable (which turns health)."""
    store = open_store(pg_url)
    try:
        upgrade(store)
        many = [str(i) for i in range(70_000)]
        with pytest.raises(sa.exc.OperationalError, match="number of parameters"):
            with store.tx() as conn:
                conn.execute(sa.select(jobs.c.id).where(jobs.c.id.in_(many)))
        store.ping()  # the pool's connection is still good
    finally:
        store.dispose()
