"""Figure: the cost of the job event log, with a watcher receiving every event.

Both cases are the throughput figure's run (`bench.throughput.measure_once`:
N no-op jobs enqueued in batches while two worker processes run them; every
job writes ENQUEUED, STARTED and COMPLETED to the log in any case). In the
watched case a `WatchJobEvents` stream with an empty filter is opened from
the bench process once the workers are ready (it starts at the live tail) and
receives every event while the jobs run; the baseline is the same run with no
watcher, and runs of the two cases are interleaved.

Reported: throughput watched ÷ unwatched; the delivery lag of the watched
events, from the event's `time` (the state change's timestamp, taken by the
statement that commits it, on the database's clock) to the moment the bench
process receives it, p50 and p99 over every event; CPU per job of the
coordinator and of the PostgreSQL backends, watched beside unwatched (the
difference is what serving the watcher costs); and the log's size per job
(`pg_total_relation_size` of `wfj_job_events` after the run ÷ N: what the
log writes per job, heap and index). The watcher must receive all 3N events
within 60 s of the last completion, or the run fails.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import grpc

from bench import latency
from bench.config import BenchConfig
from bench.cpu import BACKENDS
from bench.processes import ManagedProcess
from bench.results import Row, Target
from bench.throughput import COORDINATOR, TOTAL, measure_once
from bench.wfjobs import DATABASE, WorkflowJobsSystem
from workflowjobs.v1 import scheduler_service_pb2, scheduler_service_pb2_grpc

WORKER_PROCESSES = 2
EVENTS_PER_JOB = 3  # ENQUEUED, STARTED, COMPLETED
CATCH_UP_S = 60.0
WATCHED, UNWATCHED = "watched", "unwatched"


class Watcher:
    """One WatchJobEvents stream from the live tail, noting each event's lag."""

    def __init__(self, target: str) -> None:
        self._channel = grpc.aio.insecure_channel(target)
        self._task: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self.received = 0
        self.lags_ms: list[float] = []

    async def start(self, timeout_s: float = 30.0) -> None:
        self._task = asyncio.create_task(self._read())
        waiter = asyncio.create_task(self._started.wait())
        done, _ = await asyncio.wait({waiter, self._task}, timeout=timeout_s,
                                     return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            self._task.result()  # raises what ended the stream
        if waiter not in done:
            waiter.cancel()
            raise TimeoutError("WatchJobEvents sent no first response")

    async def _read(self) -> None:
        stub = scheduler_service_pb2_grpc.JobSchedulerServiceStub(self._channel)
        request = scheduler_service_pb2.WatchJobEventsRequest()
        async for response in stub.WatchJobEvents(request):
            now_us = time.time_ns() // 1000
            self._started.set()
            for event in response.events:
                self.lags_ms.append((now_us - event.time.ToMicroseconds()) / 1000)
            self.received += len(response.events)

    async def wait_for(self, count: int, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while self.received < count:
            if time.monotonic() > end or self._task is None or self._task.done():
                return False
            await asyncio.sleep(0.02)
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, grpc.aio.AioRpcError):
                pass
        await self._channel.close()


class WatchedSystem(WorkflowJobsSystem):
    """workflow-jobs for the throughput run, with a watcher attached (or not) once ready."""

    def __init__(self, config: BenchConfig, jobs: int, *, watched: bool) -> None:
        super().__init__(config.server, worker_concurrency=config.sizes.worker_concurrency)
        self.jobs = jobs
        self.watched = watched
        self.watcher: Watcher | None = None
        self.lags_ms: list[float] = []
        self.log_bytes = 0
        self.failure = ""

    async def wait_ready(self, workers: list[ManagedProcess], timeout_s: float) -> None:
        await super().wait_ready(workers, timeout_s)
        if self.watched:
            self.watcher = Watcher(self.coordinators[0].target)
            await self.watcher.start()

    async def close(self) -> None:
        try:
            if self.watcher is not None:
                expected = self.jobs * EVENTS_PER_JOB
                if not await self.watcher.wait_for(expected, CATCH_UP_S):
                    self.failure = (f"the watcher received {self.watcher.received:,} of "
                                    f"{expected:,} events")
                self.lags_ms = self.watcher.lags_ms
                await self.watcher.stop()
                self.watcher = None
            if self.coordinators:
                size = self.server.scalar(
                    DATABASE, "SELECT pg_total_relation_size('wfj_job_events')")
                self.log_bytes = int(size) if isinstance(size, int) else 0
        finally:
            await super().close()


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"


async def _run(config: BenchConfig) -> list[Row]:
    jobs = config.sizes.throughput_jobs
    rate: dict[str, list[float]] = {WATCHED: [], UNWATCHED: []}
    cpu: dict[str, list[dict[str, float]]] = {WATCHED: [], UNWATCHED: []}
    log_bytes: list[float] = []
    lag: dict[str, list[float]] = {"p50": [], "p99": []}
    errors: list[str] = []
    for run_index in range(config.runs):
        for case in (WATCHED, UNWATCHED):
            system = WatchedSystem(config, jobs, watched=case == WATCHED)
            try:
                measured = await measure_once(
                    system, processes=WORKER_PROCESSES, jobs=jobs,
                    batch=config.sizes.enqueue_batch, timeout_s=max(120.0, jobs / 100))
            except Exception as exc:  # reported in the table
                errors.append(f"{case}: {_error(exc)}")
                print(f"  events {case} failed: {_error(exc)}", flush=True)
                continue
            if system.failure:
                errors.append(f"{case}: {system.failure}")
                print(f"  events {case}: {system.failure}", flush=True)
                continue
            rate[case].append(measured.rate)
            cpu[case].append(measured.cpu_us)
            if system.log_bytes:
                log_bytes.append(system.log_bytes / jobs)
            line = (f"  events run {run_index + 1} {case}: {measured.rate:,.0f} jobs/s, CPU µs/job "
                    f"coordinator {measured.cpu_us[COORDINATOR]:.0f}, "
                    f"backends {measured.cpu_us[BACKENDS]:.0f}")
            if system.lags_ms:
                lags = sorted(system.lags_ms)
                lag["p50"].append(latency.percentile(lags, 0.50))
                lag["p99"].append(latency.percentile(lags, 0.99))
                line += f"; lag p50 {lag['p50'][-1]:.1f} ms, p99 {lag['p99'][-1]:.1f} ms"
            print(line, flush=True)
    return _rows(jobs, rate, cpu, lag, log_bytes, errors)


def _rows(jobs: int, rate: dict[str, list[float]], cpu: dict[str, list[dict[str, float]]],
          lag: dict[str, list[float]], log_bytes: Sequence[float], errors: list[str]) -> list[Row]:
    head = (f"job event log, {jobs // 1000}k jobs, {WORKER_PROCESSES} worker processes, "
            "a WatchJobEvents watcher receiving every event")
    baseline = "no watcher"
    target = Target.reported("reported")
    rows = [Row(figure=f"{head}: throughput", unit="jobs/s", ours=rate[WATCHED],
                comparison=rate[UNWATCHED], comparison_name=baseline, target=target,
                note="; ".join(["ratio = watched ÷ unwatched", *errors]))]
    for name in ("p50", "p99"):
        rows.append(Row(figure=f"{head}: delivery lag (state change → watcher receives), {name}",
                        unit="ms", ours=lag[name], target=target if name == "p99" else None,
                        higher_is_better=False))
    for what in (COORDINATOR, BACKENDS, TOTAL):
        rows.append(Row(figure=f"{head}: CPU per job, {what}", unit="µs",
                        ours=[c[what] for c in cpu[WATCHED]],
                        comparison=[c[what] for c in cpu[UNWATCHED]],
                        comparison_name=baseline, higher_is_better=False))
    rows.append(Row(figure="job event log: size per job (heap + index, 3 events)", unit="B",
                    ours=list(log_bytes), higher_is_better=False,
                    note="pg_total_relation_size(wfj_job_events) after the run ÷ jobs"))
    return rows
