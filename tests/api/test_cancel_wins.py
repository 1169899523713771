"""Once a cancel is requested the job ends CANCELLED whatever its attempt
reports: a raw CompleteJob after a heartbeat answered CANCEL_REQUESTED, and an
inline handler that notices the cancel and returns (or asks for a continuation).
The attempt's own outcome and result stay in the job's history. A real
coordinator, both stores."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from wfj_testing import Coordinator
from worker_sdk import AdminClient, InlineRunner, InlineStatus, JobContext, JobFilter, JobStatus
from workflowjobs.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    job_pb2,
    scheduler_service_pb2,
    scheduler_service_pb2_grpc,
    worker_service_pb2_grpc,
)
from workflowjobs.v1 import worker_service_pb2 as wpb


@pytest.fixture
def coordinator(database: str, tmp_path: Path):
    c = Coordinator(database, tmp_path / "coordinator.log")
    try:
        yield c
    finally:
        c.stop()


def test_a_raw_completion_after_cancel_requested_ends_cancelled(coordinator: Coordinator) -> None:
    with grpc.insecure_channel(coordinator.target) as channel:
        scheduler = scheduler_service_pb2_grpc.JobSchedulerServiceStub(channel)
        worker = worker_service_pb2_grpc.WorkerServiceStub(channel)
        admin = admin_service_pb2_grpc.AdminServiceStub(channel)
        answer = scheduler.Enqueue(
            scheduler_service_pb2.EnqueueRequest(
                job=job_pb2.JobSpec(job_type="noop", tenant_id="t"),
                inline=scheduler_service_pb2.InlineExecution(worker_id="raw-worker"),
            )
        )
        job_id, token = answer.job.id, answer.lease_token
        admin.CancelJob(admin_service_pb2.CancelJobRequest(job_id=job_id, reason="stop it"))
        [status] = worker.Heartbeat(
            wpb.HeartbeatRequest(
                worker_id="raw-worker", leases=[wpb.LeaseRef(job_id=job_id, lease_token=token)]
            )
        ).leases
        assert status.state == wpb.LEASE_STATE_CANCEL_REQUESTED
        result = job_pb2.Payload(data=b'{"done": true}', content_type="application/json")
        worker.CompleteJob(wpb.CompleteJobRequest(job_id=job_id, lease_token=token, result=result))
        job = scheduler.GetJob(
            scheduler_service_pb2.GetJobRequest(job_id=job_id, include_attempts=True)
        ).job
    assert job.status == job_pb2.JOB_STATUS_CANCELLED
    assert job.result.data == b'{"done": true}'  # the attempt's result is kept
    assert [(a.number, a.outcome) for a in job.attempts] == [(1, job_pb2.ATTEMPT_OUTCOME_COMPLETED)]


@pytest.mark.parametrize("ending", ["returns", "continues"])
def test_an_inline_handler_that_returns_after_a_cancel_ends_cancelled(
    coordinator: Coordinator, ending: str
) -> None:
    started: asyncio.Queue[str] = asyncio.Queue()

    async def handler(ctx: JobContext, payload: object) -> dict[str, bool]:
        started.put_nowait(ctx.job_id)
        for _ in range(400):
            if ctx.is_cancelled():
                break
            await asyncio.sleep(0.025)
        assert ctx.is_cancelled()
        if ending == "continues":
            ctx.continue_as("follow-up", {"from": ctx.job_id})
        return {"noticed": True}

    async def main() -> None:
        async with InlineRunner(
            coordinator.target, worker_id="web-1", heartbeat_interval=0.2
        ) as runner:
            run = asyncio.ensure_future(runner.run("noop", {}, handler=handler))
            job_id = await asyncio.wait_for(started.get(), 30)
            with AdminClient(coordinator.target) as admin:
                await asyncio.to_thread(admin.cancel_job, job_id, reason="stop it")
            result = await asyncio.wait_for(run, 30)
        assert (result.status, result.job_status) == (InlineStatus.CANCELLED, JobStatus.CANCELLED)
        assert result.continuation_job_id == ""
        with AdminClient(coordinator.target) as admin:
            job = admin.get_job(job_id)
            assert job.status == JobStatus.CANCELLED
            assert [a.outcome for a in job.attempts] == ["COMPLETED"]
            # No continuation was enqueued for a cancelled job.
            assert admin.list_jobs(JobFilter(job_types=["follow-up"])).jobs == []

    asyncio.run(main())
