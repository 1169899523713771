"""A job written to the AcquireJobs stream stays leased to that worker.

The worker may cancel its call the moment a ``LeasedJob`` arrived (it is
shutting down, or its connection breaks): the job it received is still its
own, and a heartbeat on its token extends the lease, until the lease expires
or the worker reports. Only jobs the stream never handed to gRPC (still queued
for it) go back at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from wfj_testing import Coordinator
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

# The stream's end and the write's completion race: enough rounds to see it.
ROUNDS = 30


@pytest.fixture
def coordinator(database: str, tmp_path: Path) -> Iterator[Coordinator]:
    coordinator = Coordinator(database, tmp_path / "coordinator.log")
    try:
        yield coordinator
    finally:
        coordinator.stop()


def _receive_then_cancel(
    worker: wpb_grpc.WorkerServiceStub, worker_id: str, job_type: str
) -> wpb.LeasedJob:
    """Open a stream, grant one credit, and cancel the call as soon as a job arrives."""
    received = threading.Event()

    def requests() -> Iterator[wpb.AcquireJobsRequest]:
        yield wpb.AcquireJobsRequest(
            hello=wpb.WorkerHello(worker_id=worker_id, job_types=[job_type], slots=1)
        )
        yield wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=1))
        received.wait(30)  # closing the request side would mean "drain"

    stream = worker.AcquireJobs(requests(), timeout=30)
    try:
        for message in stream:
            if message.WhichOneof("kind") == "jobs":
                stream.cancel()
                return message.jobs.jobs[0]
        raise AssertionError("the stream ended without a job")
    finally:
        received.set()


def test_a_received_job_stays_leased_when_the_call_is_cancelled_at_once(
    coordinator: Coordinator,
) -> None:
    channel = grpc.insecure_channel(coordinator.target)
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    worker = wpb_grpc.WorkerServiceStub(channel)
    lost: list[str] = []
    try:
        for i in range(ROUNDS):
            job_type = f"cancel-at-once-{i}"
            job = scheduler.Enqueue(
                spb.EnqueueRequest(
                    job=jpb.JobSpec(
                        job_type=job_type, tenant_id="t", payload=jpb.Payload(data=b"{}")
                    )
                ),
                timeout=10,
            ).job
            leased = _receive_then_cancel(worker, f"w-cancel-{i}", job_type)
            assert leased.job.id == job.id
            ref = wpb.LeaseRef(job_id=job.id, lease_token=leased.lease_token)
            [status] = worker.Heartbeat(
                wpb.HeartbeatRequest(worker_id=f"w-cancel-{i}", leases=[ref]), timeout=10
            ).leases
            # Still its own: the worker's report is recorded.
            try:
                worker.CompleteJob(
                    wpb.CompleteJobRequest(job_id=job.id, lease_token=leased.lease_token),
                    timeout=10,
                )
            except grpc.RpcError as e:
                refused = f"CompleteJob {e.code().name}"
            else:
                refused = ""
            done = scheduler.GetJob(
                spb.GetJobRequest(job_id=job.id, include_attempts=True), timeout=10
            ).job
            if status.state != wpb.LEASE_STATE_EXTENDED or refused:
                errors = [a.error for a in done.attempts]
                lost.append(f"round {i}: {wpb.LeaseState.Name(status.state)} {refused} {errors}")
            else:
                assert done.status == jpb.JOB_STATUS_COMPLETED
                assert len(done.attempts) == 1
    finally:
        channel.close()
    assert not lost, f"{len(lost)} of {ROUNDS} received jobs were handed back: {lost}"
