"""Figure 1: end-to-end throughput, workflow-jobs beside PgQueuer and Procrastinate.

Each system gets the same shape of run: its worker processes are started
and ready (idle, connected); the clock starts; N no-op jobs are enqueued in
batches of 1,000 while the workers already run them; the clock stops when
the database counts N completed jobs (polled every 50 ms). Rate = N ÷ time,
so it includes enqueueing, acquisition, the handler call and recording the
outcome. Runs of the systems are interleaved so machine noise spreads evenly.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from bench.config import BenchConfig
from bench.pgqueuer_peer import PgQueuerSystem
from bench.processes import ManagedProcess, ProcessFailed, enforce_deadlines, stop_all
from bench.procrastinate_peer import ProcrastinateSystem
from bench.results import Row, Target
from bench.wfjobs import WorkflowJobsSystem

POLL_INTERVAL_S = 0.05


class CompletionCounter(Protocol):
    async def completed(self) -> int: ...
    async def close(self) -> None: ...


class QueueSystem(Protocol):
    """What the throughput figure needs from a queue under test."""

    name: str

    async def prepare(self) -> None:
        """Fresh database and schema (and, for workflow-jobs, a running coordinator)."""

    def start_workers(self, processes: int, deadline_s: float) -> list[ManagedProcess]: ...

    async def wait_ready(self, workers: list[ManagedProcess], timeout_s: float) -> None: ...

    async def enqueue(self, jobs: int, batch: int) -> None: ...

    async def open_counter(self) -> CompletionCounter: ...


async def measure_once(system: QueueSystem, *, processes: int, jobs: int, batch: int,
                       timeout_s: float) -> float:
    """One run: jobs/s from the first enqueue to the last completion."""
    await system.prepare()
    workers: list[ManagedProcess] = []
    try:
        workers = system.start_workers(processes, deadline_s=timeout_s + 120)
        await system.wait_ready(workers, timeout_s=60)
        counter = await system.open_counter()
        try:
            started = time.perf_counter()
            enqueue = asyncio.create_task(system.enqueue(jobs, batch))
            while True:
                completed = await counter.completed()
                if completed >= jobs:
                    break
                if enqueue.done() and enqueue.exception() is not None:
                    raise enqueue.exception()  # type: ignore[misc]
                for worker in workers:
                    if not worker.running():
                        raise ProcessFailed(f"{worker.name} exited:\n{worker.log_tail()}")
                elapsed = time.perf_counter() - started
                if elapsed > timeout_s:
                    raise TimeoutError(
                        f"{system.name}: {completed}/{jobs} completed after {elapsed:.0f} s"
                    )
                enforce_deadlines()
                await asyncio.sleep(POLL_INTERVAL_S)
            elapsed = time.perf_counter() - started
            await enqueue
        finally:
            await counter.close()
    finally:
        stop_all(workers)
        close = getattr(system, "close", None)
        if close is not None:
            await close()
    return jobs / elapsed


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    jobs = sizes.throughput_jobs
    small = sizes.procrastinate_jobs
    cases: list[tuple[str, QueueSystem, int, int]] = []  # (key, system, processes, jobs)
    for processes in (1, 2):
        cases.append((f"ours/{processes}", WorkflowJobsSystem(
            config.server, worker_concurrency=sizes.worker_concurrency), processes, jobs))
        for batch in (100, 10):
            cases.append((f"pgq{batch}/{processes}", PgQueuerSystem(config.server, batch),
                          processes, jobs))
        cases.append((f"proc/{processes}", ProcrastinateSystem(config.server), processes, small))

    samples: dict[str, list[float]] = {key: [] for key, *_ in cases}
    errors: dict[str, str] = {}
    for run_index in range(config.runs):
        for key, system, processes, n in cases:
            if key in errors:
                continue
            try:
                rate = await measure_once(system, processes=processes, jobs=n,
                                          batch=sizes.enqueue_batch,
                                          timeout_s=max(120.0, n / 100))
            except Exception as exc:  # reported in the table; the bench goes on
                errors[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                print(f"  throughput {key}: {errors[key]}", flush=True)
                continue
            samples[key].append(rate)
            print(f"  throughput run {run_index + 1} {key}: {rate:,.0f} jobs/s", flush=True)

    def note(*keys: str, extra: str = "") -> str:
        parts = [f"{k} failed: {errors[k]}" for k in keys if k in errors]
        if extra:
            parts.insert(0, extra)
        return "; ".join(parts)

    rows = []
    for processes in (1, 2):
        label = f"end-to-end throughput, {jobs // 1000}k jobs, {processes} worker process" + (
            "es" if processes > 1 else "")
        for batch in (100, 10):
            target = None
            if processes == 2 and batch == 100:
                target = Target.ratio_at_least(1.0, "≥ PgQueuer (ratio ≥ 1)")
            rows.append(Row(
                figure=label, unit="jobs/s",
                ours=samples[f"ours/{processes}"],
                comparison=samples[f"pgq{batch}/{processes}"],
                comparison_name=f"PgQueuer batch {batch}",
                target=target,
                note=note(f"ours/{processes}", f"pgq{batch}/{processes}"),
            ))
        rows.append(Row(
            figure=label, unit="jobs/s",
            ours=samples[f"ours/{processes}"],
            comparison=samples[f"proc/{processes}"],
            comparison_name="Procrastinate",
            note=note(f"ours/{processes}", f"proc/{processes}",
                      extra=f"Procrastinate ran {small:,} jobs (rate is what counts)"),
        ))
    return rows
