"""JobBatch messages fit the worker's receive limit, and jobs a broken stream
never handed to gRPC are handed back at once (a real coordinator in this process,
raw gRPC streams, both stores)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc

from coordinator.api.server import CoordinatorServer
from coordinator.engine import Engine
from coordinator.model import AttemptOutcome, JobStatus
from coordinator.store import open_store
from wfj_testing import make_job
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

MIB = 1024 * 1024
BIG = b"x" * (9 * MIB // 10)  # 0.9 MiB, under the 1 MiB payload limit


async def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def _run(url: str, scenario: Any) -> None:
    async def main() -> None:
        server = CoordinatorServer(Engine(open_store(url)), "127.0.0.1:0")
        await server.start()
        try:
            await scenario(server)
        finally:
            await server.stop(0)

    asyncio.run(main())


async def _enqueue_big(server: CoordinatorServer, n: int) -> list[str]:
    jobs = [make_job(payload=BIG, heartbeat_timeout_ms=600_000, due_at=0) for _ in range(n)]
    return [job_id for job_id, _, _ in await server.engine.enqueue(jobs)]


def _hello(
    receive_limit: int, worker_id: str = "raw-worker", max_batch_size: int = 100
) -> wpb.AcquireJobsRequest:
    return wpb.AcquireJobsRequest(
        hello=wpb.WorkerHello(
            worker_id=worker_id,
            job_types=["noop"],
            slots=40,
            max_batch_size=max_batch_size,
            max_receive_message_bytes=receive_limit,
        )
    )


async def _requests(receive_limit: int, stop: asyncio.Event, max_batch_size: int = 100) -> Any:
    yield _hello(receive_limit, max_batch_size=max_batch_size)
    yield wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=40))
    await stop.wait()


def test_batches_are_cut_to_the_announced_receive_limit(store_url: str) -> None:
    async def scenario(server: CoordinatorServer) -> None:
        ids = await _enqueue_big(server, 40)
        limit = 4 * MIB
        channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{server.port}", options=[("grpc.max_receive_message_length", limit)]
        )
        stop = asyncio.Event()
        call = wpb_grpc.WorkerServiceStub(channel).AcquireJobs(_requests(limit, stop))
        received: list[str] = []
        sizes: list[int] = []
        async for message in call:
            if message.WhichOneof("kind") == "jobs":
                sizes.append(message.ByteSize())
                received.extend(j.job.id for j in message.jobs.jobs)
                if len(received) == len(ids):
                    break
        stop.set()
        call.cancel()
        await channel.close()
        assert sorted(received) == sorted(ids)
        assert max(sizes) <= limit and len(sizes) >= 10

    _run(store_url, scenario)


def test_jobs_a_broken_stream_never_sent_are_handed_back_at_once(store_url: str) -> None:
    async def scenario(server: CoordinatorServer) -> None:
        ids = await _enqueue_big(server, 40)
        # The worker claims 64 MiB but its channel keeps gRPC's 4 MiB default:
        # the first 9 MB batch it asked for (10 jobs a batch) breaks its stream.
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        stop = asyncio.Event()
        call = wpb_grpc.WorkerServiceStub(channel).AcquireJobs(
            _requests(64 * MIB, stop, max_batch_size=10)
        )
        code = None
        try:
            async for _ in call:
                pass
        except grpc.aio.AioRpcError as e:
            code = e.code()
        stop.set()
        await channel.close()
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED

        async def states() -> tuple[list[str], list[str]]:
            kept, handed_back = [], []
            for job_id in ids:
                row, attempts = await server.engine.get_job(job_id, with_attempts=True)
                if row.status == JobStatus.PENDING and attempts:
                    assert [a.outcome for a in attempts] == [AttemptOutcome.RELEASED]
                    assert row.attempt <= row.max_attempts - 2  # the hand-back used no attempt
                    handed_back.append(job_id)
                elif row.status == JobStatus.RUNNING:
                    kept.append(job_id)
            return kept, handed_back

        async def all_decided() -> bool:
            kept, handed_back = await states()
            return len(kept) + len(handed_back) == len(ids) and len(handed_back) >= 30

        # Their leases run 600 s: only a hand-back makes them PENDING this soon.
        await _wait(all_decided, 20, "the undelivered jobs to be handed back")
        kept, _ = await states()
        # The message handed to gRPC may have reached the worker: its jobs stay
        # leased (until the lease expires); the batches never written went back.
        assert 1 <= len(kept) <= 10, kept

    _run(store_url, scenario)


def test_lease_batches_queued_in_one_turn_go_out_in_one_message_up_to_the_batch_size(
    store_url: str,
) -> None:
    async def hello_only(max_batch_size: int, stop: asyncio.Event) -> Any:
        yield _hello(4 * MIB, max_batch_size=max_batch_size)
        await stop.wait()  # no credit: no pass leases anything on its own

    async def messages(max_batch_size: int, server: CoordinatorServer) -> list[list[str]]:
        jobs = [make_job(heartbeat_timeout_ms=600_000, due_at=0) for _ in range(3)]
        await server.engine.enqueue(jobs)
        rows = [(await server.engine.get_job(j.id))[0] for j in jobs]
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        stop = asyncio.Event()
        call = wpb_grpc.WorkerServiceStub(channel).AcquireJobs(hello_only(max_batch_size, stop))
        dispatcher = server.engine.dispatcher
        await _wait(
            lambda: asyncio.sleep(0, "raw-worker" in dispatcher.sessions),
            10,
            "the stream's session",
        )
        session = dispatcher.sessions["raw-worker"]
        # Two deliveries in one loop turn, as two enqueues' direct dispatch make.
        dispatcher.deliver([(session, rows[:1])], "token-1")
        dispatcher.deliver([(session, rows[1:])], "token-2")
        received: list[list[str]] = []
        async for message in call:
            if message.WhichOneof("kind") == "jobs":
                received.append([f"{j.job.id}/{j.lease_token}" for j in message.jobs.jobs])
                if sum(map(len, received)) == 3:
                    break
        stop.set()
        call.cancel()
        await channel.close()
        tokens = ["token-1", "token-2", "token-2"]
        assert [item for m in received for item in m] == [
            f"{r.id}/{t}" for r, t in zip(rows, tokens, strict=True)
        ]
        return received

    async def scenario(server: CoordinatorServer) -> None:
        # One message for both batches, each job with its own lease token.
        assert [len(m) for m in await messages(100, server)] == [3]
        # Never more jobs in one message than the worker's batch size.
        assert [len(m) for m in await messages(2, server)] == [1, 2]

    _run(store_url, scenario)
