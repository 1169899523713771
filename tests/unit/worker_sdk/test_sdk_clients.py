"""Scheduler and admin clients against small fake services on a real loopback server."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import uuid
from collections.abc import Iterator
from concurrent import futures
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from worker_sdk import (
    AdminClient,
    AsyncSchedulerClient,
    DeadlineExceededError,
    InvalidArgumentError,
    JobFilter,
    JobNotFoundError,
    JobRequest,
    JobStatus,
    RetryPolicy,
    SchedulerClient,
    WorkflowRef,
)
from workflowjobs.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    job_pb2,
    scheduler_service_pb2,
    scheduler_service_pb2_grpc,
)


@dataclasses.dataclass
class Order:
    id: str
    quantity: int


class FakeScheduler(scheduler_service_pb2_grpc.JobSchedulerServiceServicer):
    def __init__(self) -> None:
        self.jobs: dict[str, job_pb2.Job] = {}
        self.by_key: dict[tuple[str, str], str] = {}
        self.specs: list[job_pb2.JobSpec] = []
        self.metadata: list[tuple[str, str]] = []
        self.wait_calls = 0

    def _create(self, spec: job_pb2.JobSpec) -> tuple[job_pb2.Job, bool]:
        if not spec.job_type:
            raise ValueError("job_type must not be empty")
        key = (spec.tenant_id, spec.idempotency_key)
        if spec.idempotency_key and key in self.by_key:
            return self.jobs[self.by_key[key]], True
        self.specs.append(spec)
        job = job_pb2.Job(
            id=str(uuid.uuid4()),
            job_type=spec.job_type,
            tenant_id=spec.tenant_id,
            workflow=spec.workflow,
            payload=spec.payload,
            status=job_pb2.JOB_STATUS_PENDING,
            max_attempts=spec.retry_policy.max_attempts or 25,
            priority=spec.priority,
        )
        self.jobs[job.id] = job
        if spec.idempotency_key:
            self.by_key[key] = job.id
        return job, False

    def Enqueue(self, request, context):  # noqa: N802
        self.metadata.extend(context.invocation_metadata())
        try:
            job, dedup = self._create(request.job)
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return scheduler_service_pb2.EnqueueResponse(job=job, deduplicated=dedup)

    def EnqueueBatch(self, request, context):  # noqa: N802
        results = []
        if any(not spec.job_type for spec in request.jobs):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "job_type must not be empty")
        for spec in request.jobs:
            job, dedup = self._create(spec)
            results.append(
                scheduler_service_pb2.EnqueueResult(
                    job_id=job.id, deduplicated=dedup, status=job.status
                )
            )
        return scheduler_service_pb2.EnqueueBatchResponse(results=results)

    def GetJob(self, request, context):  # noqa: N802
        if request.job_id not in self.jobs:
            context.abort(grpc.StatusCode.NOT_FOUND, f"job {request.job_id} not found")
        return scheduler_service_pb2.GetJobResponse(job=self.jobs[request.job_id])

    def WaitForJob(self, request, context):  # noqa: N802
        self.wait_calls += 1
        job = self.jobs[request.job_id]
        if job.job_type == "never":
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded")
        if self.wait_calls == 1:
            # A coordinator may answer before the job is done (a server-side wait cap).
            return scheduler_service_pb2.WaitForJobResponse(job=job)
        job.status = job_pb2.JOB_STATUS_COMPLETED
        job.result.data = b'{"ok":true}'
        job.result.content_type = "application/json"
        return scheduler_service_pb2.WaitForJobResponse(job=job)


class FakeAdmin(admin_service_pb2_grpc.AdminServiceServicer):
    def __init__(self) -> None:
        self.jobs = [job_pb2.Job(id=f"job-{i:03d}", job_type="t") for i in range(7)]
        self.requests: list[object] = []

    def ListJobs(self, request, context):  # noqa: N802
        self.requests.append(request)
        start = int(request.page_token or 0)
        end = start + request.page_size
        token = str(end) if end < len(self.jobs) else ""
        return admin_service_pb2.ListJobsResponse(jobs=self.jobs[start:end], next_page_token=token)

    def Pause(self, request, context):  # noqa: N802
        self.requests.append(request)
        return admin_service_pb2.PauseResponse(
            pause=admin_service_pb2.PauseRecord(id="p1", scope=request.scope, actor=request.actor)
        )

    def SetConcurrencyLimit(self, request, context):  # noqa: N802
        self.requests.append(request)
        return admin_service_pb2.SetConcurrencyLimitResponse()


@pytest.fixture
def services() -> Iterator[tuple[str, FakeScheduler, FakeAdmin]]:
    scheduler, admin = FakeScheduler(), FakeAdmin()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    scheduler_service_pb2_grpc.add_JobSchedulerServiceServicer_to_server(scheduler, server)
    admin_service_pb2_grpc.add_AdminServiceServicer_to_server(admin, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", scheduler, admin
    finally:
        server.stop(None)


def test_enqueue_encodes_payload_and_options(
    services: tuple[str, FakeScheduler, FakeAdmin],
) -> None:
    target, scheduler, _ = services
    with SchedulerClient(target, token="secret") as client:
        job = client.enqueue(
            "order.ship",
            Order("o1", 2),
            tenant_id="acme",
            workflow=WorkflowRef(definition_id="d", instance_id="i"),
            category="integration",
            priority=5,
            delay=timedelta(minutes=1),
            max_attempts=4,
            retry_policy=RetryPolicy(initial_backoff=timedelta(seconds=2), jitter=0.1),
            execution_timeout=30,
            idempotency_key="k1",
        )

    spec = scheduler.specs[0]
    assert job.status is JobStatus.PENDING
    assert job.payload_value(Order) == Order("o1", 2)
    assert job.workflow == WorkflowRef(definition_id="d", instance_id="i")
    assert not job.deduplicated
    assert spec.payload.content_type == "application/json"
    assert spec.category == job_pb2.JOB_CATEGORY_INTEGRATION
    assert spec.retry_policy.max_attempts == 4
    assert spec.retry_policy.initial_backoff.seconds == 2
    assert spec.execution_timeout.seconds == 30
    assert spec.due_time.ToDatetime(tzinfo=UTC) > datetime.now(UTC)
    assert ("authorization", "Bearer secret") in scheduler.metadata


def test_idempotent_enqueue_reports_deduplication(
    services: tuple[str, FakeScheduler, FakeAdmin],
) -> None:
    target, _, _ = services
    with SchedulerClient(target) as client:
        first = client.enqueue("t", {"a": 1}, idempotency_key="same")
        second = client.enqueue("t", {"a": 1}, idempotency_key="same")

    assert first.id == second.id
    assert second.deduplicated


def test_errors_are_typed(services: tuple[str, FakeScheduler, FakeAdmin]) -> None:
    target, _, _ = services
    with SchedulerClient(target) as client:
        with pytest.raises(JobNotFoundError, match="not found"):
            client.get_job("missing")
        with pytest.raises(InvalidArgumentError, match="job_type must not be empty"):
            client.enqueue_batch([job_pb2.JobSpec(job_type="")])


def test_wait_for_job_keeps_waiting_until_terminal(
    services: tuple[str, FakeScheduler, FakeAdmin],
) -> None:
    target, scheduler, _ = services
    with SchedulerClient(target) as client:
        job = client.enqueue("t", None)
        done = client.wait_for_job(job.id, timeout=5)
        never = client.enqueue("never")
        # The call's deadline is the wait's: the error names the job and the wait.
        with pytest.raises(DeadlineExceededError, match=f"job {never.id} did not finish within 5s"):
            client.wait_for_job(never.id, timeout=5)

    assert done.status is JobStatus.COMPLETED
    assert done.result_value() == {"ok": True}
    assert scheduler.wait_calls == 3


def test_async_client_enqueue_batch_and_get(
    services: tuple[str, FakeScheduler, FakeAdmin],
) -> None:
    target, _, _ = services

    async def main() -> tuple[list[JobStatus], str]:
        async with AsyncSchedulerClient(target) as client:
            results = await client.enqueue_batch(
                [JobRequest("a", b"raw"), JobRequest("b", {"x": 1}, tenant_id="t2")]
            )
            job = await client.get_job(results[0].job_id)
            return [r.status for r in results], job.payload_content_type

    statuses, content_type = asyncio.run(main())

    assert statuses == [JobStatus.PENDING, JobStatus.PENDING]
    assert content_type == "application/octet-stream"


def test_admin_client_pages_and_scopes(services: tuple[str, FakeScheduler, FakeAdmin]) -> None:
    target, _, admin = services
    with AdminClient(target) as client:
        ids = [job.id for job in client.iter_jobs(JobFilter(statuses=["faulted"]), page_size=3)]
        record = client.pause("definition", "wf-1", tenant_id="acme", actor="ops", reason="bug")
        client.set_concurrency_limit("concurrency_key", "db", 5)
        with pytest.raises(ValueError, match="unknown pause scope 'planet'"):
            client.pause("planet")

    assert ids == [f"job-{i:03d}" for i in range(7)]
    first = admin.requests[0]
    assert isinstance(first, admin_service_pb2.ListJobsRequest)
    assert list(first.filter.statuses) == [job_pb2.JOB_STATUS_FAULTED]
    assert record.scope.kind == admin_service_pb2.PAUSE_SCOPE_KIND_DEFINITION
    assert record.scope.value == "wf-1"
    limit = admin.requests[-1]
    assert isinstance(limit, admin_service_pb2.SetConcurrencyLimitRequest)
    assert limit.limit.kind == admin_service_pb2.LIMIT_SCOPE_KIND_CONCURRENCY_KEY


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (":47311x", "target ':47311x' has no host; expected host:port"),
        ("localhost:47311x", "the port '47311x' is not a number from 1 to 65535"),
        ("localhost:0", "the port '0' is not a number from 1 to 65535"),
        ("coordinator host:50051", "'coordinator host' is not a host name or address"),
        ("", "the coordinator target is empty"),
    ],
)
def test_a_target_that_can_never_connect_is_refused_at_once(target: str, message: str) -> None:
    from worker_sdk import Worker

    with pytest.raises(ValueError, match=re.escape(message)):
        Worker(target)
    with pytest.raises(ValueError, match=re.escape(message)):
        SchedulerClient(target)


@pytest.mark.parametrize(
    "target",
    [
        "127.0.0.1:50051",
        "localhost",
        "coordinator.example.com:443",
        "[::1]:50051",
        "dns:///wfjobs-coordinator-headless:50051",
        "unix:/run/wfjobs.sock",
    ],
)
def test_targets_grpc_can_dial_are_accepted(target: str) -> None:
    SchedulerClient(target).close()


def test_wfjobs_refuses_a_malformed_target_with_usage_exit_code() -> None:
    import subprocess
    import sys
    from pathlib import Path

    result = subprocess.run(
        [str(Path(sys.executable).parent / "wfjobs"), "--target", ":47311x", "stats"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 2
    assert result.stderr == "wfjobs: target ':47311x' has no host; expected host:port\n"
