"""A worker process for fault tests, built on the public SDK.

Every handler start is appended to ``--record`` as
``start <job id> <attempt> <worker id> <wall clock µs>`` (and ``end …`` when it
returns), one
short line per ``write`` so a SIGKILL never leaves half a line behind.

Job types:
  work  sleeps payload["ms"] milliseconds (default 0), then returns
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import grpc

from worker_sdk import JobContext, Worker


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--worker-id", default=f"fault-{os.getpid()}")
    parser.add_argument("--heartbeat-interval", type=float, default=0.5)
    parser.add_argument("--round-robin", action="store_true")
    parser.add_argument("--token", default=None)
    parser.add_argument("--ca", default=None, help="PEM file of the CA that signed the server")
    args = parser.parse_args()

    fd = os.open(args.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(event: str, ctx: JobContext) -> None:
        line = f"{event} {ctx.job_id} {ctx.attempt} {args.worker_id} {time.time_ns() // 1000}\n"
        os.write(fd, line.encode())

    options: list[tuple[str, object]] = [
        # A killed coordinator's sockets close at once; reconnect promptly.
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 500),
    ]
    if args.round_robin:
        options.append(("grpc.lb_policy_name", "round_robin"))
    credentials = None
    if args.ca:
        with open(args.ca, "rb") as f:
            credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    worker = Worker(
        args.target,
        concurrency=args.concurrency,
        worker_id=args.worker_id,
        heartbeat_interval=args.heartbeat_interval,
        shutdown_grace=2,
        reconnect_max_backoff=0.5,
        channel_options=options,
        token=args.token,
        credentials=credentials,
    )

    @worker.handler("work")
    async def work(payload: dict, ctx: JobContext) -> dict:
        log("start", ctx)
        ms = float(payload.get("ms", 0))
        if ms:
            await asyncio.sleep(ms / 1000)
        log("end", ctx)
        return {"n": payload.get("n")}

    worker.run()


if __name__ == "__main__":
    main()
