"""Configured limits answer RESOURCE_EXHAUSTED / INVALID_ARGUMENT over real gRPC."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from faults.harness import CoordinatorProcess
from security.conftest import CREDENTIALS, write_tokens
from security.test_auth import auth, code_of, spec

from coordinator.api.auth import parse_tokens
from coordinator.api.request_limits import RateLimiter, StreamCounter
from coordinator.errors import ResourceExhausted
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limits")
    tokens = tmp / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    coordinator = CoordinatorProcess(
        f"sqlite:///{tmp / 'limits.db'}",
        tmp,
        env={
            "WFJOBS_TOKENS_FILE": str(tokens),
            # admin-a gets 3 calls, then one every 1000 s: the 4th is refused.
            "WFJOBS_RATE_PER_CREDENTIAL": "0.001",
            "WFJOBS_RATE_BURST": "3",
            "WFJOBS_MAX_CREDITS_PER_STREAM": "5",
            "WFJOBS_MAX_STREAMS_PER_CONNECTION": "1",
            "WFJOBS_MAX_PAYLOAD_BYTES": "10",
            "WFJOBS_MAX_BATCH_SIZE": "2",
            "WFJOBS_MAX_STRING_LENGTH": "20",
        },
    )
    try:
        yield coordinator
    finally:
        coordinator.stop()


pytestmark = pytest.mark.e2e


def test_rate_per_credential(limited) -> None:
    with grpc.insecure_channel(limited.target) as channel:
        admin = apb_grpc.AdminServiceStub(channel)
        for _ in range(3):
            admin.GetStats(apb.GetStatsRequest(), metadata=auth("admin-a-secret"), timeout=10)
        code, details = code_of(admin.GetStats, apb.GetStatsRequest(), "admin-a-secret")
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "exceeded its rate limit of 0.001 requests/s (burst 3); retry in" in details
        # Other credentials have buckets of their own.
        scheduler = spb_grpc.JobSchedulerServiceStub(channel)
        scheduler.Enqueue(
            spb.EnqueueRequest(job=spec("a")), metadata=auth("sched-a-secret"), timeout=10
        )


def test_sizes_from_settings(limited) -> None:
    with grpc.insecure_channel(limited.target) as channel:
        scheduler = spb_grpc.JobSchedulerServiceStub(channel)
        big = jpb.JobSpec(job_type="noop", tenant_id="a", payload=jpb.Payload(data=b"x" * 11))
        code, details = code_of(scheduler.Enqueue, spb.EnqueueRequest(job=big), "root-secret")
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "the limit is 10 bytes" in details
        batch = spb.EnqueueBatchRequest(jobs=[spec("a")] * 3)
        code, details = code_of(scheduler.EnqueueBatch, batch, "root-secret")
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "limit of 2" in details
        long_type = spb.EnqueueRequest(job=spec("a", job_type="t" * 21))
        code, details = code_of(scheduler.Enqueue, long_type, "root-secret")
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "the limit is 20" in details


async def _stream(stub, credits: int, hold: asyncio.Event):
    """An AcquireJobs call whose request side stays open until ``hold`` is set."""

    async def requests():
        yield wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="w", job_types=["noop"]))
        yield wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=credits))
        await hold.wait()

    return stub.AcquireJobs(requests(), metadata=auth("worker-a-secret"))


def test_credit_and_stream_limits(limited) -> None:
    async def scenario() -> None:
        async with grpc.aio.insecure_channel(limited.target) as channel:
            stub = wpb_grpc.WorkerServiceStub(channel)
            hold = asyncio.Event()
            too_much = await _stream(stub, 6, hold)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                async for _ in too_much:
                    pass
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "the limit is 5" in info.value.details()

            # One stream per connection: a second one on the same channel is refused.
            first = await _stream(stub, 1, hold)
            accepted = await first.read()
            assert accepted.WhichOneof("kind") == "accepted"

            # The refusal comes when the call opens; send nothing on it, so that a
            # write racing the refusal cannot turn the status into a client error.
            async def silent():
                await hold.wait()
                yield wpb.AcquireJobsRequest()

            second = stub.AcquireJobs(silent(), metadata=auth("worker-a-secret"))
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await second.read()
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "per connection" in info.value.details()
            hold.set()
            first.cancel()

    asyncio.run(scenario())


def test_token_bucket_refills_with_time() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=2, burst=2, clock=lambda: now[0])
    limiter.check("c")
    limiter.check("c")
    with pytest.raises(ResourceExhausted, match="retry in 500 ms"):
        limiter.check("c")
    now[0] = 0.5
    limiter.check("c")


def test_stream_counter_frees_slots() -> None:
    counter = StreamCounter(per_connection=1, total=2)
    counter.open("p1")
    counter.open("p2")
    with pytest.raises(ResourceExhausted, match="limit"):
        counter.open("p3")
    counter.close("p1")
    counter.open("p3")
    assert counter.open_total == 2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 1: not JSON"),
        ('{"sha256": "abc", "roles": ["admin"], "tenants": ["*"]}', "64-hex-digit"),
        ('{"sha256": "' + "a" * 64 + '", "roles": ["root"], "tenants": ["*"]}', "'roles'"),
        ('{"sha256": "' + "a" * 64 + '", "roles": ["admin"]}', "'tenants'"),
    ],
)
def test_token_file_errors_name_the_line(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_tokens(line)


def test_refused_streams_see_resource_exhausted_even_when_they_say_hello_at_once(limited) -> None:
    """A worker writes its hello as it opens AcquireJobs; a stream refused for a
    limit must still end with RESOURCE_EXHAUSTED on the client, never with a
    failed write of its own (INTERNAL)."""

    async def refused(stub) -> tuple[grpc.StatusCode, str]:
        async def hello_then_wait():
            yield wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="x", job_types=["noop"]))
            await asyncio.Event().wait()  # the request side stays open

        call = stub.AcquireJobs(hello_then_wait(), metadata=auth("worker-b-secret"))
        try:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call.read()
        finally:
            call.cancel()
        return info.value.code(), info.value.details()

    async def scenario() -> list[tuple[grpc.StatusCode, str]]:
        async with grpc.aio.insecure_channel(limited.target) as channel:
            stub = wpb_grpc.WorkerServiceStub(channel)
            hold = asyncio.Event()

            async def requests():
                yield wpb.AcquireJobsRequest(
                    hello=wpb.WorkerHello(worker_id="w-b", job_types=["noop"])
                )
                await hold.wait()

            first = stub.AcquireJobs(requests(), metadata=auth("worker-b-secret"))
            assert (await first.read()).WhichOneof("kind") == "accepted"
            try:
                # The connection's one stream is taken, and worker-b's burst of 3
                # runs out after two more: refused per connection, then by rate.
                return await asyncio.gather(*(refused(stub) for _ in range(60)))
            finally:
                hold.set()
                first.cancel()

    answers = asyncio.run(scenario())
    assert {code for code, _ in answers} == {grpc.StatusCode.RESOURCE_EXHAUSTED}, answers
    assert any("per connection" in details for _, details in answers)
    assert any("rate limit" in details for _, details in answers)


def _own_connection(target: str) -> grpc.Channel:
    """A channel on a connection of its own (channels to one target share one)."""
    return grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


def _watch(channel: grpc.Channel, token: str):
    """A WatchJobEvents call and its first answer's status (OK once it opened)."""
    call = spb_grpc.JobSchedulerServiceStub(channel).WatchJobEvents(
        spb.WatchJobEventsRequest(), metadata=auth(token), timeout=60
    )
    try:
        next(iter(call))
    except grpc.RpcError as e:
        return call, e.code(), e.details()
    return call, grpc.StatusCode.OK, ""


def test_watches_and_waits_are_bounded(tmp_path) -> None:
    """docs/limits.md: open WatchJobEvents streams per connection, per
    credential and in total, and waiting WaitForJob calls per connection and
    in total; past them RESOURCE_EXHAUSTED, and a slot frees when its call
    ends (cancelled, or its deadline passed)."""
    from wfj_testing import wait_until

    tokens = tmp_path / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    coordinator = CoordinatorProcess(
        f"sqlite:///{tmp_path / 'watches.db'}",
        tmp_path,
        env={
            "WFJOBS_TOKENS_FILE": str(tokens),
            "WFJOBS_MAX_WATCHES_PER_CONNECTION": "2",
            "WFJOBS_MAX_WATCHES_PER_CREDENTIAL": "3",
            "WFJOBS_MAX_WATCHES_TOTAL": "4",
            "WFJOBS_MAX_WAITS_PER_CONNECTION": "2",
            "WFJOBS_MAX_WAITS_TOTAL": "3",
        },
    )
    exhausted = grpc.StatusCode.RESOURCE_EXHAUSTED
    channels = [_own_connection(coordinator.target) for _ in range(4)]
    calls = []
    try:
        one, two, three, four = channels
        for ch in (one, one, two):
            call, code, details = _watch(ch, "sched-a-secret")
            calls.append(call)
            assert code == grpc.StatusCode.OK, details
        _, code, details = _watch(one, "root-secret")
        assert (code, "the limit per connection" in details) == (exhausted, True), details
        _, code, details = _watch(two, "sched-a-secret")
        assert (code, "the limit per credential" in details) == (exhausted, True), details
        call, code, details = _watch(two, "root-secret")
        calls.append(call)
        assert code == grpc.StatusCode.OK, details
        _, code, details = _watch(three, "root-secret")
        assert code == exhausted and "serves 4 WatchJobEvents streams, its limit" in details
        # A watch that ends frees its slot.
        calls.pop(0).cancel()
        reopened = wait_until(
            lambda: (lambda c: c if c[1] == grpc.StatusCode.OK else None)(
                _watch(three, "root-secret")
            ),
            30,
            "a freed watch slot",
        )
        calls.append(reopened[0])

        job_id = (
            spb_grpc.JobSchedulerServiceStub(one)
            .Enqueue(spb.EnqueueRequest(job=spec("a")), metadata=auth("root-secret"), timeout=10)
            .job.id
        )

        def wait(ch: grpc.Channel, timeout: float):
            return spb_grpc.JobSchedulerServiceStub(ch).WaitForJob.future(
                spb.WaitForJobRequest(job_id=job_id), metadata=auth("root-secret"), timeout=timeout
            )

        def refused(ch: grpc.Channel, what: str) -> bool:
            """A further wait is refused (once the waits before it arrived)."""
            try:
                wait(ch, 2).result()
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    return False
                assert e.code() == exhausted and what in e.details(), e.details()
                return True
            raise AssertionError("a pending job's wait returned")

        waits = [wait(one, 60), wait(one, 60)]
        wait_until(lambda: refused(one, "the limit per connection"), 30, "a refused wait")
        short = wait(two, 5)
        assert wait_until(
            lambda: refused(four, "serves 3 WaitForJob calls waiting, its limit"),
            30,
            "a wait refused past the total",
        )
        # The wait whose deadline passed frees its slot: a new one waits.
        with pytest.raises(grpc.RpcError) as info:
            short.result()
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert wait_until(lambda: not refused(four, "its limit"), 30, "a freed wait slot")
        for w in waits:
            w.cancel()
    finally:
        for call in calls:
            call.cancel()
        for ch in channels:
            ch.close()
        coordinator.stop()
