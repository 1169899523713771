"""The conformance kit's worker for the Python SDK (the contract: tests/conformance/README.md).

Run: python tests/conformance/python_worker.py --target HOST:PORT --worker-id ID
     [--concurrency N] [--shutdown-grace SECONDS] [--record FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from worker_sdk import JobContext, NonRetryableError, Worker

args = argparse.ArgumentParser()
args.add_argument("--target", required=True)
args.add_argument("--worker-id", required=True)
args.add_argument("--concurrency", type=int, default=4)
args.add_argument("--shutdown-grace", type=float, default=5.0)
args.add_argument("--record", default="")
options = args.parse_args()

# Spans with real ids, so the trace handler can say who its parent is.
trace.set_tracer_provider(TracerProvider())
worker = Worker(
    options.target,
    worker_id=options.worker_id,
    concurrency=options.concurrency,
    shutdown_grace=options.shutdown_grace,
)


def record(event: str, ctx: JobContext) -> None:
    if options.record:
        with open(options.record, "a") as f:
            f.write(f"{event} {ctx.job_id} {ctx.attempt} {time.time() * 1000:.0f}\n")


class FlakyError(Exception):
    pass


async def sleep(ctx: JobContext, seconds: float) -> None:
    """Sleep, ending early when the job's cancel signal is set."""
    try:
        await asyncio.wait_for(ctx.cancelled.wait(), seconds)
    except TimeoutError:
        pass


@worker.handler("echo")
async def echo(payload: Any, ctx: JobContext) -> Any:
    record("start", ctx)
    return payload


@worker.handler("flaky")
async def flaky(payload: dict[str, Any], ctx: JobContext) -> dict[str, int]:
    record("start", ctx)
    if ctx.attempt <= payload["fail_times"]:
        raise FlakyError(f"attempt {ctx.attempt} fails")
    return {"attempt": ctx.attempt}


@worker.handler("sleep")
async def sleeper(payload: dict[str, Any], ctx: JobContext) -> dict[str, int]:
    record("start", ctx)
    ms = payload.get("first_attempt_ms", payload["ms"]) if ctx.attempt == 1 else payload["ms"]
    await asyncio.sleep(ms / 1000)  # deaf to cancel signals: a handler that does not stop
    record("end", ctx)
    return {"slept_ms": ms}


@worker.handler("blocking")
def blocking(payload: dict[str, Any], ctx: JobContext) -> dict[str, int]:
    """A blocking handler (run in a thread): nothing can stop it."""
    record("start", ctx)
    ms = payload.get("first_attempt_ms", payload["ms"]) if ctx.attempt == 1 else payload["ms"]
    deadline = time.monotonic() + ms / 1000
    while time.monotonic() < deadline:
        time.sleep(0.1)
        record("tick", ctx)
    record("end", ctx)
    return {"ran_ms": ms}


@worker.handler("long")
async def long_running(payload: dict[str, Any], ctx: JobContext) -> dict[str, int]:
    record("start", ctx)
    deadline = time.monotonic() + payload["ms"] / 1000
    beats = 0
    while time.monotonic() < deadline:
        await sleep(ctx, payload["heartbeat_ms"] / 1000)
        ctx.heartbeat()
        beats += 1
    return {"heartbeats": beats}


@worker.handler("cancel")
async def cancel_aware(payload: Any, ctx: JobContext) -> dict[str, Any]:
    record("start", ctx)
    await sleep(ctx, 60)
    return {"cancelled": ctx.is_cancelled()}


@worker.handler("fatal")
async def fatal(payload: Any, ctx: JobContext) -> None:
    record("start", ctx)
    raise NonRetryableError("this job cannot succeed", kind="ConformanceFatal")


@worker.handler("large")
async def large(payload: dict[str, int], ctx: JobContext) -> dict[str, str]:
    record("start", ctx)
    return {"data": "x" * payload["bytes"]}


@worker.handler("spawn")
async def spawn(payload: dict[str, Any], ctx: JobContext) -> dict[str, str]:
    record("start", ctx)
    child = await ctx.enqueue_async("echo", payload["child"])
    return {"child_id": child.id}


@worker.handler("trace")
async def traced(payload: Any, ctx: JobContext) -> dict[str, str]:
    record("start", ctx)
    span = trace.get_current_span()
    parent = getattr(span, "parent", None)
    return {
        "trace_id": format(span.get_span_context().trace_id, "032x"),
        "span_id": format(span.get_span_context().span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent is not None else "",
    }


if __name__ == "__main__":
    worker.run()
