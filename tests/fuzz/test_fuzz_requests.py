"""Property tests: hostile request messages to every RPC get a deliberate answer.

For every unary RPC of JobSchedulerService, WorkerService and AdminService (and
the first message of the AcquireJobs stream), hypothesis builds request
messages from the proto descriptors: random and huge strings, random bytes,
unknown enum values, negative and extreme numbers, missing fields, and job ids
of this tenant, of another tenant, unknown or malformed. Properties:

* the status is OK or a deliberate code, never UNKNOWN or INTERNAL;
* a rejected call changes nothing in the store;
* the coordinator keeps serving.

The coordinator requires tokens, so tenant scopes are fuzzed as well.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import grpc
import pytest
import sqlalchemy as sa
from faults.harness import CoordinatorProcess
from google.protobuf import descriptor as pbd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from security.conftest import CREDENTIALS, write_tokens

from coordinator.store.base import create_sa_engine
from workflowjobs.v1 import admin_service_pb2, scheduler_service_pb2, worker_service_pb2
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc

pytestmark = pytest.mark.e2e

DELIBERATE = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.OUT_OF_RANGE,
}
MALFORMED_IDS = ["", "not-an-id", "0190B6E2-5C1A-7D3E-8F00-123456789ABC", "x" * 5000, "\x00"]
UNKNOWN_ID = "0190b6e2-5c1a-7d3e-8f00-123456789abc"
TOKENS = ["root-secret", "admin-a-secret", "sched-a-secret", "worker-a-secret"]
# Per RPC: about 220 calls in all by default; WFJOBS_FUZZ_EXAMPLES=150 for a longer hunt.
EXAMPLES = int(os.environ.get("WFJOBS_FUZZ_EXAMPLES", "8"))


def _methods() -> list[tuple[str, str, pbd.Descriptor, bool]]:
    out = []
    for module in (scheduler_service_pb2, worker_service_pb2, admin_service_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for m in service.methods:
                out.append((service.full_name, m.name, m.input_type, m.client_streaming))
    return out


METHODS = _methods()


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory) -> Iterator[tuple[CoordinatorProcess, str, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    tokens = tmp / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    url = f"sqlite:///{tmp / 'fuzz.db'}"
    coordinator = CoordinatorProcess(url, tmp, env={"WFJOBS_TOKENS_FILE": str(tokens)})
    ids = {}
    with grpc.insecure_channel(coordinator.target) as channel:
        stub = spb_grpc.JobSchedulerServiceStub(channel)
        for tenant in ("a", "b"):
            reply = stub.Enqueue(
                spb.EnqueueRequest(
                    job=jpb.JobSpec(job_type="noop", tenant_id=tenant, payload=jpb.Payload())
                ),
                metadata=(("authorization", "Bearer root-secret"),),
                timeout=10,
            )
            ids[tenant] = reply.job.id
    try:
        yield coordinator, url, ids
    finally:
        coordinator.stop()


def _ids(known: dict[str, str]) -> st.SearchStrategy[str]:
    return st.sampled_from([known["a"], known["b"], UNKNOWN_ID, *MALFORMED_IDS])


def _scalar(field: pbd.FieldDescriptor, known: dict[str, str]) -> st.SearchStrategy:
    t = field.type
    if t == pbd.FieldDescriptor.TYPE_STRING:
        if field.name.endswith("job_id") or field.name in ("id", "page_token"):
            return _ids(known) | st.text(max_size=40)
        if "tenant" in field.name:
            return st.sampled_from(["a", "b", "", "*"]) | st.text(max_size=20)
        return st.one_of(
            st.text(max_size=30),
            st.sampled_from(["noop", "a", "", "x" * 100_000]),
            st.binary(max_size=30).map(lambda b: b.decode("latin-1")),
        )
    if t == pbd.FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64) | st.just(b"\xff" * 2_000_000)
    if t == pbd.FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == pbd.FieldDescriptor.TYPE_ENUM:
        return st.integers(-(2**31), 2**31 - 1) | st.sampled_from(
            [v.number for v in field.enum_type.values]
        )
    if t in (pbd.FieldDescriptor.TYPE_DOUBLE, pbd.FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True, width=32)
    if t in (pbd.FieldDescriptor.TYPE_INT32, pbd.FieldDescriptor.TYPE_SINT32):
        return st.integers(-(2**31), 2**31 - 1)
    if t in (pbd.FieldDescriptor.TYPE_UINT32, pbd.FieldDescriptor.TYPE_FIXED32):
        return st.integers(0, 2**32 - 1)
    if t in (pbd.FieldDescriptor.TYPE_UINT64, pbd.FieldDescriptor.TYPE_FIXED64):
        return st.integers(0, 2**64 - 1)
    return st.integers(-(2**63), 2**63 - 1)


def _fill(message, known: dict[str, str], draw, depth: int) -> None:
    for field in message.DESCRIPTOR.fields:
        if not draw(st.booleans()):
            continue  # missing field
        repeated = field.is_repeated
        count = draw(st.integers(0, 3)) if repeated else 1
        if field.message_type is not None:
            if depth >= 3 or field.message_type.GetOptions().map_entry:
                continue
            for _ in range(count):
                if repeated:
                    child = getattr(message, field.name).add()
                else:
                    child = getattr(message, field.name)
                    child.SetInParent()
                _fill(child, known, draw, depth + 1)
            continue
        values = [draw(_scalar(field, known)) for _ in range(count)]
        try:
            if repeated:
                getattr(message, field.name).extend(values)
            else:
                setattr(message, field.name, values[0])
        except (ValueError, TypeError):
            pass  # a value protobuf itself refuses to encode never reaches the wire


def _snapshot(url: str) -> str:
    engine = create_sa_engine(url, pool_size=1)
    digest = hashlib.sha256()
    try:
        with engine.connect() as conn:
            for table in (
                "wfj_jobs",
                "wfj_job_attempts",
                "wfj_pauses",
                "wfj_tenants",
                "wfj_concurrency_limits",
            ):
                for row in conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY 1, 2")):
                    digest.update(repr(tuple(row)).encode())
    finally:
        engine.dispose()
    return digest.hexdigest()


def _call(channel: grpc.Channel, service: str, method: str, request, streaming: bool, token: str):
    path = f"/{service}/{method}"
    metadata = (("authorization", f"Bearer {token}"),)
    serialize = type(request).SerializeToString
    try:
        if streaming:
            call = channel.stream_stream(path, request_serializer=serialize)
            for _ in call(iter([request]), metadata=metadata, timeout=5):
                pass
        else:
            call = channel.unary_unary(path, request_serializer=serialize)
            call(request, metadata=metadata, timeout=5)
    except grpc.RpcError as e:
        return e.code(), e.details()
    return grpc.StatusCode.OK, ""


@pytest.mark.parametrize(
    ("service", "method", "descriptor", "streaming"),
    METHODS,
    ids=[f"{s.rsplit('.', 1)[1]}.{m}" for s, m, _, _ in METHODS],
)
def test_hostile_requests_get_deliberate_answers(
    coordinator, service: str, method: str, descriptor: pbd.Descriptor, streaming: bool
) -> None:
    process, url, known = coordinator
    message_class = _message_class(descriptor)
    channel = grpc.insecure_channel(
        process.target, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]
    )

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(data=st.data(), token=st.sampled_from(TOKENS))
    def check(data, token: str) -> None:
        request = message_class()
        _fill(request, known, data.draw, 0)
        before = _snapshot(url)
        code, details = _call(channel, service, method, request, streaming, token)
        allowed = DELIBERATE | (
            {grpc.StatusCode.DEADLINE_EXCEEDED} if method == "WaitForJob" else set()
        )
        assert code in allowed, f"{method} answered {code.name}: {details} for {request!r:.500}"
        if code != grpc.StatusCode.OK:
            assert details, f"{method} answered {code.name} without a message"
            assert _snapshot(url) == before, f"rejected {method} ({code.name}) changed the store"

    try:
        check()
        # Still serving.
        stub = spb_grpc.JobSchedulerServiceStub(channel)
        stub.GetJob(
            spb.GetJobRequest(job_id=known["a"]),
            metadata=(("authorization", "Bearer root-secret"),),
            timeout=10,
        )
    finally:
        channel.close()


def _message_class(descriptor: pbd.Descriptor):
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)
