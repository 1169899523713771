"""Processes for the execution-mode tests, built on the public SDK.

  worker   a Worker serving the ``modes.*`` job types
  inline   runs one ``modes.hang`` job inline, then blocks (tests SIGKILL it)
  relay    an outbox relay that stops, blocked, between forwarding and deleting

The same handlers serve inline callers and remote workers; they branch on
``ctx.is_inline``. Every handler start is appended to ``--record`` as
``start <job id> <who> <attempt>``.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from pathlib import Path
from typing import Any

from worker_sdk import InlineRunner, JobContext, NonRetryableError, Worker


def register(registry: Worker | InlineRunner, record: Path | None, who: str) -> None:
    """Register the modes.* handlers on a worker or an inline runner."""

    def log(ctx: JobContext) -> None:
        if record is not None:
            with record.open("a") as f:
                f.write(f"start {ctx.job_id} {who} {ctx.attempt}\n")

    @registry.handler("modes.echo")
    def echo(payload: Any, ctx: JobContext) -> dict:
        log(ctx)
        return {"echo": payload, "inline": ctx.is_inline, "attempt": ctx.attempt}

    @registry.handler("modes.fail")
    def fail(payload: Any, ctx: JobContext) -> None:
        log(ctx)
        raise NonRetryableError("this job always fails")

    @registry.handler("modes.hang")
    async def hang(payload: Any, ctx: JobContext) -> dict:
        log(ctx)
        if ctx.is_inline:
            await asyncio.Event().wait()  # until the process is killed
        return {"finished_by": who, "inline": ctx.is_inline}

    @registry.handler("modes.steps")
    async def steps(progress: dict, ctx: JobContext) -> dict:
        """Counts ``done`` up to ``total``; inline it hands off or hangs at a step."""
        log(ctx)
        for done in range(progress["done"], progress["total"]):
            step = {**progress, "done": done}
            ctx.checkpoint(step)
            if ctx.is_inline and done == progress.get("hand_off_at"):
                ctx.hand_off(step, reason=f"handed off at step {done}")
            if ctx.is_inline and done == progress.get("hang_at"):
                await asyncio.Event().wait()  # until the time budget runs out
        return {"done": progress["total"], "resumed_from": progress["done"], "by": who}

    @registry.handler("modes.checkout")
    async def checkout(order: dict, ctx: JobContext) -> dict:
        log(ctx)
        if ctx.is_inline:
            ctx.continue_as("modes.ship", {"order": order["id"]})
        return {"shipped": order["id"], "by": who}

    @registry.handler("modes.ship")
    def ship(request: dict, ctx: JobContext) -> dict:
        log(ctx)
        return {
            "shipped": request["order"],
            "by": who,
            "traceparent": ctx.traceparent,
            "tracestate": ctx.job.tracestate,
            "instance_id": ctx.instance_id,
        }


def run_worker(args: argparse.Namespace) -> None:
    worker = Worker(args.target, worker_id=args.who, concurrency=10, shutdown_grace=2)
    register(worker, Path(args.record), args.who)
    worker.run()


def run_inline(args: argparse.Namespace) -> None:
    runner = InlineRunner(args.target, worker_id=args.who)
    register(runner, Path(args.record), args.who)
    runner.run_sync("modes.hang", {"why": "killed mid-run"}, heartbeat_timeout=2)


def run_relay(args: argparse.Namespace) -> None:
    from worker_sdk.outbox import OutboxRelay

    marker = Path(args.marker)

    class BlocksBeforeDelete(OutboxRelay):
        def _settle(self, rows: Any, results: Any) -> None:
            marker.write_text(" ".join(r.job_id for r in results))
            threading.Event().wait()  # the coordinator has the jobs; the rows are not deleted

    BlocksBeforeDelete(args.database_url, args.target, poll_interval=0.05).run()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["worker", "inline", "relay"])
    parser.add_argument("--target", required=True)
    parser.add_argument("--record", default="")
    parser.add_argument("--who", default="modes")
    parser.add_argument("--database-url", default="")
    parser.add_argument("--marker", default="")
    args = parser.parse_args()
    {"worker": run_worker, "inline": run_inline, "relay": run_relay}[args.mode](args)


if __name__ == "__main__":
    main()
