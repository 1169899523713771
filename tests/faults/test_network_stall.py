"""A worker whose network path stalls loses its lease on time, and its late
CompleteJob is rejected with FAILED_PRECONDITION ("lease lost").

The worker talks to the coordinator through a small TCP proxy in the test;
stalling the proxy (it stops forwarding, connections stay open) is what a
hung network path looks like to both ends.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from faults.harness import CoordinatorProcess, StallingProxy, check_run
from google.protobuf import duration_pb2

from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

pytestmark = pytest.mark.e2e


def test_stalled_worker_loses_its_lease_and_late_complete_is_rejected(tmp_path) -> None:
    coordinator = CoordinatorProcess(f"sqlite:///{tmp_path / 'stall.db'}", tmp_path)
    records = tmp_path / "executions.txt"
    try:
        job_id = asyncio.run(_scenario(coordinator, records))
    finally:
        coordinator.stop()
    # One stall; the stalled attempt's work is done again by the healthy worker.
    summary = check_run(coordinator.database_url, [job_id], [records], 1, "network stall")
    assert (summary.re_executions, summary.lost, summary.duplicates) == (1, 0, 0)


def _record_start(records: Path, leased: wpb.LeasedJob, worker_id: str) -> None:
    """A handler start, in the execution-record form ``check_run`` reads."""
    with records.open("a") as out:
        out.write(f"start {leased.job.id} {leased.job.attempt} {worker_id}\n")


async def _scenario(coordinator: CoordinatorProcess, records: Path) -> str:
    proxy = StallingProxy(coordinator.port)
    proxy_port = await proxy.start()
    direct = grpc.aio.insecure_channel(coordinator.target)
    via_proxy = grpc.aio.insecure_channel(f"127.0.0.1:{proxy_port}")
    scheduler = spb_grpc.JobSchedulerServiceStub(direct)
    admin = apb_grpc.AdminServiceStub(direct)
    stalled_worker = wpb_grpc.WorkerServiceStub(via_proxy)
    try:
        job = (
            await scheduler.Enqueue(
                spb.EnqueueRequest(
                    job=jpb.JobSpec(
                        job_type="stall",
                        tenant_id="t",
                        payload=jpb.Payload(data=b"{}"),
                        # Long enough that a loaded machine still heartbeats
                        # before the first lease runs out.
                        heartbeat_timeout=duration_pb2.Duration(seconds=3),
                    )
                ),
                timeout=10,
            )
        ).job
        leased = await _acquire_one(stalled_worker, "stalled")
        assert leased.job.id == job.id
        _record_start(records, leased, "stalled")
        ref = wpb.LeaseRef(job_id=job.id, lease_token=leased.lease_token)
        beat = await stalled_worker.Heartbeat(
            wpb.HeartbeatRequest(worker_id="stalled", leases=[ref]), timeout=10
        )
        assert beat.leases[0].state == wpb.LEASE_STATE_EXTENDED
        last_expiry = beat.leases[0].lease_expire_time.ToMicroseconds()

        # The path stalls: heartbeats stop arriving, the handler finishes anyway.
        proxy.flowing.clear()
        late_complete = asyncio.ensure_future(
            stalled_worker.CompleteJob(
                wpb.CompleteJobRequest(job_id=job.id, lease_token=leased.lease_token),
                timeout=60,
            )
        )
        expired = await _wait_for(
            lambda: _attempts(admin, job.id),
            lambda attempts: len(attempts) >= 1,
            "the stalled lease to expire",
        )
        assert expired[0].outcome == jpb.ATTEMPT_OUTCOME_LEASE_EXPIRED
        # Reclaimed on time: not before the lease ran out.
        assert expired[0].end_time.ToMicroseconds() >= last_expiry

        # The path recovers; the late outcome is refused and changes nothing.
        proxy.flowing.set()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await late_complete
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "lease lost" in info.value.details()

        # Another worker runs the job; its outcome is the one recorded.
        healthy = wpb_grpc.WorkerServiceStub(direct)
        again = await _acquire_one(healthy, "healthy")
        assert again.job.id == job.id and again.job.attempt == 2
        _record_start(records, again, "healthy")
        await healthy.CompleteJob(
            wpb.CompleteJobRequest(job_id=job.id, lease_token=again.lease_token), timeout=10
        )
        final = (await admin.GetJob(apb.AdminServiceGetJobRequest(job_id=job.id), timeout=10)).job
        assert final.status == jpb.JOB_STATUS_COMPLETED
        assert [a.outcome for a in final.attempts] == [
            jpb.ATTEMPT_OUTCOME_LEASE_EXPIRED,
            jpb.ATTEMPT_OUTCOME_COMPLETED,
        ]
        return job.id
    finally:
        await via_proxy.close(grace=None)
        await direct.close(grace=None)
        await proxy.close()


async def _acquire_one(stub: wpb_grpc.WorkerServiceStub, worker_id: str) -> wpb.LeasedJob:
    done = asyncio.Event()

    async def requests():
        yield wpb.AcquireJobsRequest(
            hello=wpb.WorkerHello(worker_id=worker_id, job_types=["stall"])
        )
        yield wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=1))
        await done.wait()

    call = stub.AcquireJobs(requests())
    try:
        async for response in call:
            if response.WhichOneof("kind") == "jobs":
                return response.jobs.jobs[0]
        raise AssertionError("the stream ended without a job")
    finally:
        done.set()
        call.cancel()


async def _attempts(admin: apb_grpc.AdminServiceStub, job_id: str) -> list[jpb.JobAttempt]:
    reply = await admin.GetJob(apb.AdminServiceGetJobRequest(job_id=job_id), timeout=10)
    return list(reply.job.attempts)


async def _wait_for(fetch, ready, what: str, timeout: float = 30.0):
    async with asyncio.timeout(timeout):
        while True:
            value = await fetch()
            if ready(value):
                return value
            await asyncio.sleep(0.05)
