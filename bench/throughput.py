"""Figure 1: end-to-end throughput, workflow-jobs beside PgQueuer and Procrastinate.

Each system gets the same shape of run: its worker processes are started
and ready (idle, connected); the clock starts; N no-op jobs are enqueued in
batches of 1,000 while the workers already run them; the clock stops when
the database counts N completed jobs (polled every 50 ms). Rate = N ÷ time,
so it includes enqueueing, acquisition, the handler call and recording the
outcome. Runs of the systems are interleaved so machine noise spreads evenly.

CPU per job (`bench.cpu`) is read over the same window, from the clock's
start to the last completion: each coordinator, each worker process and the
PostgreSQL client backends of the run's database, each divided by all N jobs
(so the rows add up to the total). It is shown for workflow-jobs beside
PgQueuer batch 100 (worker processes + backends; it has no coordinator).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol

from bench import statements
from bench.config import BenchConfig
from bench.cpu import BACKENDS, CpuMeter, per_job_us
from bench.database import PostgresServer
from bench.pgqueuer_peer import PgQueuerSystem
from bench.processes import ManagedProcess, ProcessFailed, enforce_deadlines, stop_all
from bench.procrastinate_peer import ProcrastinateSystem
from bench.results import Row, Target, add_section
from bench.wfjobs import WorkflowJobsSystem

POLL_INTERVAL_S = 0.05
CPU_SAMPLE_INTERVAL_S = 0.25  # how often the backends of the run are listed again
COORDINATOR = "coordinator"
WORKERS = "worker processes"
TOTAL = "total"


class CompletionCounter(Protocol):
    async def completed(self) -> int: ...
    async def close(self) -> None: ...


class QueueSystem(Protocol):
    """What the throughput figure needs from a queue under test."""

    name: str
    server: PostgresServer
    database: str

    async def prepare(self) -> None:
        """Fresh database and schema (and, for workflow-jobs, a running coordinator)."""

    def start_workers(self, processes: int, deadline_s: float) -> list[ManagedProcess]: ...

    async def wait_ready(self, workers: list[ManagedProcess], timeout_s: float) -> None: ...

    async def enqueue(self, jobs: int, batch: int) -> None: ...

    async def open_counter(self) -> CompletionCounter: ...


@dataclass
class Measurement:
    """One throughput run.

    Attributes:
        rate: Jobs/s from the first enqueue to the last completion.
        cpu_us: CPU µs per job by process label: `COORDINATOR` (all coordinators),
            "worker process i", `WORKERS` (all of them), `BACKENDS` and `TOTAL`.
    """

    rate: float
    cpu_us: dict[str, float] = field(default_factory=dict)


def worker_label(index: int) -> str:
    return f"worker process {index + 1}"


async def measure_once(
    system: QueueSystem,
    *,
    processes: int,
    jobs: int,
    batch: int,
    timeout_s: float,
    statements_title: str | None = None,
) -> Measurement:
    """One run: jobs/s from the first enqueue to the last completion, and CPU per job.

    With `statements_title`, the database's per-statement cost over the window
    is added under the table (`bench.statements`) with that title.
    """
    await system.prepare()
    workers: list[ManagedProcess] = []
    try:
        workers = system.start_workers(processes, deadline_s=timeout_s + 120)
        await system.wait_ready(workers, timeout_s=60)
        counter = await system.open_counter()
        coordinator_pids = getattr(system, "coordinator_pids", list)()
        labelled = {worker_label(i): [w.pid] for i, w in enumerate(workers)}
        if coordinator_pids:
            labelled[COORDINATOR] = coordinator_pids
        meter = CpuMeter(system.server, system.database, labelled)
        try:
            if statements_title is not None:
                statements.reset(system.server)
            await meter.start()
            started = time.perf_counter()
            next_sample = started + CPU_SAMPLE_INTERVAL_S
            enqueue = asyncio.create_task(system.enqueue(jobs, batch))
            while True:
                completed = await counter.completed()
                if completed >= jobs:
                    break
                if time.perf_counter() >= next_sample:
                    await meter.sample()
                    next_sample = time.perf_counter() + CPU_SAMPLE_INTERVAL_S
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
            used = await meter.stop()
            await enqueue
            if statements_title is not None:
                add_section(
                    statements.render(
                        statements_title, statements.top(system.server, system.database), jobs=jobs
                    )
                )
        finally:
            await meter.close()
            await counter.close()
    finally:
        stop_all(workers)
        close = getattr(system, "close", None)
        if close is not None:
            await close()
    cpu = per_job_us(used, jobs)
    cpu[WORKERS] = sum(cpu[worker_label(i)] for i in range(len(workers)))
    cpu[TOTAL] = cpu[WORKERS] + cpu[BACKENDS] + cpu.get(COORDINATOR, 0.0)
    return Measurement(rate=jobs / elapsed, cpu_us=cpu)


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    jobs = sizes.throughput_jobs
    small = sizes.procrastinate_jobs
    cases: list[tuple[str, QueueSystem, int, int]] = []  # (key, system, processes, jobs)
    for processes in (1, 2):
        cases.append(
            (
                f"ours/{processes}",
                WorkflowJobsSystem(config.server, worker_concurrency=sizes.worker_concurrency),
                processes,
                jobs,
            )
        )
        for batch in (100, 10):
            cases.append(
                (f"pgq{batch}/{processes}", PgQueuerSystem(config.server, batch), processes, jobs)
            )
        cases.append((f"proc/{processes}", ProcrastinateSystem(config.server), processes, small))

    samples: dict[str, list[float]] = {key: [] for key, *_ in cases}
    cpu: dict[str, list[dict[str, float]]] = {key: [] for key, *_ in cases}
    errors: dict[str, str] = {}
    for run_index in range(config.runs):
        for key, system, processes, n in cases:
            if key in errors:
                continue
            title = None
            if run_index == config.runs - 1 and key in ("ours/2", "pgq100/2"):
                title = (
                    f"Per-statement cost: throughput, {n // 1000}k jobs, 2 worker processes, "
                    f"{system.name} (run {run_index + 1})"
                )
            try:
                measured = await measure_once(
                    system,
                    processes=processes,
                    jobs=n,
                    batch=sizes.enqueue_batch,
                    timeout_s=max(120.0, n / 100),
                    statements_title=title,
                )
            except Exception as exc:  # reported in the table; the bench goes on
                errors[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                print(f"  throughput {key}: {errors[key]}", flush=True)
                continue
            samples[key].append(measured.rate)
            cpu[key].append(measured.cpu_us)
            print(
                f"  throughput run {run_index + 1} {key}: {measured.rate:,.0f} jobs/s; CPU µs/job "
                + ", ".join(f"{k} {v:.0f}" for k, v in measured.cpu_us.items()),
                flush=True,
            )

    def note(*keys: str, extra: str = "") -> str:
        parts = [f"{k} failed: {errors[k]}" for k in keys if k in errors]
        if extra:
            parts.insert(0, extra)
        return "; ".join(parts)

    rows = []
    for processes in (1, 2):
        label = f"end-to-end throughput, {jobs // 1000}k jobs, {processes} worker process" + (
            "es" if processes > 1 else ""
        )
        for batch in (100, 10):
            target = None
            if processes == 2 and batch == 100:
                target = Target.ratio_at_least(1.0, "≥ PgQueuer (ratio ≥ 1)")
            rows.append(
                Row(
                    figure=label,
                    unit="jobs/s",
                    ours=samples[f"ours/{processes}"],
                    comparison=samples[f"pgq{batch}/{processes}"],
                    comparison_name=f"PgQueuer batch {batch}",
                    target=target,
                    note=note(f"ours/{processes}", f"pgq{batch}/{processes}"),
                )
            )
        rows.append(
            Row(
                figure=label,
                unit="jobs/s",
                ours=samples[f"ours/{processes}"],
                comparison=samples[f"proc/{processes}"],
                comparison_name="Procrastinate",
                note=note(
                    f"ours/{processes}",
                    f"proc/{processes}",
                    extra=f"Procrastinate ran {small:,} jobs (rate is what counts)",
                ),
            )
        )
        rows += cpu_rows(
            label,
            processes,
            cpu[f"ours/{processes}"],
            cpu[f"pgq100/{processes}"],
            note=note(f"ours/{processes}", f"pgq100/{processes}"),
        )
    return rows


CPU_TARGETS = {
    COORDINATOR: Target.at_most(25.0, "≤ 25 µs"),
    WORKERS: Target.at_most(25.0, "≤ 25 µs"),
    TOTAL: Target.at_most(100.0, "≤ 100 µs"),
}


def cpu_rows(
    label: str,
    processes: int,
    ours: list[dict[str, float]],
    peer: list[dict[str, float]],
    *,
    note: str = "",
    peer_name: str = "PgQueuer batch 100",
) -> list[Row]:
    """CPU per job rows of one throughput case: each process, the groups, the total."""
    labels = [COORDINATOR]
    if processes > 1:
        labels += [worker_label(i) for i in range(processes)]
    labels += [WORKERS, BACKENDS, TOTAL]
    first_note = "; ".join(
        filter(
            None,
            [
                "process CPU (user + system) over the run ÷ all jobs; PostgreSQL: client backends "
                "of the run's database",
                note,
            ],
        )
    )
    rows = []
    for index, what in enumerate(labels):
        peer_has = what != COORDINATOR
        rows.append(
            Row(
                figure=f"{label}: CPU per job, {what}",
                unit="µs",
                ours=[run[what] for run in ours if what in run],
                comparison=[run[what] for run in peer if what in run] if peer_has else [],
                comparison_name=peer_name if peer_has else "",
                target=CPU_TARGETS.get(what),
                higher_is_better=False,
                note=first_note if index == 0 else "",
            )
        )
    return rows
