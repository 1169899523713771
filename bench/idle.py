"""Figure 6: the cost of an idle coordinator with connected workers.

A coordinator with 10 connected, idle SDK workers (two processes × five
workers) and an empty queue, watched over a window: database transactions
per second on the bench database (`pg_stat_database` xact_commit +
xact_rollback; every statement outside an explicit transaction is one) and
the coordinator process's CPU % (user + system, its children included).
The peer figure is PgQueuer's: 10 idle worker processes on its database
(PgQueuer has no coordinator, so only its query rate compares).

PostgreSQL flushes these counters about once a second (an idle backend up to
10 s late), so the window starts after a settle period; the lag is the same
at both ends of a steady state.
"""

from __future__ import annotations

import asyncio
import time

from bench import wfjobs
from bench.config import BenchConfig
from bench.cpu import cpu_seconds
from bench.database import PostgresServer
from bench.pgqueuer_peer import DATABASE as PGQUEUER_DATABASE
from bench.pgqueuer_peer import PgQueuerSystem
from bench.processes import ManagedProcess, stop_all
from bench.results import Row, Target

IDLE_WORKERS = 10
WORKER_PROCESSES = 2
SETTLE_S = 12.0  # > PostgreSQL 15's 10 s flush delay for idle backends: start-up work is counted before the window


async def measure_ours(server: PostgresServer, seconds: float) -> tuple[float, float]:
    server.recreate_database(wfjobs.DATABASE)
    coordinator = wfjobs.Coordinator(server)
    coordinator.migrate()
    coordinator.start()
    workers: list[ManagedProcess] = []
    try:
        workers = wfjobs.start_workers(
            coordinator.target,
            WORKER_PROCESSES,
            concurrency=10,
            deadline_s=seconds + 180,
            workers_per_process=IDLE_WORKERS // WORKER_PROCESSES,
            name="idle-worker",
        )
        await wfjobs.wait_connected(coordinator.target, IDLE_WORKERS, workers)
        await asyncio.sleep(SETTLE_S)
        xacts_before = server.transaction_count(wfjobs.DATABASE)
        cpu_before = cpu_seconds(coordinator.pid)
        started = time.monotonic()
        await asyncio.sleep(seconds)
        elapsed = time.monotonic() - started
        cpu_after = cpu_seconds(coordinator.pid)
        xacts_after = server.transaction_count(wfjobs.DATABASE)
        coordinator.check_alive()
    finally:
        stop_all(workers)
        coordinator.stop()
    return (xacts_after - xacts_before) / elapsed, (cpu_after - cpu_before) / elapsed * 100


async def measure_pgqueuer(server: PostgresServer, seconds: float) -> float:
    system = PgQueuerSystem(server, batch_size=10)
    await system.prepare()
    workers: list[ManagedProcess] = []
    try:
        workers = system.start_workers(IDLE_WORKERS, deadline_s=seconds + 180)
        await system.wait_ready(workers, 60)
        await asyncio.sleep(SETTLE_S)
        before = server.transaction_count(PGQUEUER_DATABASE)
        started = time.monotonic()
        await asyncio.sleep(seconds)
        elapsed = time.monotonic() - started
        after = server.transaction_count(PGQUEUER_DATABASE)
    finally:
        stop_all(workers)
    return (after - before) / elapsed


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    seconds = config.sizes.idle_seconds
    queries: list[float] = []
    cpu: list[float] = []
    peer_queries: list[float] = []
    errors: list[str] = []
    for run_index in range(config.runs):
        try:
            rate, percent = await measure_ours(config.server, seconds)
            queries.append(rate)
            cpu.append(percent)
            print(
                f"  idle run {run_index + 1} ours: {rate:.2f} queries/s, CPU {percent:.2f} %",
                flush=True,
            )
        except Exception as exc:  # reported in the table
            errors.append(f"ours failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            print(f"  idle {errors[-1]}", flush=True)
        try:
            peer_rate = await measure_pgqueuer(config.server, seconds)
            peer_queries.append(peer_rate)
            print(f"  idle run {run_index + 1} PgQueuer: {peer_rate:.2f} queries/s", flush=True)
        except Exception as exc:  # reported in the table
            errors.append(
                f"PgQueuer failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            )
    label = f"idle coordinator, {IDLE_WORKERS} connected workers, {seconds:.0f} s"
    note = "; ".join(dict.fromkeys(errors)) or "transactions/s from pg_stat_database"
    return [
        Row(
            figure=f"{label}: database queries/s",
            unit="/s",
            ours=queries,
            comparison=peer_queries,
            comparison_name="PgQueuer, 10 idle worker processes",
            target=Target.at_most(2.0, "≤ 2 /s"),
            higher_is_better=False,
            note=note,
        ),
        Row(
            figure=f"{label}: coordinator CPU",
            unit="%",
            ours=cpu,
            target=Target.at_most(1.0, "≈ 0 % (≤ 1 %)"),
            higher_is_better=False,
        ),
    ]
