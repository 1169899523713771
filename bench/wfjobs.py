"""Driving workflow-jobs from the bench: coordinator process, enqueue, workers, counters.

The coordinator runs as its own process (`python -m coordinator serve`) on a
fresh bench database; workers are `bench.worker_proc` processes using the
real SDK `Worker`. Enqueueing uses the raw `JobSchedulerService.EnqueueBatch`
so the bench controls batch sizes exactly. Completion is counted in
PostgreSQL, not through the coordinator, so counting does not load the
process under test.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Sequence

import grpc
import psycopg

from bench import profiling
from bench.database import PROBE_APPLICATION_NAME, PostgresServer
from bench.processes import ManagedProcess, ProcessFailed
from bench.statements import PROBE
from workflowjobs.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    job_pb2,
    scheduler_service_pb2,
    scheduler_service_pb2_grpc,
)

DATABASE = "wfjobs_bench"
JOB_TYPE = "noop"
JOBS_TABLE = "wfj_jobs"
STATUS_PENDING = job_pb2.JOB_STATUS_PENDING
STATUS_COMPLETED = job_pb2.JOB_STATUS_COMPLETED
# GetStats counts every job; beside a 1M backlog and 200 starting workers on
# two busy cores one call has taken over 10 s, which is not what is measured.
STATS_DEADLINE_S = 60.0
# Environment every coordinator the bench starts gets on top of the bench's
# own (set by the A/B figure, `bench.ab`, for the variant under test).
COORDINATOR_ENV: dict[str, str] = {}


class Coordinator:
    """A coordinator process serving one bench database on a loopback port.

    Args:
        server: The bench PostgreSQL.
        database: Database name (must be a bench database).
        deadline_s: Hard limit on the process's lifetime.
        extra_args: Additional `serve` arguments.
    """

    def __init__(
        self,
        server: PostgresServer,
        database: str = DATABASE,
        *,
        deadline_s: float = 900.0,
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.server = server
        self.database = database
        self.deadline_s = deadline_s
        self.extra_args = list(extra_args)
        # Extra environment of the serving process (the A/B figure's variants).
        self.env = dict(COORDINATOR_ENV) | (env or {})
        self.process: ManagedProcess | None = None
        self.profiler: ManagedProcess | None = None
        self.target = ""

    def migrate(self) -> None:
        """Bring the (fresh) database to the coordinator's schema."""
        migrate = ManagedProcess(
            "coordinator-migrate",
            [
                "python",
                "-m",
                "coordinator",
                "migrate",
                "--database-url",
                self.server.sqlalchemy_url(self.database),
            ],
            deadline_s=120,
        )
        try:
            code = migrate.wait(120)
        finally:
            migrate.stop()
        if code != 0:
            raise ProcessFailed(f"coordinator migrate exited {code}:\n{migrate.log_tail()}")

    def start(self) -> None:
        self.process = ManagedProcess(
            "coordinator",
            [
                "python",
                "-m",
                "coordinator",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                self.server.sqlalchemy_url(self.database),
                *self.extra_args,
            ],
            deadline_s=self.deadline_s,
            env=self.env,
        )
        match = self.process.wait_for_log(r"listening on 127\.0\.0\.1:(\d+)", timeout_s=60)
        self.target = f"127.0.0.1:{match.group(1)}"
        self.profiler = profiling.attach(self.process.pid, "coordinator")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(grace_s=10)
        if self.profiler is not None:
            try:
                self.profiler.wait(30)  # py-spy writes its output once the target is gone
            except ProcessFailed:
                pass
            self.profiler.stop()

    def check_alive(self) -> None:
        if self.process is not None and not self.process.running():
            raise ProcessFailed(f"coordinator exited:\n{self.process.log_tail()}")


def worker_impl() -> str:
    """`sdk` (the real Worker; every reported figure) or `stream` (bare stream, probes only)."""
    return os.environ.get("BENCH_WORKER_IMPL", "sdk")


def start_workers(
    target: str,
    processes: int,
    *,
    concurrency: int,
    deadline_s: float,
    record: str | None = None,
    workers_per_process: int = 1,
    impl: str | None = None,
    name: str = "wfjobs-worker",
    first_index: int = 0,
) -> list[ManagedProcess]:
    """Start `processes` worker processes (each with `workers_per_process` workers).

    They are numbered from `first_index` (log names, `{record}.{i}` record files).
    """
    started = []
    for i in range(first_index, first_index + processes):
        argv = [
            "python",
            "-m",
            "bench.worker_proc",
            "--target",
            target,
            "--concurrency",
            str(concurrency),
            "--workers",
            str(workers_per_process),
            "--impl",
            impl or worker_impl(),
        ]
        if record:
            argv += ["--record", f"{record}.{i}"]
        started.append(ManagedProcess(f"{name}-{i}", argv, deadline_s=deadline_s))
    return started


async def wait_connected(
    target: str, expected: int, workers: Sequence[ManagedProcess], timeout_s: float = 60.0
) -> None:
    """Wait until the coordinator reports `expected` connected workers."""
    async with grpc.aio.insecure_channel(target) as channel:
        admin = admin_service_pb2_grpc.AdminServiceStub(channel)
        end = time.monotonic() + timeout_s
        connected = 0
        while time.monotonic() < end:
            stats = await admin.GetStats(
                admin_service_pb2.GetStatsRequest(), timeout=STATS_DEADLINE_S
            )
            connected = stats.connected_workers
            if connected >= expected:
                return
            for worker in workers:
                if not worker.running():
                    raise ProcessFailed(f"{worker.name} exited:\n{worker.log_tail()}")
            await asyncio.sleep(0.1)
    raise ProcessFailed(f"only {connected}/{expected} workers connected after {timeout_s:.0f} s")


def job_spec(tenant: str = "bench", data: bytes = b"{}") -> job_pb2.JobSpec:
    return job_pb2.JobSpec(
        job_type=JOB_TYPE,
        tenant_id=tenant,
        payload=job_pb2.Payload(data=data, content_type="application/json"),
    )


async def enqueue_batches(target: str, specs_by_batch: Sequence[Sequence[job_pb2.JobSpec]]) -> None:
    """Enqueue each batch with one EnqueueBatch call, in order."""
    async with grpc.aio.insecure_channel(target) as channel:
        scheduler = scheduler_service_pb2_grpc.JobSchedulerServiceStub(channel)
        for specs in specs_by_batch:
            await scheduler.EnqueueBatch(
                scheduler_service_pb2.EnqueueBatchRequest(jobs=list(specs)), timeout=60
            )


async def enqueue_noop(target: str, jobs: int, batch: int, tenant: str = "bench") -> None:
    spec = job_spec(tenant)
    batches = [[spec] * min(batch, jobs - start) for start in range(0, jobs, batch)]
    await enqueue_batches(target, batches)


class CompletionCounter:
    """Counts COMPLETED jobs straight from the coordinator's jobs table."""

    def __init__(self, conn: psycopg.AsyncConnection) -> None:
        self._conn = conn

    @classmethod
    async def open(cls, dsn: str) -> CompletionCounter:
        return cls(
            await psycopg.AsyncConnection.connect(
                dsn, autocommit=True, application_name=PROBE_APPLICATION_NAME
            )
        )

    async def completed(self) -> int:
        cur = await self._conn.execute(
            f"{PROBE}SELECT count(*) FROM {JOBS_TABLE} WHERE status = %s", (STATUS_COMPLETED,)
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def close(self) -> None:
        await self._conn.close()


def start_coordinators(
    server: PostgresServer, count: int = 1, *, deadline_s: float = 900.0
) -> list[Coordinator]:
    """A fresh bench database, migrated once, served by `count` coordinator processes."""
    server.recreate_database(DATABASE)
    coordinators = [Coordinator(server, deadline_s=deadline_s) for _ in range(count)]
    coordinators[0].migrate()
    try:
        for coordinator in coordinators:
            coordinator.start()
    except BaseException:
        stop_coordinators(coordinators)
        raise
    return coordinators


def stop_coordinators(coordinators: Sequence[Coordinator]) -> None:
    for coordinator in coordinators:
        coordinator.stop()


_DISPATCH_LINE = re.compile(
    r"dispatch: (\d+) job\(s\) leased at insert \(direct dispatch\), (\d+) by (\d+) pass"
)


def dispatch_counts(coordinators: Sequence[Coordinator]) -> tuple[int, int, int] | None:
    """Jobs leased at insert, jobs leased by passes and passes, summed over the
    stopped coordinators (from the line each logs as it stops); None if a log lacks it."""
    totals = [0, 0, 0]
    for coordinator in coordinators:
        if coordinator.process is None:
            return None
        match = _DISPATCH_LINE.search(coordinator.process.log_text())
        if match is None:
            return None
        for i in range(3):
            totals[i] += int(match.group(i + 1))
    return totals[0], totals[1], totals[2]


class WorkflowJobsSystem:
    """Drives workflow-jobs for the throughput figure (see `bench.throughput.QueueSystem`).

    With several coordinators (replicas on the one bench database), worker
    process i connects to coordinator i mod n and the enqueue batches go to
    the coordinators in turn.

    Args:
        server: The bench PostgreSQL.
        worker_concurrency: Handler slots per worker process.
        coordinators: Coordinator processes serving the database.
    """

    database = DATABASE

    def __init__(
        self, server: PostgresServer, worker_concurrency: int = 200, coordinators: int = 1
    ) -> None:
        self.server = server
        self.worker_concurrency = worker_concurrency
        self.coordinator_count = coordinators
        self.name = (
            "workflow-jobs" if coordinators == 1 else f"workflow-jobs, {coordinators} coordinators"
        )
        self.coordinators: list[Coordinator] = []

    async def prepare(self) -> None:
        self.coordinators = start_coordinators(self.server, self.coordinator_count)

    def coordinator_pids(self) -> list[int]:
        return [c.pid for c in self.coordinators]

    def start_workers(self, processes: int, deadline_s: float) -> list[ManagedProcess]:
        assert self.coordinators
        started = []
        for i in range(processes):
            target = self.coordinators[i % len(self.coordinators)].target
            started += start_workers(
                target, 1, concurrency=self.worker_concurrency, deadline_s=deadline_s, first_index=i
            )
        return started

    async def wait_ready(self, workers: list[ManagedProcess], timeout_s: float) -> None:
        n = len(self.coordinators)
        for index, coordinator in enumerate(self.coordinators):
            expected = len(range(index, len(workers), n))
            await wait_connected(coordinator.target, expected, workers, timeout_s)

    async def enqueue(self, jobs: int, batch: int) -> None:
        assert self.coordinators
        spec = job_spec()
        channels = [grpc.aio.insecure_channel(c.target) for c in self.coordinators]
        try:
            stubs = [scheduler_service_pb2_grpc.JobSchedulerServiceStub(c) for c in channels]
            for k, start in enumerate(range(0, jobs, batch)):
                request = scheduler_service_pb2.EnqueueBatchRequest(
                    jobs=[spec] * min(batch, jobs - start)
                )
                await stubs[k % len(stubs)].EnqueueBatch(request, timeout=60)
        finally:
            for channel in channels:
                await channel.close()

    async def open_counter(self) -> CompletionCounter:
        return await CompletionCounter.open(self.server.dsn(DATABASE))

    async def close(self) -> None:
        stop_coordinators(self.coordinators)
        self.coordinators = []
