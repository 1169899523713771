"""Figure 2: enqueue→handler-start latency at a steady offered load.

Open-loop load: job k is sent at t0 + k / rate whatever happened to earlier
sends (each send is its own task), one job per call (`Enqueue` for
workflow-jobs, a single-row `enqueue` for PgQueuer), so slow answers cannot
lower the offered rate. Each payload carries the wall-clock time just before
its send; the handler records its own start time (`bench.recording`). Latency
= start − stamp, so it includes the enqueue call itself, the commit, the
wake-up, acquisition, delivery to the worker and dispatch to the handler.
Both systems run two worker processes; PgQueuer with its default batch size (10).

CPU per job (`bench.cpu`) is read over each measured run, from the first send
to the last handler start: the coordinator, the worker processes, the
PostgreSQL client backends of the run's database and the load driver (this
bench process, which makes the sends), each divided by the jobs sent. The
total beside PgQueuer's is coordinator + workers + backends (the driver's
cost is the client's, not the queue's).

When py-spy can attach, one more run of ours is profiled (`bench.profiling`)
and its summary, grouped by layer, goes under the table; its latency is not
quoted.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import grpc
from pgqueuer import AsyncpgPoolDriver, Queries

from bench import anatomy, grpc_floor, profiling, statements, wfjobs
from bench.config import BenchConfig
from bench.cpu import BACKENDS, CpuMeter, per_job_us
from bench.database import PostgresServer
from bench.pgqueuer_peer import ENTRYPOINT, PgQueuerSystem
from bench.processes import LOG_DIR, ManagedProcess, ProcessFailed, stop_all
from bench.recording import count_records, payload_with_stamp, read_records
from bench.results import Row, Target, add_section
from workflowjobs.v1 import scheduler_service_pb2, scheduler_service_pb2_grpc

WORKER_PROCESSES = 2
DRAIN_TIMEOUT_S = 30.0
STAGE_ENV = "WFJOBS_STAGE_LOG"
CPU_SAMPLE_INTERVAL_S = 0.25  # how often the run's backends are listed again
COORDINATOR = "coordinator"
WORKERS = "worker processes"
DRIVER = "load driver"
TOTAL = "total (coordinator + workers + PostgreSQL)"
CPU_LABELS = (COORDINATOR, WORKERS, BACKENDS, DRIVER, TOTAL)


class CpuWindow:
    """CPU of a latency run's processes from the first send to the last start.

    Args:
        server: The bench PostgreSQL.
        database: The run's database (its client backends are measured).
        processes: Label → pids; the load driver (this process) is added.
    """

    def __init__(
        self, server: PostgresServer, database: str, processes: dict[str, list[int]]
    ) -> None:
        self.meter = CpuMeter(
            server, database, {**processes, DRIVER: [os.getpid()]}, alone=frozenset({DRIVER})
        )
        self._sampler: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.meter.start()
        self._sampler = asyncio.create_task(self._sample())

    async def _sample(self) -> None:
        while True:
            await asyncio.sleep(CPU_SAMPLE_INTERVAL_S)
            await self.meter.sample()

    async def stop(self, jobs: int) -> dict[str, float]:
        """CPU µs per job by label, with the total of coordinator, workers and backends."""
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
        cpu = per_job_us(await self.meter.stop(), max(jobs, 1))
        cpu[TOTAL] = cpu.get(COORDINATOR, 0.0) + cpu[WORKERS] + cpu[BACKENDS]
        return cpu

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
        await self.meter.close()


def render_cpu(runs: list[dict[str, float]], title: str) -> str:
    """The CPU-per-process table of one run's processes (µs per job, share of a core)."""
    if not runs:
        return ""
    lines = [f"  {title}:"]
    for label in CPU_LABELS:
        values = sorted(r[label] for r in runs if label in r)
        if values:
            lines.append(f"    {label:<45} {values[len(values) // 2]:8.0f} µs/job")
    return "\n".join(lines)


async def offer_load(
    send: Callable[[bytes], Awaitable[object]], rate: int, seconds: float
) -> tuple[int, float, int]:
    """Send `rate × seconds` jobs on an open-loop schedule.

    Returns (jobs sent, achieved send rate, failed sends).
    """
    total = int(rate * seconds)
    interval = 1.0 / rate
    pending: set[asyncio.Task[object]] = set()
    failures = 0

    def finished(task: asyncio.Task[object]) -> None:
        nonlocal failures
        pending.discard(task)
        if task.cancelled() or task.exception() is not None:  # retrieved: counted here
            failures += 1

    started = time.perf_counter()
    for k in range(total):
        delay = started + k * interval - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(send(payload_with_stamp()))
        pending.add(task)
        task.add_done_callback(finished)
    finished_sending = time.perf_counter()
    await asyncio.gather(*pending, return_exceptions=True)
    return total, total / max(finished_sending - started, 1e-9), failures


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        raise ValueError("no samples")
    rank = max(1, min(len(sorted_values), round(fraction * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


async def wait_for_records(
    paths: list[Path], expected: int, workers: list[ManagedProcess], timeout_s: float
) -> int:
    end = time.monotonic() + timeout_s
    seen = 0
    while time.monotonic() < end:
        seen = count_records(paths)
        if seen >= expected:
            return seen
        for worker in workers:
            if not worker.running():
                raise ProcessFailed(f"{worker.name} exited:\n{worker.log_tail()}")
        await asyncio.sleep(0.1)
    return seen


def latencies_ms(paths: list[Path]) -> list[float]:
    return sorted((r.start_ns - r.enqueued_ns) / 1e6 for r in read_records(paths) if r.enqueued_ns)


async def measure_ours(
    server: PostgresServer,
    rate: int,
    seconds: float,
    concurrency: int,
    coordinators: int = 1,
    anatomy_runs: list[dict[str, tuple[float, float, int]]] | None = None,
    statements_title: str | None = None,
) -> tuple[list[float], str, dict[str, float]]:
    """Our latency run: latencies, a note and CPU µs per job by process.

    With several coordinators, worker process i connects to
    coordinator i mod n and the sends go to the coordinators in turn.

    With `anatomy_runs`, the coordinator and workers log their stages
    (`WFJOBS_STAGE_LOG`) and the run's step percentiles are appended to it.
    With `statements_title`, the run's per-statement cost goes under the table.
    """
    record = LOG_DIR / f"latency-ours-{time.monotonic_ns()}"
    stage_prefix = Path(f"{record}-stages")
    clock = anatomy.StageClock() if anatomy_runs is not None else None
    if clock is not None:
        os.environ[STAGE_ENV] = str(stage_prefix)
    try:
        started = wfjobs.start_coordinators(server, coordinators, deadline_s=seconds + 600)
    except BaseException:
        os.environ.pop(STAGE_ENV, None)
        raise
    paths = [Path(f"{record}.{i}") for i in range(WORKER_PROCESSES)]
    workers: list[ManagedProcess] = []
    channels = [grpc.aio.insecure_channel(c.target) for c in started]
    try:
        for i in range(WORKER_PROCESSES):
            workers += wfjobs.start_workers(
                started[i % coordinators].target,
                1,
                concurrency=concurrency,
                deadline_s=seconds + 180,
                record=str(record),
                first_index=i,
            )
        os.environ.pop(STAGE_ENV, None)
        for index, coordinator in enumerate(started):
            await wfjobs.wait_connected(
                coordinator.target, len(range(index, WORKER_PROCESSES, coordinators)), workers
            )
        stubs = [scheduler_service_pb2_grpc.JobSchedulerServiceStub(c) for c in channels]
        turn = itertools.count()

        async def send(payload: bytes) -> object:
            spec = wfjobs.job_spec(data=payload)
            stub = stubs[next(turn) % len(stubs)]
            sent = time.time_ns()
            answer = await stub.Enqueue(scheduler_service_pb2.EnqueueRequest(job=spec), timeout=30)
            if clock is not None:
                clock.note(answer.job.id, sent)
            return answer

        if statements_title is not None:
            statements.reset(server)
        window = CpuWindow(
            server,
            wfjobs.DATABASE,
            {COORDINATOR: [c.pid for c in started], WORKERS: [w.pid for w in workers]},
        )
        try:
            await window.start()
            total, achieved, failed = await offer_load(send, rate, seconds)
            seen = await wait_for_records(paths, total - failed, workers, DRAIN_TIMEOUT_S)
            cpu = await window.stop(total)
        finally:
            await window.close()
        if statements_title is not None:
            add_section(
                statements.render(
                    statements_title, statements.top(server, wfjobs.DATABASE), jobs=total
                )
            )
        if clock is not None:
            await asyncio.sleep(3 * anatomy.FLUSH_WAIT_S)  # the stage logs' last writes
    finally:
        os.environ.pop(STAGE_ENV, None)
        for channel in channels:
            await channel.close()
        stop_all(workers)
        wfjobs.stop_coordinators(started)
    direct = wfjobs.dispatch_counts(started)
    if clock is not None and anatomy_runs is not None:
        jobs = anatomy.merge(clock, anatomy.read_stage_files(stage_prefix), read_records(paths))
        anatomy_runs.append(anatomy.step_percentiles(jobs))
    note = _note(total, achieved, failed, seen)
    if direct is not None:
        note += f"; {direct[0]:,} leased at insert, {direct[1]:,} by {direct[2]:,} passes"
    print(f"  latency ours: {note}", flush=True)
    return latencies_ms(paths), note, cpu


async def measure_pgqueuer(
    server: PostgresServer, rate: int, seconds: float
) -> tuple[list[float], str, dict[str, float]]:
    system = PgQueuerSystem(server, batch_size=10)
    await system.prepare()
    record = LOG_DIR / f"latency-pgqueuer-{time.monotonic_ns()}"
    paths = [Path(f"{record}.{i}") for i in range(WORKER_PROCESSES)]
    workers: list[ManagedProcess] = []
    try:
        workers = system.start_workers(WORKER_PROCESSES, seconds + 180, record=str(record))
        await system.wait_ready(workers, 60)
        await asyncio.sleep(1.0)  # READY is printed just before the dequeue loop starts
        pool = await asyncpg.create_pool(system.dsn, min_size=4, max_size=8)
        try:
            queries = Queries(AsyncpgPoolDriver(pool))

            async def send(payload: bytes) -> object:
                return await queries.enqueue(ENTRYPOINT, payload)

            window = CpuWindow(server, system.database, {WORKERS: [w.pid for w in workers]})
            try:
                await window.start()
                total, achieved, failed = await offer_load(send, rate, seconds)
                seen = await wait_for_records(paths, total - failed, workers, DRAIN_TIMEOUT_S)
                cpu = await window.stop(total)
            finally:
                await window.close()
        finally:
            await pool.close()
    finally:
        stop_all(workers)
    return latencies_ms(paths), _note(total, achieved, failed, seen), cpu


def _note(total: int, achieved: float, failed: int, seen: int) -> str:
    note = f"sent {total} at {achieved:.0f}/s"
    if failed:
        note += f", {failed} sends failed"
    if seen < total - failed:
        note += f", only {seen} started within {DRAIN_TIMEOUT_S:.0f} s"
    return note


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    ours: dict[str, list[float]] = {"p50": [], "p95": [], "p99": []}
    peer: dict[str, list[float]] = {"p50": [], "p95": [], "p99": []}
    cpu: dict[str, list[dict[str, float]]] = {"ours": [], "PgQueuer": []}
    notes: dict[str, str] = {}
    anatomy_runs: list[dict[str, tuple[float, float, int]]] = []
    floor: list[float] = []
    for run_index in range(config.runs):
        last = run_index == config.runs - 1
        statements_title = (
            f"Per-statement cost: latency at {sizes.latency_rate} jobs/s, "
            f"workflow-jobs (run {run_index + 1})"
            if last
            else None
        )
        try:
            await measure_ours(
                config.server,
                sizes.latency_rate,
                sizes.latency_seconds,
                sizes.worker_concurrency,
                anatomy_runs=anatomy_runs,
            )
        except Exception as exc:  # the anatomy is a section; its failure is printed
            print(f"  latency anatomy run failed: {type(exc).__name__}: {exc}", flush=True)
        for who, measure, into in (
            (
                "ours",
                lambda: measure_ours(
                    config.server,
                    sizes.latency_rate,
                    sizes.latency_seconds,
                    sizes.worker_concurrency,
                    statements_title=statements_title,  # noqa: B023 - awaited at once
                ),
                ours,
            ),
            (
                "PgQueuer",
                lambda: measure_pgqueuer(config.server, sizes.latency_rate, sizes.latency_seconds),
                peer,
            ),
        ):
            try:
                samples, note, used = await measure()
            except Exception as exc:  # reported in the table
                notes[who] = f"{who} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                print(f"  latency {notes[who]}", flush=True)
                continue
            notes.setdefault(who, note)
            cpu[who].append(used)
            if not samples:
                continue
            for name, fraction in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
                into[name].append(percentile(samples, fraction))
            print(
                f"  latency run {run_index + 1} {who}: p50 {percentile(samples, 0.5):.1f} ms, "
                f"p99 {percentile(samples, 0.99):.1f} ms ({note})",
                flush=True,
            )
            print(render_cpu([used], f"CPU per job, run {run_index + 1} {who}"), flush=True)
        try:
            floor.append(
                await grpc_floor.cpu_per_call_us(
                    sizes.latency_rate, min(sizes.latency_seconds, FLOOR_SECONDS)
                )
            )
            print(f"  bare grpc.aio unary call: {floor[-1]:.0f} µs of server CPU", flush=True)
        except Exception as exc:  # the row is then left without its baseline
            print(f"  bare grpc.aio probe failed: {type(exc).__name__}: {exc}", flush=True)

    label = f"enqueue→handler-start latency at {sizes.latency_rate} jobs/s for {sizes.latency_seconds:.0f} s"
    add_section(
        anatomy.render(
            anatomy_runs,
            f"Latency anatomy: {label}, workflow-jobs, each step of a job "
            f"({len(anatomy_runs)} instrumented run(s) beside the measured ones)",
        )
    )
    await profile_ours(config, f"enqueue→handler-start latency at {sizes.latency_rate} jobs/s")
    targets = {
        "p50": Target.at_most(5.0, "≤ 5 ms"),
        "p95": None,
        "p99": Target.at_most(25.0, "≤ 25 ms"),
    }
    note = "; ".join(f"{k}: {v}" for k, v in notes.items())
    rows = [
        Row(
            figure=f"{label}, {name}",
            unit="ms",
            ours=ours[name],
            comparison=peer[name],
            comparison_name="PgQueuer batch 10",
            target=targets[name],
            note=note if name == "p50" else "",
            higher_is_better=False,
        )
        for name in ("p50", "p95", "p99")
    ]
    floor_row = Row(
        figure=f"{label}: CPU per job, coordinator, beside one bare grpc.aio unary call",
        unit="µs",
        ours=[run[COORDINATOR] for run in cpu["ours"] if COORDINATOR in run],
        comparison=floor,
        comparison_name=f"a bare grpc.aio Health.Check server, CPU per call at {sizes.latency_rate}/s",
        higher_is_better=False,
        note=(
            "the floor: a server with only the health service, no interceptor, no "
            "database (bench/grpc_floor.py); a job costs the coordinator one unary Enqueue "
            "and three stream messages"
        ),
    )
    return rows + cpu_rows(label, cpu["ours"], cpu["PgQueuer"]) + [floor_row]


# Seconds of load offered to the bare grpc.aio server (at most the latency run's).
FLOOR_SECONDS = 10.0

CPU_TARGETS = {
    COORDINATOR: Target.at_most(300.0, "≤ 300 µs"),
    TOTAL: Target.ratio_at_most(1.0, "≤ PgQueuer batch 10 (ratio ≤ 1)"),
}


def cpu_rows(label: str, ours: list[dict[str, float]], peer: list[dict[str, float]]) -> list[Row]:
    """One row per process group: CPU µs per job over the measured runs."""
    rows = []
    for index, what in enumerate(CPU_LABELS):
        peer_has = what != COORDINATOR
        rows.append(
            Row(
                figure=f"{label}: CPU per job, {what}",
                unit="µs",
                ours=[run[what] for run in ours if what in run],
                comparison=[run[what] for run in peer if what in run] if peer_has else [],
                comparison_name="PgQueuer batch 10" if peer_has else "",
                target=CPU_TARGETS.get(what),
                higher_is_better=False,
                note=(
                    "process CPU (user + system) from the first send to the last handler "
                    "start ÷ jobs sent; PostgreSQL: client backends of the run's database; "
                    "load driver: the bench process making the sends"
                    if index == 0
                    else ""
                ),
            )
        )
    return rows


async def profile_ours(config: BenchConfig, label: str) -> None:
    """One more run of ours with py-spy on the coordinator; its summary goes under the table.

    Skipped when py-spy is missing, and when every run is profiled already
    (`--profile`: the files are in that directory).
    """
    if profiling.profile_dir() is not None or profiling.py_spy() is None:
        return
    sizes = config.sizes
    directory = LOG_DIR / f"latency-profile-{time.monotonic_ns()}"
    os.environ[profiling.ENV] = str(directory)
    try:
        await measure_ours(
            config.server, sizes.latency_rate, sizes.latency_seconds, sizes.worker_concurrency
        )
    except Exception as exc:  # the profile is a section; its failure is printed
        print(f"  latency profile run failed: {type(exc).__name__}: {exc}", flush=True)
        return
    finally:
        os.environ.pop(profiling.ENV, None)
    files = sorted(directory.glob("coordinator-*.txt"))
    add_section(
        profiling.render_grouped(
            files, f"Coordinator profile: {label}, workflow-jobs (py-spy, one extra run)"
        )
    )
