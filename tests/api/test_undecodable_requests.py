"""Bytes that are not the request message, invalid UTF-8 and NUL characters in
string fields are INVALID_ARGUMENT over real gRPC, on both stores; the store
maps whatever the database refuses to a deliberate code."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import sqlalchemy as sa
from conftest import new_pg_database

from coordinator.errors import AlreadyExists, InvalidArgument
from coordinator.store import Store
from wfj_testing import Coordinator, make_job
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
from workflowjobs.v1 import worker_service_pb2 as wpb

# Field 1 (a string in every request below) holding bytes that are not UTF-8.
BAD_UTF8 = b"\x0a\x03\xff\xfe\xfd"
CORRUPT = b"\xff\xff\xff\xff"
ACQUIRE = "/workflowjobs.v1.WorkerService/AcquireJobs"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp(f"raw-{request.param}")
    drop = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp / 'raw.db'}"
    else:
        request.getfixturevalue("pg_database")  # skips or fails like every PostgreSQL test
        url, drop = new_pg_database("wfj_raw")
    coordinator = Coordinator(url, tmp / "coordinator.log")
    try:
        yield coordinator.target
    finally:
        coordinator.stop()
        if drop is not None:
            drop()  # type: ignore[operator]


def _raw_unary(target: str, method: str, body: bytes) -> tuple[grpc.StatusCode, str]:
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        try:
            call(body, timeout=10)
        except grpc.RpcError as e:
            return e.code(), e.details()
    return grpc.StatusCode.OK, ""


def _raw_stream(target: str, messages: list[bytes]) -> tuple[grpc.StatusCode, str, list[bytes]]:
    """Send ``messages`` on AcquireJobs, keeping the request side open until the answer."""
    done = threading.Event()

    def requests():
        yield from messages
        done.wait(10)

    received: list[bytes] = []
    with grpc.insecure_channel(target) as channel:
        call = channel.stream_stream(ACQUIRE, request_serializer=None, response_deserializer=None)
        try:
            for reply in call(requests(), timeout=10):
                received.append(reply)
        except grpc.RpcError as e:
            return e.code(), e.details(), received
        finally:
            done.set()
    return grpc.StatusCode.OK, "", received


@pytest.mark.parametrize("body", [CORRUPT, BAD_UTF8], ids=["corrupt", "bad-utf8"])
@pytest.mark.parametrize(
    "method",
    [
        "/workflowjobs.v1.JobSchedulerService/GetJob",
        "/workflowjobs.v1.JobSchedulerService/Enqueue",
        "/workflowjobs.v1.WorkerService/CompleteJob",
        "/workflowjobs.v1.AdminService/Pause",
    ],
)
def test_undecodable_unary_requests_are_invalid_argument(
    target: str, method: str, body: bytes
) -> None:
    code, details = _raw_unary(target, method, body)
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    assert "is not a valid workflowjobs.v1." in details, details


@pytest.mark.parametrize("body", [CORRUPT, BAD_UTF8], ids=["corrupt", "bad-utf8"])
def test_undecodable_first_stream_message_is_invalid_argument(target: str, body: bytes) -> None:
    code, details, _ = _raw_stream(target, [body])
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    assert "is not a valid workflowjobs.v1.AcquireJobsRequest" in details


@pytest.mark.parametrize("body", [CORRUPT, BAD_UTF8], ids=["corrupt", "bad-utf8"])
def test_undecodable_message_after_a_valid_hello_is_invalid_argument(
    target: str, body: bytes
) -> None:
    hello = wpb.AcquireJobsRequest(
        hello=wpb.WorkerHello(worker_id="w-raw", job_types=["raw"])
    ).SerializeToString()
    code, details, received = _raw_stream(target, [hello, body])
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    assert "is not a valid workflowjobs.v1.AcquireJobsRequest" in details
    first = wpb.AcquireJobsResponse.FromString(received[0])
    assert first.WhichOneof("kind") == "accepted"


def _spec(**fields) -> jpb.JobSpec:
    base = {"job_type": "noop", "tenant_id": "t", "payload": jpb.Payload(data=b"{}")}
    base.update(fields)
    return jpb.JobSpec(**base)


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (spb.EnqueueRequest(job=_spec(tenant_id="a\x00b")), "job.tenant_id"),
        (spb.EnqueueRequest(job=_spec(job_type="n\x00op")), "job.job_type"),
        (
            spb.EnqueueRequest(job=_spec(workflow=jpb.WorkflowRef(instance_id="\x00"))),
            "job.workflow.instance_id",
        ),
        (
            spb.EnqueueRequest(job=_spec(payload=jpb.Payload(data=b"\x00", content_type="x\x00"))),
            "job.payload.content_type",
        ),
        (
            spb.EnqueueBatchRequest(jobs=[_spec(), _spec(idempotency_key="k\x00")]),
            "jobs[1].idempotency_key",
        ),
        (
            spb.EnqueueRequest(
                job=_spec(retry_policy=jpb.RetryPolicy(non_retryable_error_kinds=["ok", "b\x00"]))
            ),
            "job.retry_policy.non_retryable_error_kinds[1]",
        ),
    ],
    ids=["tenant", "job-type", "workflow", "content-type", "batch", "repeated"],
)
def test_nul_in_a_string_field_is_invalid_argument_naming_it(
    target: str, request_, field: str
) -> None:
    name = type(request_).__name__.removesuffix("Request")
    code, details = _raw_unary(
        target, f"/workflowjobs.v1.JobSchedulerService/{name}", request_.SerializeToString()
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    assert details.startswith(f"{field} contains a NUL character"), details
    # A NUL byte inside a bytes field is data, not a string: accepted.
    with grpc.insecure_channel(target) as channel:
        reply = spb_grpc.JobSchedulerServiceStub(channel).Enqueue(
            spb.EnqueueRequest(job=_spec(payload=jpb.Payload(data=b"a\x00b"))), timeout=10
        )
    assert reply.job.id


def test_nul_in_worker_and_admin_strings_is_invalid_argument(target: str) -> None:
    hello = wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="w\x00", job_types=["raw"]))
    code, details, _ = _raw_stream(target, [hello.SerializeToString()])
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("hello.worker_id contains a NUL character"), details
    pause = apb.PauseRequest(scope=apb.PauseScope(kind=1, tenant_id="t\x00"), actor="me")
    code, details = _raw_unary(
        target, "/workflowjobs.v1.AdminService/Pause", pause.SerializeToString()
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("scope.tenant_id contains a NUL character"), details


def test_values_the_database_refuses_are_deliberate_errors(store: Store) -> None:
    job = store.job_insert_many  # the store itself, below the API's checks
    refused = make_job(tenant_id="nul\x00tenant")
    refused.id, refused.created_at, refused.due_at = "01900000-0000-7000-8000-00000000f00d", 1, 1
    if store.is_postgres:  # PostgreSQL text cannot hold NUL
        with pytest.raises(InvalidArgument, match="refused a value of this request"):
            job([refused])
    else:
        job([refused])
    with pytest.raises(AlreadyExists, match="conflicts with a stored row"):
        with store.tx() as conn:
            for _ in range(2):
                conn.execute(sa.text("INSERT INTO wfj_tenants (tenant_id, weight) VALUES ('t', 1)"))
    with pytest.raises(InvalidArgument, match="refused a value of this request"):
        with store.tx() as conn:
            conn.execute(sa.text("INSERT INTO wfj_tenants (tenant_id, weight) VALUES (NULL, 1)"))
