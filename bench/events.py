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
import statistics
import time
from collections.abc import Sequence

import grpc

from bench import latency
from bench.config import BenchConfig
from bench.cpu import BACKENDS
from bench.processes import ManagedProcess
from bench.results import Row, Target
from bench.throughput import COORDINATOR, TOTAL, measure_once
from bench.wfjobs import DATABASE, WorkflowJobsSystem, job_spec
from workflowjobs.v1 import scheduler_service_pb2, scheduler_service_pb2_grpc

WORKER_PROCESSES = 2
EVENTS_PER_JOB = 3  # ENQUEUED, STARTED, COMPLETED
CATCH_UP_S = 60.0
WATCHED, UNWATCHED, PACED = "watched", "unwatched", "paced"
TENANTS_NONE, TENANTS_WATCHED = "tenants unwatched", "tenants watched"
# Unwatched first: the paced case runs at half the unwatched rate measured so far.
CASES = (UNWATCHED, WATCHED, PACED, TENANTS_NONE, TENANTS_WATCHED)
TENANTS = 100
PACED_SECONDS = 10.0
PACED_BATCH = 100


class Watcher:
    """One WatchJobEvents stream from the live tail, noting each event's lag."""

    def __init__(
        self, target: str, tenant: str = "", channel: grpc.aio.Channel | None = None
    ) -> None:
        self._own_channel = channel is None
        self._channel = channel or grpc.aio.insecure_channel(target)
        self._tenant = tenant
        self._task: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self.received = 0
        self.lags_ms: list[float] = []

    async def start(self, timeout_s: float = 30.0) -> None:
        self._task = asyncio.create_task(self._read())
        waiter = asyncio.create_task(self._started.wait())
        done, _ = await asyncio.wait(
            {waiter, self._task}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        if self._task in done:
            self._task.result()  # raises what ended the stream
        if waiter not in done:
            waiter.cancel()
            raise TimeoutError("WatchJobEvents sent no first response")

    async def _read(self) -> None:
        stub = scheduler_service_pb2_grpc.JobSchedulerServiceStub(self._channel)
        request = scheduler_service_pb2.WatchJobEventsRequest(
            filter=scheduler_service_pb2.JobEventFilter(tenant_id=self._tenant)
        )
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
        if self._own_channel:
            await self._channel.close()


class WatchedSystem(WorkflowJobsSystem):
    """workflow-jobs for the throughput run, with watchers attached (or not) once ready.

    `tenants` > 1 spreads the jobs over that many tenants (round robin); with
    `watched`, one watcher per tenant then follows its own tenant only. With
    `rate`, jobs are enqueued at that pace (batches of `PACED_BATCH`) instead
    of as fast as the coordinator takes them.
    """

    def __init__(
        self,
        config: BenchConfig,
        jobs: int,
        *,
        watched: bool,
        tenants: int = 1,
        rate: float | None = None,
    ) -> None:
        super().__init__(config.server, worker_concurrency=config.sizes.worker_concurrency)
        self.jobs = jobs
        self.watched = watched
        self.tenants = tenants
        self.rate = rate
        self.watchers: list[Watcher] = []
        self._channel: grpc.aio.Channel | None = None
        self.lags_ms: list[float] = []
        self.log_bytes = 0
        self.failure = ""

    def tenant(self, k: int) -> str:
        return "bench" if self.tenants == 1 else f"bench-{k % self.tenants}"

    async def wait_ready(self, workers: list[ManagedProcess], timeout_s: float) -> None:
        await super().wait_ready(workers, timeout_s)
        if not self.watched:
            return
        target = self.coordinators[0].target
        if self.tenants == 1:
            self.watchers = [Watcher(target)]
        else:
            self._channel = grpc.aio.insecure_channel(target)
            self.watchers = [
                Watcher(target, self.tenant(k), self._channel) for k in range(self.tenants)
            ]
        for watcher in self.watchers:
            await watcher.start()

    async def enqueue(self, jobs: int, batch: int) -> None:
        if self.tenants == 1 and self.rate is None:
            await super().enqueue(jobs, batch)
            return
        if self.rate is not None:
            batch = PACED_BATCH
        async with grpc.aio.insecure_channel(self.coordinators[0].target) as channel:
            stub = scheduler_service_pb2_grpc.JobSchedulerServiceStub(channel)
            started = time.perf_counter()
            for start in range(0, jobs, batch):
                if self.rate is not None:
                    delay = started + start / self.rate - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                specs = [job_spec(self.tenant(k)) for k in range(start, min(start + batch, jobs))]
                await stub.EnqueueBatch(
                    scheduler_service_pb2.EnqueueBatchRequest(jobs=specs), timeout=60
                )

    async def close(self) -> None:
        try:
            if self.watchers:
                expected = self.jobs * EVENTS_PER_JOB
                per_watcher = (
                    [expected]
                    if self.tenants == 1
                    else [
                        EVENTS_PER_JOB * len(range(k, self.jobs, self.tenants))
                        for k in range(self.tenants)
                    ]
                )
                short = 0
                for watcher, count in zip(self.watchers, per_watcher, strict=True):
                    if not await watcher.wait_for(count, CATCH_UP_S):
                        short += count - watcher.received
                    self.lags_ms.extend(watcher.lags_ms)
                    await watcher.stop()
                if short:
                    self.failure = f"the watchers missed {short:,} of {expected:,} events"
                self.watchers = []
                if self._channel is not None:
                    await self._channel.close()
                    self._channel = None
            if self.coordinators:
                size = self.server.scalar(
                    DATABASE, "SELECT pg_total_relation_size('wfj_job_events')"
                )
                self.log_bytes = int(size) if isinstance(size, int) else 0
        finally:
            await super().close()


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"


async def _run(config: BenchConfig) -> list[Row]:
    jobs = config.sizes.throughput_jobs
    paced_seconds = 4.0 if config.quick else PACED_SECONDS
    rate: dict[str, list[float]] = {case: [] for case in CASES}
    cpu: dict[str, list[dict[str, float]]] = {case: [] for case in CASES}
    log_bytes: list[float] = []
    lag: dict[str, dict[str, list[float]]] = {case: {"p50": [], "p99": []} for case in CASES}
    errors: list[str] = []
    for run_index in range(config.runs):
        for case in CASES:
            n, pace = jobs, None
            if case == PACED:
                if not rate[UNWATCHED]:
                    continue
                pace = 0.5 * statistics.median(rate[UNWATCHED])
                n = max(PACED_BATCH, int(pace * paced_seconds))
            system = WatchedSystem(
                config,
                n,
                watched=case in (WATCHED, PACED, TENANTS_WATCHED),
                tenants=TENANTS if case.startswith("tenants") else 1,
                rate=pace,
            )
            try:
                measured = await measure_once(
                    system,
                    processes=WORKER_PROCESSES,
                    jobs=n,
                    batch=config.sizes.enqueue_batch,
                    timeout_s=max(120.0, n / 100),
                )
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
            if system.log_bytes and case == UNWATCHED:
                log_bytes.append(system.log_bytes / n)
            line = (
                f"  events run {run_index + 1} {case}: {measured.rate:,.0f} jobs/s, CPU µs/job "
                f"coordinator {measured.cpu_us[COORDINATOR]:.0f}, "
                f"backends {measured.cpu_us[BACKENDS]:.0f}"
            )
            if system.lags_ms:
                lags = sorted(system.lags_ms)
                lag[case]["p50"].append(latency.percentile(lags, 0.50))
                lag[case]["p99"].append(latency.percentile(lags, 0.99))
                line += (
                    f"; lag p50 {lag[case]['p50'][-1]:.1f} ms, p99 {lag[case]['p99'][-1]:.1f} ms"
                )
            print(line, flush=True)
    return _rows(jobs, paced_seconds, rate, cpu, lag, log_bytes, errors)


def _rows(
    jobs: int,
    paced_seconds: float,
    rate: dict[str, list[float]],
    cpu: dict[str, list[dict[str, float]]],
    lag: dict[str, dict[str, list[float]]],
    log_bytes: Sequence[float],
    errors: list[str],
) -> list[Row]:
    head = (
        f"job event log, {jobs // 1000}k jobs, {WORKER_PROCESSES} worker processes, "
        "a WatchJobEvents watcher receiving every event"
    )
    baseline = "no watcher"
    reported = Target.reported("reported")
    rows = [
        Row(
            figure=f"{head}: throughput",
            unit="jobs/s",
            ours=rate[WATCHED],
            comparison=rate[UNWATCHED],
            comparison_name=baseline,
            target=Target.ratio_at_least(0.9, "watched ÷ unwatched ≥ 0.9"),
            note="; ".join(["ratio = watched ÷ unwatched", *errors]),
        )
    ]
    for name in ("p50", "p99"):
        rows.append(
            Row(
                figure=f"{head}: delivery lag (state change → watcher receives), {name}",
                unit="ms",
                ours=lag[WATCHED][name],
                target=reported if name == "p99" else None,
                higher_is_better=False,
            )
        )
    paced_head = (
        "job event log, one watcher of every event, jobs enqueued at 50 % of the "
        f"unwatched throughput for {paced_seconds:.0f} s: delivery lag"
    )
    for name in ("p50", "p99"):
        rows.append(
            Row(
                figure=f"{paced_head}, {name}",
                unit="ms",
                ours=lag[PACED][name],
                target=Target.at_most(100.0, "≤ 100 ms") if name == "p99" else None,
                higher_is_better=False,
                note=(
                    f"batches of {PACED_BATCH} on an open-loop schedule; rates: "
                    + ", ".join(f"{r:,.0f}" for r in rate[PACED])
                    + " jobs/s"
                )
                if name == "p50"
                else "",
            )
        )
    rows.append(
        Row(
            figure=(
                f"job event log, {jobs // 1000}k jobs over {TENANTS} tenants, {TENANTS} watchers "
                "each filtered to one tenant: throughput"
            ),
            unit="jobs/s",
            ours=rate[TENANTS_WATCHED],
            comparison=rate[TENANTS_NONE],
            comparison_name=f"no watcher, same {TENANTS} tenants",
            target=Target.ratio_at_least(0.85, "≥ 0.85× of none"),
            note="the watchers are streams of the bench process, on one channel",
        )
    )
    for what in (COORDINATOR, BACKENDS, TOTAL):
        rows.append(
            Row(
                figure=f"{head}: CPU per job, {what}",
                unit="µs",
                ours=[c[what] for c in cpu[WATCHED]],
                comparison=[c[what] for c in cpu[UNWATCHED]],
                comparison_name=baseline,
                higher_is_better=False,
            )
        )
    rows.append(
        Row(
            figure="job event log: size per job (heap + index, 3 events)",
            unit="B",
            ours=list(log_bytes),
            higher_is_better=False,
            note="pg_total_relation_size(wfj_job_events) after the run ÷ jobs",
        )
    )
    return rows
