"""Figure: steady load while another session holds a snapshot open (xmin pinned).

For `snapshot_seconds` an open-loop load of `snapshot_rate` single-job
enqueues per second is offered (`bench.latency.offer_load`, two worker
processes, each handler start recorded). Meanwhile another session on the
same database opens a REPEATABLE READ transaction, reads the jobs table (its
snapshot is taken) and holds it for `snapshot_hold_s`; it commits, waits
`snapshot_gap_s` and starts again, until the offered window ends. While it is
held its xmin (checked in `pg_stat_activity.backend_xmin`) stops VACUUM from
removing any row version that died after it, which is how high-churn job
tables bloat in production.

Reported per interval of `snapshot_interval_s` (by the time each job was
offered): the p99 of enqueue→handler-start for the jobs offered in it, and
the most dead tuples the jobs table showed in it (`pg_stat_user_tables.n_dead_tup`,
sampled every second; PostgreSQL updates it about once a second). Then the
whole run: p99, the worst interval's p99, the dead-tuple peak (sampled until
every send was answered, so a system that fell behind is sampled longer) and
the jobs table's size (with indexes and TOAST) at the end. PgQueuer (batch 10, its
queue table) runs the same load beside it. One run per system whatever
`--runs` says: the full figure is ten minutes each.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import grpc
import psycopg
from pgqueuer import AsyncpgPoolDriver, Queries

from bench import wfjobs
from bench.config import BenchConfig, Sizes
from bench.database import PROBE_APPLICATION_NAME, PostgresServer
from bench.latency import WORKER_PROCESSES, offer_load, percentile, wait_for_records
from bench.pgqueuer_peer import ENTRYPOINT, QUEUE_TABLE, PgQueuerSystem
from bench.processes import LOG_DIR, ManagedProcess, stop_all
from bench.recording import read_records
from bench.results import Row, Target
from workflowjobs.v1 import scheduler_service_pb2, scheduler_service_pb2_grpc

DRAIN_TIMEOUT_S = 60.0
SEND_DEADLINE_S = 30.0
TABLE_SAMPLE_INTERVAL_S = 1.0
PEER_NAME = "PgQueuer batch 10"

_TABLE_SQL = (
    "SELECT n_dead_tup, pg_total_relation_size(relid), autovacuum_count "
    "FROM pg_stat_user_tables WHERE relname = %s"
)


@dataclass
class LoadedRun:
    """What one system's held-snapshot run measured.

    Attributes:
        latencies: (offset of the send from the load's start in s, enqueue→start in ms) per started job.
        dead_tuples: (offset in s, n_dead_tup) samples of the jobs table.
        size_bytes: Jobs table size with indexes at the end of the load.
        autovacuums: Autovacuum runs of the jobs table during the run.
        holds: (start, end) offsets of each held snapshot.
        note: Sent/started counts.
    """

    latencies: list[tuple[float, float]] = field(default_factory=list)
    dead_tuples: list[tuple[float, int]] = field(default_factory=list)
    size_bytes: int = 0
    autovacuums: int = 0
    holds: list[tuple[float, float]] = field(default_factory=list)
    note: str = ""


async def hold_snapshots(
    dsn: str,
    table: str,
    sizes: Sizes,
    t0: float,
    stop: asyncio.Event,
    holds: list[tuple[float, float]],
) -> None:
    """Hold a snapshot on `table`'s database for `snapshot_hold_s` at a time, from `t0`
    to the end of the offered load (`snapshot_seconds` later), then wait for `stop`."""
    until = t0 + sizes.snapshot_seconds
    async with await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, application_name=PROBE_APPLICATION_NAME
    ) as conn:
        while not stop.is_set() and time.monotonic() < until:
            await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            await conn.execute(f"SELECT count(*) FROM {table}")
            cur = await conn.execute(
                "SELECT backend_xmin FROM pg_stat_activity WHERE pid = pg_backend_pid()"
            )
            row = await cur.fetchone()
            if row is None or row[0] is None:
                raise RuntimeError("the holding session's snapshot does not pin xmin")
            began = time.monotonic() - t0
            await _wait(stop, min(sizes.snapshot_hold_s, until - time.monotonic()))
            await conn.execute("COMMIT")
            holds.append((began, time.monotonic() - t0))
            await _wait(stop, sizes.snapshot_gap_s)
        await stop.wait()


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


async def sample_table(
    dsn: str, table: str, t0: float, stop: asyncio.Event, into: LoadedRun
) -> None:
    """Sample the table's dead tuples every second until `stop`; keep its size and vacuums."""
    async with await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, application_name=PROBE_APPLICATION_NAME
    ) as conn:
        first_vacuums: int | None = None
        while True:
            cur = await conn.execute(_TABLE_SQL, (table,))
            row = await cur.fetchone()
            if row is None:
                raise RuntimeError(f"no table {table!r} in pg_stat_user_tables")
            into.dead_tuples.append((time.monotonic() - t0, int(row[0])))
            into.size_bytes = int(row[1])
            first_vacuums = int(row[2]) if first_vacuums is None else first_vacuums
            into.autovacuums = int(row[2]) - first_vacuums
            if stop.is_set():
                return
            await _wait(stop, TABLE_SAMPLE_INTERVAL_S)


async def loaded_run(
    send, dsn: str, table: str, sizes: Sizes, paths: list[Path], workers: list[ManagedProcess]
) -> LoadedRun:
    """Offer the load with the holder and the sampler running; collect the series."""
    result = LoadedRun()
    stop = asyncio.Event()
    t0 = time.monotonic()
    t0_wall_ns = time.time_ns()
    holder = asyncio.create_task(hold_snapshots(dsn, table, sizes, t0, stop, result.holds))
    sampler = asyncio.create_task(sample_table(dsn, table, t0, stop, result))
    load = asyncio.create_task(offer_load(send, sizes.snapshot_rate, sizes.snapshot_seconds))
    try:
        # The holder and the sampler run until `stop`; either ending first is a failure.
        done, _ = await asyncio.wait({load, holder, sampler}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not load:
                raise task.exception() or RuntimeError("a probe session ended before the load")
        total, achieved, failed = load.result()
        stop.set()
        await asyncio.gather(holder, sampler)
    finally:
        stop.set()
        for task in (load, holder, sampler):
            task.cancel()
        await asyncio.gather(load, holder, sampler, return_exceptions=True)
    seen = await wait_for_records(paths, total - failed, workers, DRAIN_TIMEOUT_S)
    result.latencies = [
        ((r.enqueued_ns - t0_wall_ns) / 1e9, (r.start_ns - r.enqueued_ns) / 1e6)
        for r in read_records(paths)
        if r.enqueued_ns
    ]
    result.note = f"sent {total} at {achieved:.0f}/s" + (
        f", {failed} sends failed" if failed else ""
    )
    if seen < total - failed:
        result.note += f", only {seen} started within {DRAIN_TIMEOUT_S:.0f} s of the load's end"
    return result


async def measure_ours(server: PostgresServer, sizes: Sizes) -> LoadedRun:
    coordinators = wfjobs.start_coordinators(server, 1, deadline_s=sizes.snapshot_seconds + 600)
    coordinator = coordinators[0]
    record = LOG_DIR / f"snapshot-ours-{time.monotonic_ns()}"
    paths = [Path(f"{record}.{i}") for i in range(WORKER_PROCESSES)]
    workers: list[ManagedProcess] = []
    try:
        workers = wfjobs.start_workers(
            coordinator.target,
            WORKER_PROCESSES,
            concurrency=sizes.worker_concurrency,
            deadline_s=sizes.snapshot_seconds + 300,
            record=str(record),
        )
        await wfjobs.wait_connected(coordinator.target, WORKER_PROCESSES, workers)
        async with grpc.aio.insecure_channel(coordinator.target) as channel:
            scheduler = scheduler_service_pb2_grpc.JobSchedulerServiceStub(channel)

            async def send(payload: bytes) -> object:
                spec = wfjobs.job_spec(data=payload)
                return await scheduler.Enqueue(
                    scheduler_service_pb2.EnqueueRequest(job=spec), timeout=SEND_DEADLINE_S
                )

            result = await loaded_run(
                send, server.dsn(wfjobs.DATABASE), wfjobs.JOBS_TABLE, sizes, paths, workers
            )
        coordinator.check_alive()
    finally:
        stop_all(workers)
        wfjobs.stop_coordinators(coordinators)
    return result


async def measure_pgqueuer(server: PostgresServer, sizes: Sizes) -> LoadedRun:
    system = PgQueuerSystem(server, batch_size=10)
    await system.prepare()
    record = LOG_DIR / f"snapshot-pgqueuer-{time.monotonic_ns()}"
    paths = [Path(f"{record}.{i}") for i in range(WORKER_PROCESSES)]
    workers: list[ManagedProcess] = []
    try:
        workers = system.start_workers(
            WORKER_PROCESSES, sizes.snapshot_seconds + 300, record=str(record)
        )
        await system.wait_ready(workers, 60)
        await asyncio.sleep(1.0)  # READY is printed just before the dequeue loop starts
        pool = await asyncpg.create_pool(system.dsn, min_size=4, max_size=8)
        try:
            queries = Queries(AsyncpgPoolDriver(pool))

            async def send(payload: bytes) -> object:
                # The deadline ours gets: a send not answered in it counts as failed.
                async with asyncio.timeout(SEND_DEADLINE_S):
                    return await queries.enqueue(ENTRYPOINT, payload)

            return await loaded_run(send, system.dsn, QUEUE_TABLE, sizes, paths, workers)
        finally:
            await pool.close()
    finally:
        stop_all(workers)


def interval_bounds(sizes: Sizes) -> list[tuple[float, float]]:
    """The reported intervals [a, b) of the load, in seconds from its start."""
    step = sizes.snapshot_interval_s
    count = max(1, round(sizes.snapshot_seconds / step))
    return [
        (i * step, sizes.snapshot_seconds if i == count - 1 else (i + 1) * step)
        for i in range(count)
    ]


def interval_p99(run: LoadedRun, a: float, b: float) -> list[float]:
    values = sorted(ms for at, ms in run.latencies if a <= at < b)
    return [percentile(values, 0.99)] if values else []


def interval_dead_max(run: LoadedRun, a: float, b: float) -> list[float]:
    values = [float(dead) for at, dead in run.dead_tuples if a <= at < b]
    return [max(values)] if values else []


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    runs: dict[str, LoadedRun] = {}
    errors: list[str] = []
    for who, measure in (("ours", measure_ours), ("PgQueuer", measure_pgqueuer)):
        try:
            runs[who] = await measure(config.server, sizes)
        except Exception as exc:  # reported in the table
            errors.append(
                f"{who} failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
            )
            print(f"  snapshot {errors[-1]}", flush=True)
            continue
        measured = runs[who]
        whole = sorted(ms for _, ms in measured.latencies)
        print(
            f"  snapshot {who}: p99 {percentile(whole, 0.99) if whole else float('nan'):.1f} ms, "
            f"dead tuples peak {max((d for _, d in measured.dead_tuples), default=0):,}, "
            f"{len(measured.holds)} holds, {measured.autovacuums} autovacuums ({measured.note})",
            flush=True,
        )
    ours, peer = runs.get("ours", LoadedRun()), runs.get("PgQueuer", LoadedRun())

    head = (
        f"held snapshot ({sizes.snapshot_hold_s:.0f} s at a time), "
        f"{sizes.snapshot_rate:,} jobs/s for {sizes.snapshot_seconds / 60:.0f} min"
    )
    holds = ", ".join(f"{a:.0f}–{b:.0f}" for a, b in ours.holds)
    details = [
        f"ours: {ours.note}; snapshot held at {holds or '—'} s; "
        f"{ours.autovacuums} autovacuums of {wfjobs.JOBS_TABLE}"
        if "ours" in runs
        else "",
        f"PgQueuer: {peer.note}; {peer.autovacuums} autovacuums of {QUEUE_TABLE}"
        if "PgQueuer" in runs
        else "",
        *errors,
    ]
    note = "; ".join(filter(None, details))
    rows: list[Row] = []
    for a, b in interval_bounds(sizes):
        span = f"{head}, {a:.0f}–{b:.0f} s"
        rows.append(
            Row(
                figure=f"{span}: enqueue→handler-start p99",
                unit="ms",
                ours=interval_p99(ours, a, b),
                comparison=interval_p99(peer, a, b),
                comparison_name=PEER_NAME,
                higher_is_better=False,
                note=note if not rows else "",
            )
        )
        rows.append(
            Row(
                figure=f"{span}: jobs table dead tuples (max)",
                unit="tuples",
                ours=interval_dead_max(ours, a, b),
                comparison=interval_dead_max(peer, a, b),
                comparison_name=PEER_NAME,
                higher_is_better=False,
            )
        )

    def whole_p99(run_: LoadedRun) -> list[float]:
        values = sorted(ms for _, ms in run_.latencies)
        return [percentile(values, 0.99)] if values else []

    def worst(run_: LoadedRun) -> list[float]:
        values = [v for a, b in interval_bounds(sizes) for v in interval_p99(run_, a, b)]
        return [max(values)] if values else []

    def peak(run_: LoadedRun) -> list[float]:
        return [float(max(d for _, d in run_.dead_tuples))] if run_.dead_tuples else []

    def size_mb(run_: LoadedRun) -> list[float]:
        return [run_.size_bytes / 2**20] if run_.dead_tuples else []

    for what, unit, pick, target in (
        ("enqueue→handler-start p99, whole run", "ms", whole_p99, None),
        (
            "enqueue→handler-start p99, worst interval",
            "ms",
            worst,
            Target.reported("p99 flat (reported)"),
        ),
        (
            "jobs table dead tuples, peak",
            "tuples",
            peak,
            Target.reported("dead tuples bounded (reported)"),
        ),
        ("jobs table size with indexes at the end", "MB", size_mb, None),
    ):
        rows.append(
            Row(
                figure=f"{head}: {what}",
                unit=unit,
                ours=pick(ours),
                comparison=pick(peer),
                comparison_name=PEER_NAME,
                target=target,
                higher_is_better=False,
            )
        )
    return rows
