"""Figure 7: coordinator peak memory with 200 connected workers and a 1M backlog.

A backlog of 1,000,000 pending no-op jobs is generated with set-based SQL
(`bench.seeding`); the coordinator starts on it; 200 SDK workers connect
(four processes × 50 workers, 4 slots each) and run jobs for a fixed window.
The coordinator's resident set size (its children included) is sampled every
100 ms from its start to the end of the window; the figure is the peak.
No peer: PgQueuer and Procrastinate have no coordinator process.
"""

from __future__ import annotations

import asyncio
import threading

import psutil

from bench import seeding, wfjobs
from bench.config import BenchConfig
from bench.database import PostgresServer
from bench.processes import ManagedProcess, stop_all
from bench.results import Row, Target

WORKER_PROCESSES = 4
SLOTS_PER_WORKER = 4
SAMPLE_INTERVAL_S = 0.1


class RssSampler:
    """Samples a process tree's RSS on a thread; keeps the peak."""

    def __init__(self, pid: int) -> None:
        self._process = psutil.Process(pid)
        self.peak_bytes = 0
        self.last_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> int:
        total = 0
        try:
            for proc in [self._process, *self._process.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
        except psutil.NoSuchProcess:
            return self.last_bytes
        self.last_bytes = total
        self.peak_bytes = max(self.peak_bytes, total)
        return total

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            self.sample()

    def __enter__(self) -> RssSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()


def seed_backlog(server: PostgresServer, backlog: int) -> float:
    server.recreate_database(wfjobs.DATABASE)
    wfjobs.Coordinator(server).migrate()
    return seeding.insert_backlog(server.dsn(wfjobs.DATABASE), seeding.Backlog(backlog, tenants=10))


async def measure_once(
    server: PostgresServer,
    workers_total: int,
    seconds: float,
) -> tuple[float, float, int]:
    """(peak RSS MB, RSS MB before workers connect, jobs completed)."""
    coordinator = wfjobs.Coordinator(server)
    coordinator.start()
    workers: list[ManagedProcess] = []
    try:
        with RssSampler(coordinator.pid) as sampler:
            await asyncio.sleep(1.0)
            idle_mb = sampler.sample() / 2**20
            per_process = workers_total // WORKER_PROCESSES
            workers = wfjobs.start_workers(
                coordinator.target,
                WORKER_PROCESSES,
                concurrency=SLOTS_PER_WORKER,
                workers_per_process=per_process,
                deadline_s=seconds + 240,
                name="memory-worker",
            )
            await wfjobs.wait_connected(
                coordinator.target, per_process * WORKER_PROCESSES, workers, timeout_s=120
            )
            await asyncio.sleep(seconds)
            coordinator.check_alive()
        counter = await wfjobs.CompletionCounter.open(server.dsn(wfjobs.DATABASE))
        try:
            completed = await counter.completed()
        finally:
            await counter.close()
    finally:
        stop_all(workers)
        coordinator.stop()
    return sampler.peak_bytes / 2**20, idle_mb, completed


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    peaks: list[float] = []
    note = ""
    try:
        seeded_s = seed_backlog(config.server, sizes.memory_backlog)
        print(f"  memory: seeded {sizes.memory_backlog:,} jobs in {seeded_s:.0f} s", flush=True)
        for run_index in range(config.runs):
            peak, idle, completed = await measure_once(
                config.server, sizes.memory_workers, sizes.memory_seconds
            )
            peaks.append(peak)
            note = (
                f"RSS before workers {idle:.0f} MB; {completed:,} jobs completed "
                f"(cumulative) in {sizes.memory_seconds:.0f} s windows"
            )
            print(f"  memory run {run_index + 1}: peak {peak:.0f} MB ({note})", flush=True)
    except Exception as exc:  # reported in the table
        note = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"  memory {note}", flush=True)
    label = (
        f"coordinator peak RSS, {sizes.memory_workers} workers, "
        f"{sizes.memory_backlog:,}-job backlog"
    )
    return [
        Row(
            figure=label,
            unit="MB",
            ours=peaks,
            target=Target.at_most(200.0, "≤ 200 MB"),
            higher_is_better=False,
            note=note,
        )
    ]
