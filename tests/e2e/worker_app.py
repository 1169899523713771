"""A worker process for end-to-end tests, built on the public SDK.

Every handler start and finish is appended to ``--record`` as
``start|end <job id> <worker id> <unix time>`` so tests can check who ran what.
Job types:
  noop   returns at once
  sleep  sleeps payload["seconds"] (default 60), heartbeating automatically
  flaky  fails until its attempt reaches payload["succeed_on"]
  cancellable  waits up to payload["seconds"] (default 60) for its cancel signal and
         records ``cancelled`` when ``ctx.is_cancelled()`` turns true, then stops
  gate   waits until the file payload["path"] exists (tests open the gate)
  spawn  enqueues payload["children"] keyless noop child jobs and one keyed
         ("summary") with ctx.enqueue_async, then fails its first attempt
  spawn-sync  the same from a blocking handler with ctx.enqueue
  raw-result  returns a Payload message as is, with payload["content_type"] as its
         content type (a value the coordinator may refuse)
  throttle  reports push-back of payload["days"] days (ctx.throttle), then returns
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from datetime import timedelta

from worker_sdk import JobContext, Worker
from workflowjobs.v1 import job_pb2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--worker-id", default=f"e2e-{os.getpid()}")
    parser.add_argument("--heartbeat-interval", type=float, default=None)
    # The channel's receive limit in bytes (default: the SDK's).
    parser.add_argument("--max-receive-bytes", type=int, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    record = open(args.record, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def log(event: str, ctx: JobContext) -> None:
        record.write(f"{event} {ctx.job_id} {args.worker_id} {time.time():.6f}\n")

    worker = Worker(
        args.target,
        concurrency=args.concurrency,
        worker_id=args.worker_id,
        shutdown_grace=5,
        heartbeat_interval=args.heartbeat_interval,
        channel_options=(
            [("grpc.max_receive_message_length", args.max_receive_bytes)]
            if args.max_receive_bytes
            else []
        ),
    )

    @worker.handler("noop")
    async def noop(payload: dict, ctx: JobContext) -> dict:
        log("start", ctx)
        log("end", ctx)
        return {"ok": True}

    @worker.handler("sleep")
    async def sleep(payload: dict, ctx: JobContext) -> dict:
        log("start", ctx)
        await asyncio.sleep(float(payload.get("seconds", 60)))
        log("end", ctx)
        return {"slept": payload.get("seconds", 60)}

    @worker.handler("flaky")
    def flaky(payload: dict, ctx: JobContext) -> str:
        log("start", ctx)
        if ctx.attempt < int(payload.get("succeed_on", 2)):
            log("fail", ctx)
            raise RuntimeError(payload.get("message") or f"attempt {ctx.attempt} fails on purpose")
        log("end", ctx)
        return "done"

    @worker.handler("throttle")
    async def throttle(payload: dict, ctx: JobContext) -> dict:
        log("start", ctx)
        ctx.throttle(timedelta(days=float(payload["days"])))
        log("end", ctx)
        return {"throttled": True}

    @worker.handler("raw-result")
    async def raw_result(payload: dict, ctx: JobContext) -> job_pb2.Payload:
        log("start", ctx)
        log("end", ctx)
        return job_pb2.Payload(data=b"raw", content_type=payload["content_type"])

    @worker.handler("cancellable")
    async def cancellable(payload: dict, ctx: JobContext) -> dict:
        log("start", ctx)
        try:
            await asyncio.wait_for(ctx.cancelled.wait(), float(payload.get("seconds", 60)))
        except TimeoutError:
            log("end", ctx)
            return {"cancelled": False}
        if ctx.is_cancelled():
            log("cancelled", ctx)
        raise asyncio.CancelledError()

    @worker.handler("gate")
    async def gate(payload: dict, ctx: JobContext) -> dict:
        log("start", ctx)
        path = payload["path"]
        while not os.path.exists(path):
            await asyncio.sleep(0.05)
        log("end", ctx)
        return {"opened": True}

    @worker.handler("spawn")
    async def spawn(payload: dict, ctx: JobContext) -> dict:
        log("start", ctx)
        ids = [
            (await ctx.enqueue_async("noop", {"child": i})).id
            for i in range(int(payload.get("children", 2)))
        ]
        ids.append((await ctx.enqueue_async("noop", {}, key="summary")).id)
        if ctx.attempt < 2:
            log("fail", ctx)
            raise RuntimeError("the parent fails after enqueueing its children")
        log("end", ctx)
        return {"children": ids}

    @worker.handler("spawn-sync")
    def spawn_sync(payload: dict, ctx: JobContext) -> dict:
        log("start", ctx)
        ids = [ctx.enqueue("noop", {"child": i}).id for i in range(int(payload.get("children", 2)))]
        ids.append(ctx.enqueue("noop", {}, key="summary").id)
        if ctx.attempt < 2:
            log("fail", ctx)
            raise RuntimeError("the parent fails after enqueueing its children")
        log("end", ctx)
        return {"children": ids}

    worker.run()


if __name__ == "__main__":
    main()
