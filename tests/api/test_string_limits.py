"""docs/limits.md: every string field of every RPC holds at most 512
characters (free text: its own bound), over real gRPC.

The fields are found by walking the request descriptors, so a field or an
RPC added later is covered without touching this test. The rule does not
depend on the store (the API layer and the engine decide before any SQL), so
one store is enough; SQLite is the one every run has."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor as pbd
from google.protobuf.message import Message

from coordinator.api.decoding import FREE_TEXT, MAX_TEXT_LENGTH
from wfj_testing import Coordinator
from workflowjobs.v1 import admin_service_pb2, scheduler_service_pb2, worker_service_pb2
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import worker_service_pb2 as wpb

LIMIT = 512
JOB_ID = "0190b6e2-5c1a-7d3e-8f00-123456789abc"
# Free text an outcome carries: never a reason to refuse the outcome (its work
# is done); error and reason are cut to MAX_TEXT_LENGTH, the traceback keeps its tail.
OUTCOME_TEXT = frozenset(
    f"workflowjobs.v1.{name}"
    for name in (
        "Failure.error",
        "Failure.traceback",
        "Release.reason",
        "FailJobRequest.error",
        "FailJobRequest.traceback",
    )
)


def _string_fields(message: pbd.Descriptor, seen: frozenset[str] = frozenset()):
    """(path, field) of every string field reachable from ``message``; a
    repeated field's path steps into its first element (``[]``)."""
    for field in message.fields:
        step = f"{field.name}[]" if field.is_repeated else field.name
        if field.type == pbd.FieldDescriptor.TYPE_STRING:
            yield step, field
        elif field.type == pbd.FieldDescriptor.TYPE_MESSAGE:
            inner = field.message_type
            if inner.full_name.startswith("google.protobuf.") or inner.full_name in seen:
                continue
            assert not inner.GetOptions().map_entry, f"{field.full_name}: cover map fields"
            for path, leaf in _string_fields(inner, seen | {inner.full_name}):
                yield f"{step}.{path}", leaf


def _every_rpc():
    for file in (scheduler_service_pb2, worker_service_pb2, admin_service_pb2):
        for service in file.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                yield service, method


def _set(message: Message, path: str, value: str) -> None:
    """Set the string at ``path`` (``[]`` steps into a repeated field's first element)."""
    head, _, rest = path.partition(".")
    name = head.removesuffix("[]")
    repeated = head.endswith("[]")
    if not rest:
        if repeated:
            getattr(message, name).append(value)
        else:
            setattr(message, name, value)
        return
    if repeated:
        items = getattr(message, name)
        inner = items[0] if len(items) else items.add()
    else:
        inner = getattr(message, name)
    _set(inner, rest, value)


def _base(method: pbd.MethodDescriptor) -> Message:
    """A request the RPC would otherwise take (the hot-path RPCs check other fields first)."""
    request = _message_class(method.input_type)()
    spec = jpb.JobSpec(job_type="noop", tenant_id="t", payload=jpb.Payload(data=b"{}"))
    name = method.name
    if name == "Enqueue":
        request.job.CopyFrom(spec)
    elif name == "EnqueueBatch":
        request.jobs.add().CopyFrom(spec)
    elif name == "AcquireJobs":
        request.hello.CopyFrom(wpb.WorkerHello(worker_id="w", job_types=["noop"]))
    elif name == "ReportOutcomes":
        request.outcomes.add(job_id=JOB_ID, lease_token="t", completed=wpb.Completion())
    elif name in ("CompleteJob", "FailJob"):
        request.job_id, request.lease_token = JOB_ID, "t"
    elif name == "Heartbeat":
        request.worker_id = "w"
        request.leases.add(job_id=JOB_ID, lease_token="t")
    return request


def _set_uniqueness_rule(request: Message, path: str) -> None:
    head = path.split(".", 1)[0].removesuffix("[]")
    specs = getattr(request, head)
    spec = specs if isinstance(specs, jpb.JobSpec) else (specs[0] if len(specs) else specs.add())
    spec.uniqueness.period.seconds = 60


def _message_class(descriptor: pbd.Descriptor):
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


def _call(channel: grpc.Channel, service, method, request: Message):
    """(code, details, response) of one call; a stream answers with its first message."""
    path = f"/{service.full_name}/{method.name}"
    kwargs = {"request_serializer": None, "response_deserializer": None}
    body = request.SerializeToString()
    response_class = _message_class(method.output_type)
    try:
        if method.client_streaming:
            # AcquireJobs: the hello; outcome fields on the stream are the
            # ReportOutcomes fields (one conversion, checked there).
            replies = channel.stream_stream(path, **kwargs)(iter([body]), timeout=10)
            first = next(iter(replies))
            replies.cancel()
            return grpc.StatusCode.OK, "", response_class.FromString(first)
        if method.server_streaming:
            replies = channel.unary_stream(path, **kwargs)(body, timeout=10)
            first = next(iter(replies))
            replies.cancel()
            return grpc.StatusCode.OK, "", response_class.FromString(first)
        reply = channel.unary_unary(path, **kwargs)(body, timeout=10)
        return grpc.StatusCode.OK, "", response_class.FromString(reply)
    except grpc.RpcError as e:
        return e.code(), e.details(), None


def _answer(code, details, response) -> tuple[str, str]:
    """The call's status, or the first outcome's for ReportOutcomes (answered per outcome)."""
    if code == grpc.StatusCode.OK and isinstance(response, wpb.ReportOutcomesResponse):
        result = response.results[0]
        return (result.error_code or "OK"), result.error_message
    return code.name, details


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("strings")
    coordinator = Coordinator(f"sqlite:///{tmp / 'strings.db'}", tmp / "coordinator.log")
    try:
        yield coordinator.target
    finally:
        coordinator.stop()


def test_every_string_field_of_every_rpc_is_bounded(target: str) -> None:
    checked: list[str] = []
    with grpc.insecure_channel(target) as channel:
        for service, method in _every_rpc():
            for path, field in _string_fields(method.input_type):
                if method.name == "AcquireJobs" and path.startswith("outcomes."):
                    continue  # the ReportOutcomes fields, converted by the same code
                where = f"{method.name} {path}"
                if field.full_name in OUTCOME_TEXT:
                    continue  # test_outcome_text_is_cut_not_refused
                most = MAX_TEXT_LENGTH if field.full_name in FREE_TEXT else LIMIT
                request = _base(method)
                if ".uniqueness." in f".{path}":
                    _set_uniqueness_rule(request, path)
                _set(request, path, "x" * (most + 1))
                code, details = _answer(*_call(channel, service, method, request))
                assert code == "INVALID_ARGUMENT", (where, code, details)
                # The limit, or (an id) the form it must have.
                assert str(most) in details or "is malformed" in details, (where, details)
                assert field.name in details, (where, details)
                assert len(details) < 400, (where, len(details))
                checked.append(where)
    assert "WatchJobEvents filter.job_id" in checked
    assert "RemoveRateLimit value" in checked
    assert len(checked) > 100, len(checked)


def test_an_oversized_value_is_never_echoed_in_full(target: str) -> None:
    """A 16 KB cursor is INVALID_ARGUMENT (not RESOURCE_EXHAUSTED for a status
    message too large to send), and so is a 10 MB value of any field."""
    with grpc.insecure_channel(target) as channel:
        for service, method in _every_rpc():
            if method.name not in ("WatchJobEvents", "RemoveRateLimit", "GetJob"):
                continue
            for path, _ in _string_fields(method.input_type):
                for size in (16 * 1024, 10 * 1024 * 1024):
                    request = _base(method)
                    _set(request, path, "7" * size)
                    code, details = _answer(*_call(channel, service, method, request))
                    assert code == "INVALID_ARGUMENT", (method.name, path, size, code)
                    assert len(details) < 400, (method.name, path, len(details))


def test_outcome_text_is_cut_not_refused(target: str) -> None:
    """A failure's error and traceback and a release's reason are free text:
    an outcome is never refused for them (its work is done); the error and the
    reason keep their first MAX_TEXT_LENGTH characters, the traceback its tail."""
    from workflowjobs.v1 import scheduler_service_pb2 as spb
    from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
    from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

    covered = {
        f"{m.input_type.full_name}.{path.split('.')[-1]}"
        for _, m in _every_rpc()
        for path, f in _string_fields(m.input_type)
        if f.full_name in OUTCOME_TEXT
    }
    with grpc.insecure_channel(target) as channel:
        scheduler = spb_grpc.JobSchedulerServiceStub(channel)
        worker = wpb_grpc.WorkerServiceStub(channel)

        def leased() -> tuple[str, str]:
            reply = scheduler.Enqueue(
                spb.EnqueueRequest(
                    job=jpb.JobSpec(
                        job_type="noop",
                        tenant_id="t",
                        retry_policy=jpb.RetryPolicy(max_attempts=1),
                    ),
                    inline=spb.InlineExecution(worker_id="inline-w"),
                ),
                timeout=10,
            )
            return reply.job.id, reply.lease_token

        job_id, token = leased()
        worker.FailJob(
            wpb.FailJobRequest(
                job_id=job_id, lease_token=token, error="e" * 10_000, traceback="t" * 100_000
            ),
            timeout=10,
        )
        [attempt] = scheduler.GetJob(
            spb.GetJobRequest(job_id=job_id, include_attempts=True), timeout=10
        ).job.attempts
        assert attempt.error.startswith("e" * MAX_TEXT_LENGTH + " [5,904 more characters cut]")
        assert len(attempt.traceback.encode()) < 17_000
        failed_id, failed_token = leased()
        released_id, released_token = leased()
        answer = worker.ReportOutcomes(
            wpb.ReportOutcomesRequest(
                outcomes=[
                    wpb.JobOutcome(
                        job_id=failed_id,
                        lease_token=failed_token,
                        failed=wpb.Failure(error="f" * 10_000, traceback="t" * 100_000),
                    ),
                    wpb.JobOutcome(
                        job_id=released_id,
                        lease_token=released_token,
                        released=wpb.Release(reason="r" * 10_000),
                    ),
                ]
            ),
            timeout=10,
        )
        assert [r.accepted for r in answer.results] == [True, True], answer
        job = scheduler.GetJob(spb.GetJobRequest(job_id=released_id), timeout=10).job
        assert job.last_error.startswith("r" * MAX_TEXT_LENGTH + " ["), job.last_error[-60:]
    assert covered == {
        "workflowjobs.v1.FailJobRequest.error",
        "workflowjobs.v1.FailJobRequest.traceback",
        "workflowjobs.v1.ReportOutcomesRequest.error",
        "workflowjobs.v1.ReportOutcomesRequest.traceback",
        "workflowjobs.v1.ReportOutcomesRequest.reason",
        "workflowjobs.v1.AcquireJobsRequest.error",
        "workflowjobs.v1.AcquireJobsRequest.traceback",
        "workflowjobs.v1.AcquireJobsRequest.reason",
    }, covered
