"""A workflow-jobs worker process for the bench: no-op handler, optional start records.

    python -m bench.worker_proc --target HOST:PORT [--concurrency 200]
        [--workers 1] [--record PATH] [--impl sdk|stream]

`--impl sdk` (the default, and what every reported figure uses) runs the real
`worker_sdk.Worker`. `--impl stream` is a bare `AcquireJobs` stream with
batched `ReportOutcomes`, for probing the coordinator without the SDK and for
cheap idle connections. `--workers N` runs N independent workers (N streams)
in this one process. With `--record`, each handler start is recorded (see
`bench.recording`). SIGTERM stops the process (the SDK drains first).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import uuid

import grpc

from bench.recording import StartRecorder
from workflowjobs.v1 import worker_service_pb2, worker_service_pb2_grpc

JOB_TYPE = "noop"


async def run_sdk_workers(
    target: str, concurrency: int, workers: int, recorder: StartRecorder | None, stop: asyncio.Event
) -> None:
    from worker_sdk import JobContext, Worker

    instances = []
    for _ in range(workers):
        worker = Worker(target=target, concurrency=concurrency)
        if recorder is None:

            @worker.handler(JOB_TYPE)
            async def noop(ctx: JobContext) -> None:  # noqa: ARG001 - the no-op under test
                return None
        else:

            @worker.handler(JOB_TYPE)
            async def noop(ctx: JobContext) -> None:
                recorder.record(ctx.tenant_id, ctx.payload, ctx.job_id)

        instances.append(worker)
    tasks = [asyncio.create_task(w.arun()) for w in instances]
    await stop.wait()
    for worker in instances:
        await worker.shutdown()
    await asyncio.gather(*tasks, return_exceptions=True)


async def run_stream_worker(
    target: str,
    concurrency: int,
    recorder: StartRecorder | None,
    stop: asyncio.Event,
    channel: grpc.aio.Channel,
) -> None:
    """One bare AcquireJobs stream: complete every pushed job at once, in batches."""
    stub = worker_service_pb2_grpc.WorkerServiceStub(channel)
    outgoing: asyncio.Queue[worker_service_pb2.AcquireJobsRequest | None] = asyncio.Queue()
    worker_id = f"bench-stream-{uuid.uuid4().hex[:12]}"
    await outgoing.put(
        worker_service_pb2.AcquireJobsRequest(
            hello=worker_service_pb2.WorkerHello(
                worker_id=worker_id,
                job_types=[JOB_TYPE],
                slots=concurrency,
                hostname=socket.gethostname(),
                pid=os.getpid(),
                sdk_version="bench-stream",
                max_batch_size=concurrency,
            )
        )
    )
    await outgoing.put(
        worker_service_pb2.AcquireJobsRequest(
            credit=worker_service_pb2.CreditGrant(credits=concurrency)
        )
    )

    async def requests():
        while True:
            item = await outgoing.get()
            if item is None:
                return
            yield item

    call = stub.AcquireJobs(requests())

    async def consume() -> None:
        async for response in call:
            if not response.HasField("jobs"):
                continue
            outcomes = []
            for leased in response.jobs.jobs:
                if recorder is not None:
                    recorder.record(leased.job.tenant_id, leased.job.payload.data, leased.job.id)
                outcomes.append(
                    worker_service_pb2.JobOutcome(
                        job_id=leased.job.id,
                        lease_token=leased.lease_token,
                        completed=worker_service_pb2.Completion(),
                    )
                )
            if outcomes:
                await stub.ReportOutcomes(
                    worker_service_pb2.ReportOutcomesRequest(outcomes=outcomes), timeout=60
                )
                await outgoing.put(
                    worker_service_pb2.AcquireJobsRequest(
                        credit=worker_service_pb2.CreditGrant(credits=len(outcomes))
                    )
                )

    consumer = asyncio.create_task(consume())
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({consumer, stopper}, return_when=asyncio.FIRST_COMPLETED)
    await outgoing.put(None)
    call.cancel()
    consumer.cancel()
    stopper.cancel()
    await asyncio.gather(consumer, stopper, return_exceptions=True)


async def amain(args: argparse.Namespace) -> None:
    recorder = StartRecorder(args.record) if args.record else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("READY", flush=True)
    try:
        if args.impl == "sdk":
            await run_sdk_workers(args.target, args.concurrency, args.workers, recorder, stop)
        else:
            async with grpc.aio.insecure_channel(args.target) as channel:
                await asyncio.gather(
                    *(
                        run_stream_worker(args.target, args.concurrency, recorder, stop, channel)
                        for _ in range(args.workers)
                    )
                )
    finally:
        if recorder is not None:
            recorder.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="workflow-jobs no-op worker for the bench")
    parser.add_argument("--target", required=True)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--record", default=None)
    parser.add_argument("--impl", choices=("sdk", "stream"), default="sdk")
    args = parser.parse_args()
    asyncio.run(amain(args))


if __name__ == "__main__":
    main()
