"""A worker process for end-to-end tests, built on the public SDK.

Every handler start and finish is appended to ``--record`` as
``start|end <job id> <worker id> <unix time>`` so tests can check who ran what.
Job types:
  noop   returns at once
  sleep  sleeps payload["seconds"] (default 60), heartbeating automatically
  flaky  fails until its attempt reaches payload["succeed_on"]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from worker_sdk import JobContext, Worker


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--worker-id", default=f"e2e-{os.getpid()}")
    args = parser.parse_args()

    record = open(args.record, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def log(event: str, ctx: JobContext) -> None:
        record.write(f"{event} {ctx.job_id} {args.worker_id} {time.time():.6f}\n")

    worker = Worker(
        args.target, concurrency=args.concurrency, worker_id=args.worker_id, shutdown_grace=5
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
            raise RuntimeError(f"attempt {ctx.attempt} fails on purpose")
        log("end", ctx)
        return "done"

    worker.run()


if __name__ == "__main__":
    main()
