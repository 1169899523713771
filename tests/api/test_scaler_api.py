"""KEDA's external scaler and GetStats over real gRPC (a coordinator in this
process, raw stubs, both stores): the backlog counts only what workers could
start now, held and scheduled jobs apart, the same numbers in both; the open
scaler costs one computation per query shape whatever the number of callers;
its streams and its token-less calls are bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from coordinator.api.request_limits import ApiLimits
from coordinator.api.server import CoordinatorServer
from coordinator.engine import Engine
from coordinator.model import ConcurrencyLimit, LimitKind, PauseKind, PauseScope, RateLimit
from coordinator.store import open_store
from wfj_testing import make_job
from workflowjobs.externalscaler import externalscaler_pb2 as kpb
from workflowjobs.externalscaler import externalscaler_pb2_grpc as kpb_grpc
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

# A channel of its own connection (channels to one target share one by default).
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def _run(url: str, scenario: Callable[[CoordinatorServer], Awaitable[None]], **limits: Any) -> None:
    async def main() -> None:
        server = CoordinatorServer(
            Engine(open_store(url)), "127.0.0.1:0", limits=ApiLimits(**limits)
        )
        await server.start()
        try:
            await scenario(server)
        finally:
            await server.stop(0)

    asyncio.run(main())


def _channel(server: CoordinatorServer) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(f"127.0.0.1:{server.port}", options=OWN_CONNECTION)


def _ref(job_types: str, **metadata: str) -> kpb.ScaledObjectRef:
    return kpb.ScaledObjectRef(
        name="workers", namespace="jobs", scalerMetadata={"jobTypes": job_types, **metadata}
    )


async def _metric(stub: kpb_grpc.ExternalScalerStub, job_types: str) -> int:
    response = await stub.GetMetrics(
        kpb.GetMetricsRequest(scaledObjectRef=_ref(job_types), metricName="s0-wfjobs_backlog")
    )
    return int(response.metricValues[0].metricValue)


async def _settled_metric(stub: kpb_grpc.ExternalScalerStub, job_types: str, want: int) -> int:
    """The metric once the cached figure (at most about a second old) shows ``want``."""
    deadline = time.monotonic() + 30
    value = await _metric(stub, job_types)
    while value != want and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        value = await _metric(stub, job_types)
    return value


async def _worker(
    channel: grpc.aio.Channel, worker_id: str, job_types: list[str], stop: asyncio.Event
) -> AsyncIterator[Any]:
    """A worker stream that says hello and grants no credit: connected, takes nothing."""

    async def requests() -> AsyncIterator[wpb.AcquireJobsRequest]:
        yield wpb.AcquireJobsRequest(
            hello=wpb.WorkerHello(worker_id=worker_id, job_types=job_types, slots=1)
        )
        await stop.wait()

    return wpb_grpc.WorkerServiceStub(channel).AcquireJobs(requests())


def _held(b: apb.Backlog) -> dict[str, int]:
    return {
        name: getattr(b, name)
        for name in (
            "ready",
            "scheduled",
            "held_paused",
            "held_limit",
            "held_rate",
            "held_ordering",
            "held_no_worker",
            "held_drained",
            "running",
        )
        if getattr(b, name)
    }


async def _wait_workers(server: CoordinatorServer, n: int) -> None:
    deadline = time.monotonic() + 30
    while len(await server.engine.ops.list_workers()) < n:
        assert time.monotonic() < deadline, "workers never connected"
        await asyncio.sleep(0.05)


def test_a_concurrency_limit_counts_only_its_free_slots(store_url: str) -> None:
    async def scenario(server: CoordinatorServer) -> None:
        engine = server.engine
        await engine.set_limit(ConcurrencyLimit(LimitKind.JOB_TYPE, "noop", 1))
        await engine.enqueue([make_job(due_at=0) for _ in range(200)])
        channel = _channel(server)
        scaler = kpb_grpc.ExternalScalerStub(channel)
        admin = apb_grpc.AdminServiceStub(channel)
        # No worker yet: the one free slot is what a started worker could take.
        assert await _settled_metric(scaler, "noop", 1) == 1
        stats = await admin.GetStats(apb.GetStatsRequest())
        assert _held(stats.backlog) == {"held_no_worker": 1, "held_limit": 199}
        stop = asyncio.Event()
        call = await _worker(channel, "w-noop", ["noop"], stop)
        await _wait_workers(server, 1)
        stats = await admin.GetStats(apb.GetStatsRequest())
        assert _held(stats.backlog) == {"ready": 1, "held_limit": 199}
        [by_type] = stats.backlog_by_type
        assert (by_type.tenant_id, by_type.job_type, by_type.ready) == ("tenant-a", "noop", 1)
        # The slot taken: nothing more can start, the running one is in flight.
        leased = await engine.acquisition.lease(
            ["noop"], None, ["w-noop"], "t", engine.clock.now_us()
        )
        assert len(leased.rows) == 1
        stats = await admin.GetStats(apb.GetStatsRequest())
        assert _held(stats.backlog) == {"held_limit": 199, "running": 1}
        assert await _settled_metric(scaler, "noop", 1) == 1
        stop.set()
        call.cancel()
        await channel.close()

    _run(store_url, scenario)


def test_each_held_job_is_counted_once_for_what_holds_it(store_url: str) -> None:
    async def scenario(server: CoordinatorServer) -> None:
        engine = server.engine
        far = int(time.time() * 1e6) + 3600 * 10**6
        await engine.set_rate_limit(RateLimit(LimitKind.JOB_TYPE, "rated", 3, 3_600_000, 3))
        await engine.enqueue(
            [make_job(job_type="rated", due_at=0) for _ in range(10)]
            + [make_job(job_type="later", due_at=far) for _ in range(4)]
            + [make_job(job_type="frozen", due_at=0) for _ in range(5)]
            + [make_job(job_type="ordered", due_at=0, ordering_key="k") for _ in range(3)]
            + [make_job(job_type="idle", due_at=0) for _ in range(2)]
        )
        await engine.pause(PauseScope(PauseKind.JOB_TYPE, value="frozen"), "ops", "", None)
        channel = _channel(server)
        stop = asyncio.Event()
        calls = [
            await _worker(channel, "w-main", ["rated", "later", "frozen", "ordered"], stop),
            await _worker(channel, "w-idle", ["idle"], stop),
        ]
        await _wait_workers(server, 2)
        await engine.ops.drain(False, "w-idle")
        admin = apb_grpc.AdminServiceStub(channel)
        stats = await admin.GetStats(apb.GetStatsRequest())
        by_type = {b.job_type: _held(b) for b in stats.backlog_by_type}
        assert by_type == {
            "rated": {"ready": 3, "held_rate": 7},
            "later": {"scheduled": 4},
            "frozen": {"held_paused": 5},
            "ordered": {"ready": 1, "held_ordering": 2},
            "idle": {"held_drained": 2},
        }
        assert _held(stats.backlog) == {
            "ready": 4,
            "scheduled": 4,
            "held_paused": 5,
            "held_rate": 7,
            "held_ordering": 2,
            "held_drained": 2,
        }
        # The scaler serves the same computation: ready plus what waits only for a worker.
        scaler = kpb_grpc.ExternalScalerStub(channel)
        for job_types, want in (("rated", 3), ("later,frozen", 0), ("ordered", 1), ("idle", 2)):
            assert await _metric(scaler, job_types) == want, job_types
        stop.set()
        for call in calls:
            call.cancel()
        await channel.close()

    _run(store_url, scenario)


def test_concurrent_scaler_callers_cost_one_computation_per_shape(store_url: str) -> None:
    async def scenario(server: CoordinatorServer) -> None:
        engine = server.engine
        await engine.enqueue([make_job(job_type=t, due_at=0) for t in ("a", "b") for _ in range(3)])
        counted: list[tuple[str, ...]] = []
        read = engine.store.job_backlog_groups

        def counting(now: int, job_types: Any = (), *args: Any) -> Any:
            counted.append(tuple(job_types))
            return read(now, job_types, *args)

        engine.store.job_backlog_groups = counting  # type: ignore[method-assign]
        channels = [_channel(server) for _ in range(4)]
        stubs = [kpb_grpc.ExternalScalerStub(c) for c in channels]
        # 200 callers at once over four connections, two shapes (types in any order):
        # each shape is computed once per refresh period the burst spans (one,
        # unless a busy machine stretches the burst past a period).
        started = time.monotonic()
        answers = await asyncio.gather(
            *(
                _metric(stubs[i % 4], ("a", "b,a", "a,b")[i % 3] if i % 2 else "a")
                for i in range(200)
            )
        )
        elapsed = time.monotonic() - started
        assert sorted(set(answers)) == [3, 6]
        assert set(counted) == {("a",), ("a", "b")}
        periods = int(elapsed / engine.scaling.refresh_s) + 1
        assert all(counted.count(shape) <= periods for shape in set(counted)), (counted, elapsed)
        # Callers polling for a while: each shape is read again at most about once a second.
        counted.clear()
        started = time.monotonic()

        async def poll(stub: kpb_grpc.ExternalScalerStub, job_types: str) -> None:
            for _ in range(30):
                await _metric(stub, job_types)
                await stub.IsActive(_ref(job_types))
                await asyncio.sleep(0.05)

        await asyncio.gather(*(poll(stubs[i % 4], ("a", "a,b")[i % 2]) for i in range(20)))
        elapsed = time.monotonic() - started
        per_shape = {shape: counted.count(shape) for shape in set(counted)}
        assert set(per_shape) <= {("a",), ("a", "b")}
        bound = elapsed / engine.scaling.refresh_s + 1
        assert all(n <= bound for n in per_shape.values()), (per_shape, elapsed)
        # 20 callers x 60 calls each were answered by a handful of computations.
        assert sum(per_shape.values()) < 1200 / 20
        for channel in channels:
            await channel.close()

    _run(store_url, scenario)


def test_stream_is_active_streams_are_bounded_per_connection_and_in_all(store_url: str) -> None:
    async def scenario(server: CoordinatorServer) -> None:
        first, second = _channel(server), _channel(server)
        open_streams = []

        async def opened(channel: grpc.aio.Channel) -> Any:
            stream = kpb_grpc.ExternalScalerStub(channel).StreamIsActive(_ref("noop"))
            await stream.read()  # the first answer: the stream is open
            open_streams.append(stream)
            return stream

        async def refused(channel: grpc.aio.Channel) -> str:
            stream = kpb_grpc.ExternalScalerStub(channel).StreamIsActive(_ref("noop"))
            try:
                await stream.read()
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                return error.details() or ""
            raise AssertionError("a stream beyond the limit was served")

        await opened(first)
        await opened(first)
        assert "this connection already has 2 StreamIsActive streams" in await refused(first)
        await opened(second)
        assert "already serves 3 StreamIsActive streams" in await refused(second)
        # A closed stream frees its place.
        open_streams.pop().cancel()
        deadline = time.monotonic() + 30
        while True:
            try:
                await opened(second)
                break
            except grpc.aio.AioRpcError:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
        for stream in open_streams:
            stream.cancel()
        await first.close()
        await second.close()

    _run(
        store_url,
        scenario,
        max_scaler_streams_per_connection=2,
        max_scaler_streams_total=3,
    )


def test_token_less_scaler_calls_are_charged_per_peer_host(store_url: str) -> None:
    async def scenario(server: CoordinatorServer) -> None:
        first, second = _channel(server), _channel(server)
        stub = kpb_grpc.ExternalScalerStub(first)
        for _ in range(5):
            await stub.IsActive(_ref("noop"))
        # Beyond the burst, on this connection or another one from the same host.
        for channel in (first, second):
            try:
                await kpb_grpc.ExternalScalerStub(channel).GetMetrics(
                    kpb.GetMetricsRequest(scaledObjectRef=_ref("noop"))
                )
            except grpc.aio.AioRpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "peer ipv4:127.0.0.1 (no token) exceeded its rate limit" in (
                    error.details() or ""
                )
            else:
                raise AssertionError("a call beyond the per-peer limit was served")
        await first.close()
        await second.close()

    _run(store_url, scenario, rate_per_credential=0.001, rate_burst=5)
