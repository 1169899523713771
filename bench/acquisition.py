"""Acquisition throughput on a pre-filled jobs table (shared by figures 3 and 4).

The table is filled with set-based SQL (`bench.seeding`), then a fresh
coordinator starts on it with two SDK worker processes that record every
handler start. The rate is taken from those start times over the middle of
the first `window` starts (10 %–90 %, so connection warm-up and the last
stragglers do not count): it is how fast the coordinator hands out jobs from
that table, whatever else the table holds. The two cases of a ratio live in
two databases and alternate run by run, so slow drifts of a shared, noisy
machine fall on both.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from bench import wfjobs
from bench.database import PostgresServer
from bench.processes import LOG_DIR, ManagedProcess, ProcessFailed, stop_all
from bench.recording import StartRecord, count_records, read_records
from workflowjobs.v1 import admin_service_pb2, admin_service_pb2_grpc

WORKER_PROCESSES = 2
TIMEOUT_S = 300.0


def window_rate(records: list[StartRecord], window: int) -> float:
    """Starts per second over the 10 %–90 % slice of the first `window` records."""
    first = records[:window]
    lo, hi = len(first) // 10, (len(first) * 9) // 10
    if hi - lo < 2:
        raise ValueError(f"only {len(first)} starts recorded")
    span_s = (first[hi - 1].start_ns - first[lo].start_ns) / 1e9
    return (hi - lo - 1) / max(span_s, 1e-9)


async def pause_definition(target: str, tenant: str, definition: str) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        admin = admin_service_pb2_grpc.AdminServiceStub(channel)
        await admin.Pause(
            admin_service_pb2.PauseRequest(
                scope=admin_service_pb2.PauseScope(
                    kind=admin_service_pb2.PAUSE_SCOPE_KIND_DEFINITION,
                    tenant_id=tenant,
                    value=definition,
                ),
                actor="bench",
                reason="acquisition with paused jobs present",
            ),
            timeout=30,
        )


async def measure_rate(
    server: PostgresServer,
    *,
    database: str,
    window: int,
    concurrency: int,
    pause: tuple[str, str] | None = None,
    prepare: Callable[[str], Awaitable[None]] | None = None,
) -> float:
    """Start a coordinator on the seeded table; jobs/s handed out over the window.

    Args:
        server: The bench PostgreSQL.
        database: The seeded bench database to serve.
        window: Starts to observe.
        concurrency: Slots per worker process.
        pause: (tenant, definition) to pause before the workers connect.
        prepare: Called with the coordinator's address before the workers connect.
    """
    coordinator = wfjobs.Coordinator(server, database)
    coordinator.start()
    record = LOG_DIR / f"acquisition-{time.monotonic_ns()}"
    paths = [Path(f"{record}.{i}") for i in range(WORKER_PROCESSES)]
    workers: list[ManagedProcess] = []
    try:
        if pause is not None:
            await pause_definition(coordinator.target, *pause)
        if prepare is not None:
            await prepare(coordinator.target)
        workers = wfjobs.start_workers(
            coordinator.target,
            WORKER_PROCESSES,
            concurrency=concurrency,
            deadline_s=TIMEOUT_S + 60,
            record=str(record),
        )
        end = time.monotonic() + TIMEOUT_S
        while count_records(paths) < window:
            if time.monotonic() > end:
                raise TimeoutError(f"{count_records(paths)}/{window} starts in {TIMEOUT_S:.0f} s")
            for worker in workers:
                if not worker.running():
                    raise ProcessFailed(f"{worker.name} exited:\n{worker.log_tail()}")
            coordinator.check_alive()
            await asyncio.sleep(0.1)
    finally:
        stop_all(workers)
        coordinator.stop()
    return window_rate(read_records(paths), window)
