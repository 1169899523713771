"""Property tests: hostile requests to every RPC get a deliberate answer.

Two generators, each against every RPC of JobSchedulerService, WorkerService
and AdminService, on SQLite and on PostgreSQL:

* structured: hypothesis builds request messages from the proto descriptors:
  random and huge strings (NUL and other control characters included), random
  bytes, unknown enum values, negative and extreme numbers, missing fields,
  and job ids of this tenant, of another tenant, unknown or malformed;
* raw: hypothesis draws the request *bytes* (random bytes, and valid messages
  truncated or with bytes overwritten, which breaks the wire format or the
  UTF-8 of a string field), sent through a channel with an identity
  serializer; for AcquireJobs both as the first message and after a valid
  hello.

Properties:

* the status is OK or a deliberate code, never UNKNOWN or INTERNAL, and never
  UNIMPLEMENTED for an RPC the coordinator implements;
* a rejected call changes nothing in the store;
* the coordinator keeps serving.

The coordinator requires tokens, so tenant scopes are fuzzed as well.
WFJOBS_FUZZ_EXAMPLES / WFJOBS_FUZZ_RAW_EXAMPLES raise the examples per RPC
and store for a longer hunt.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import grpc
import pytest
import sqlalchemy as sa
from conftest import new_pg_database
from faults.harness import CoordinatorProcess
from google.protobuf import descriptor as pbd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from security.conftest import CREDENTIALS, write_tokens

from coordinator.api.admin import AdminServicer
from coordinator.api.scheduler import JobSchedulerServicer
from coordinator.api.worker import WorkerServicer
from coordinator.store.base import create_sa_engine
from workflowjobs.v1 import admin_service_pb2, scheduler_service_pb2, worker_service_pb2
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

pytestmark = pytest.mark.e2e

DELIBERATE = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.OUT_OF_RANGE,
}
MALFORMED_IDS = ["", "not-an-id", "0190B6E2-5C1A-7D3E-8F00-123456789ABC", "x" * 5000, "\x00"]
UNKNOWN_ID = "0190b6e2-5c1a-7d3e-8f00-123456789abc"
TOKENS = ["root-secret", "admin-a-secret", "sched-a-secret", "worker-a-secret"]
# Examples per RPC and store (about 45 RPCs, 2 stores): about 2,000 calls in all by
# default, drawn anew each run (no example database), so runs add up to more; a
# longer search: WFJOBS_FUZZ_EXAMPLES=200 WFJOBS_FUZZ_RAW_EXAMPLES=100.
EXAMPLES = int(os.environ.get("WFJOBS_FUZZ_EXAMPLES", "12"))
RAW_EXAMPLES = int(os.environ.get("WFJOBS_FUZZ_RAW_EXAMPLES", "8"))
ACQUIRE = "AcquireJobs"


def _methods() -> list[tuple[str, str, pbd.Descriptor, bool]]:
    out = []
    for module in (scheduler_service_pb2, worker_service_pb2, admin_service_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for m in service.methods:
                out.append((service.full_name, m.name, m.input_type, m.client_streaming))
    return out


METHODS = _methods()
METHOD_IDS = [f"{s.rsplit('.', 1)[1]}.{m}" for s, m, _, _ in METHODS]


def _implemented() -> set[str]:
    """Methods the coordinator's servicers override (the generated base answers UNIMPLEMENTED)."""
    out = set()
    for servicer, base in (
        (JobSchedulerServicer, spb_grpc.JobSchedulerServiceServicer),
        (WorkerServicer, wpb_grpc.WorkerServiceServicer),
        (AdminServicer, apb_grpc.AdminServiceServicer),
    ):
        for name in dir(base):
            if not name.startswith("_") and getattr(servicer, name) is not getattr(base, name):
                out.add(name)
    return out


IMPLEMENTED = _implemented()


# Calls that legitimately wait past a short deadline: a job that never finishes,
# a watch that has no (more) events to send.
LONG_WAITS = {"WaitForJob", "WatchJobEvents"}


def _allowed(method: str) -> set[grpc.StatusCode]:
    allowed = set(DELIBERATE)
    if method not in IMPLEMENTED:
        allowed.add(grpc.StatusCode.UNIMPLEMENTED)
    if method in LONG_WAITS:
        allowed.add(grpc.StatusCode.DEADLINE_EXCEEDED)  # nothing to answer before the deadline
    return allowed


def test_every_rpc_is_implemented() -> None:
    assert {m for _, m, _, _ in METHODS} <= IMPLEMENTED


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def coordinator(
    request: pytest.FixtureRequest, tmp_path_factory
) -> Iterator[tuple[CoordinatorProcess, sa.Engine, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    tokens = tmp / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    drop = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp / 'fuzz.db'}"
    else:
        request.getfixturevalue("pg_database")  # skips or fails like every PostgreSQL test
        url, drop = new_pg_database("wfj_fuzz")
    coordinator = CoordinatorProcess(url, tmp, env={"WFJOBS_TOKENS_FILE": str(tokens)})
    engine = create_sa_engine(url, pool_size=1)
    ids = {}
    try:
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
        yield coordinator, engine, ids
    finally:
        engine.dispose()
        coordinator.stop()
        if drop is not None:
            drop()  # type: ignore[operator]


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


def _snapshot(engine: sa.Engine) -> str:
    digest = hashlib.sha256()
    with engine.connect() as conn:
        for table in (
            "wfj_jobs",
            "wfj_job_attempts",
            "wfj_pauses",
            "wfj_tenants",
            "wfj_concurrency_limits",
            "wfj_job_type_defaults",
        ):
            for row in conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY 1, 2")):
                digest.update(repr(tuple(row)).encode())
    return digest.hexdigest()


def _identity(raw: bytes) -> bytes:
    return raw


def _timeout(method: str) -> float:
    # A call that waits for something that may never come ends at its deadline: keep it short.
    return 1.0 if method in LONG_WAITS else 5.0


def _send(
    channel: grpc.Channel, service: str, method: str, bodies: list[bytes], token: str
) -> tuple[grpc.StatusCode, str]:
    """Send request bytes as they are (identity serializer); the status and details."""
    path = f"/{service}/{method}"
    metadata = (("authorization", f"Bearer {token}"),)
    try:
        if method == ACQUIRE:
            call = channel.stream_stream(
                path, request_serializer=_identity, response_deserializer=_identity
            )
            # The request side closes after the last message: a drain, so the stream ends.
            for _ in call(iter(bodies), metadata=metadata, timeout=_timeout(method)):
                pass
        else:
            [body] = bodies
            call = channel.unary_unary(
                path, request_serializer=_identity, response_deserializer=_identity
            )
            call(body, metadata=metadata, timeout=_timeout(method))
    except grpc.RpcError as e:
        return e.code(), e.details()
    return grpc.StatusCode.OK, ""


def _check(
    engine: sa.Engine,
    channel: grpc.Channel,
    service: str,
    method: str,
    bodies: list[bytes],
    token: str,
    shown: str,
) -> None:
    before = _snapshot(engine)
    code, details = _send(channel, service, method, bodies, token)
    assert code in _allowed(method), f"{method} answered {code.name}: {details} for {shown:.500}"
    if code != grpc.StatusCode.OK:
        assert details, f"{method} answered {code.name} without a message"
        assert _snapshot(engine) == before, f"rejected {method} ({code.name}) changed the store"


def _still_serving(channel: grpc.Channel, known: dict[str, str]) -> None:
    """The coordinator still reads the store and answers. The fuzzed requests
    the module accepted may have cancelled and then purged the known job (a
    valid ``CancelJob`` and ``PurgeJobs`` are among them), so NOT_FOUND for it
    is an answer too; anything else is not."""
    stub = spb_grpc.JobSchedulerServiceStub(channel)
    try:
        stub.GetJob(
            spb.GetJobRequest(job_id=known["a"]),
            metadata=(("authorization", "Bearer root-secret"),),
            timeout=10,
        )
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.NOT_FOUND:
            raise


def _channel(process: CoordinatorProcess) -> grpc.Channel:
    return grpc.insecure_channel(
        process.target, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]
    )


HELLO = wpb.AcquireJobsRequest(
    hello=wpb.WorkerHello(worker_id="fuzz-raw", job_types=["fuzz-raw"])
).SerializeToString()
# Valid first messages for streams whose fuzzed message comes later.
LATER_PREFIX = {ACQUIRE: [HELLO]}


@st.composite
def _raw_bodies(draw, message_class, known: dict[str, str]) -> bytes:
    """Request bytes: random, or a valid message truncated or with bytes overwritten."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=200))
    message = message_class()
    _fill(message, known, draw, 0)
    body = bytearray(message.SerializeToString())
    if not body:
        return draw(st.binary(min_size=1, max_size=50))
    if draw(st.booleans()):
        del body[draw(st.integers(0, len(body) - 1)) :]  # truncated
    for _ in range(draw(st.integers(1, 4))):
        if not body:
            break
        # An invalid UTF-8 lead or continuation byte, a flipped high bit, or any byte.
        at = draw(st.integers(0, len(body) - 1))
        body[at] = draw(st.sampled_from([0xFF, 0xC3, 0x80, body[at] ^ 0x80]) | st.integers(0, 255))
    return bytes(body)


@pytest.mark.parametrize(("service", "method", "descriptor", "streaming"), METHODS, ids=METHOD_IDS)
def test_hostile_requests_get_deliberate_answers(
    coordinator, service: str, method: str, descriptor: pbd.Descriptor, streaming: bool
) -> None:
    process, engine, known = coordinator
    message_class = _message_class(descriptor)
    channel = _channel(process)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(data=st.data(), token=st.sampled_from(TOKENS), later=st.booleans())
    def check(data, token: str, later: bool) -> None:
        request = message_class()
        _fill(request, known, data.draw, 0)
        prefix = LATER_PREFIX.get(method, []) if later else []
        bodies = [*prefix, request.SerializeToString()]
        _check(engine, channel, service, method, bodies, token, repr(request))

    try:
        check()
        _still_serving(channel, known)
    finally:
        channel.close()


@pytest.mark.parametrize(("service", "method", "descriptor", "streaming"), METHODS, ids=METHOD_IDS)
def test_raw_request_bytes_get_deliberate_answers(
    coordinator, service: str, method: str, descriptor: pbd.Descriptor, streaming: bool
) -> None:
    process, engine, known = coordinator
    message_class = _message_class(descriptor)
    channel = _channel(process)
    # A stream's fuzzed message goes first or after a valid hello, half the examples each.
    examples = RAW_EXAMPLES * (2 if method in LATER_PREFIX else 1)

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(
        body=_raw_bodies(message_class, known),
        token=st.sampled_from(TOKENS),
        later=st.booleans(),
    )
    def check(body: bytes, token: str, later: bool) -> None:
        prefix = LATER_PREFIX.get(method, []) if later else []
        _check(engine, channel, service, method, [*prefix, body], token, repr(body))

    try:
        check()
        _still_serving(channel, known)
    finally:
        channel.close()


def _message_class(descriptor: pbd.Descriptor):
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)
