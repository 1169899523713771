"""Figure: what a rate limit costs at acquisition, and how closely it holds.

Two rows (issue 16 §3: rate limits are enforced at acquisition, on the store):

- **Cost of a limit that does not bind.** The acquisition rate (as in the
  paused and backlog figures, `bench.acquisition`) on a table of eligible jobs
  of one tenant, with a rate limit of `NON_BINDING_STARTS` starts per second on
  that tenant, ÷ the same with no limit. The limit never holds a job back, but
  every acquisition pass then takes the counting path: it reads the limit's
  bucket and advances it in the claim's transaction. The two cases live in two
  databases and alternate run by run.
- **Accuracy.** A limit of `rate_limit_rate` starts per second (burst
  `BURST`) on the tenant of a backlog of twice what the limit admits over the
  run, served by two worker processes with `worker_concurrency` slots each
  (far more than the limit admits). The coordinator runs for
  `rate_limit_seconds` from the first start; the measured rate is the starts
  after the first second (which holds the burst) ÷ the time they span. Target:
  within 10 % of the limit.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
from google.protobuf import duration_pb2

from bench import seeding, wfjobs
from bench.acquisition import TIMEOUT_S, WORKER_PROCESSES, measure_rate
from bench.config import BenchConfig
from bench.database import PostgresServer
from bench.processes import LOG_DIR, ManagedProcess, ProcessFailed, stop_all
from bench.recording import StartRecord, count_records, read_records
from bench.results import Row, Target
from workflowjobs.v1 import admin_service_pb2, admin_service_pb2_grpc

TENANT = "tenant-0"
DATABASES = {"none": "wfjobs_bench_rate_none", "limit": "wfjobs_bench_rate"}
# A limit far above any rate this machine reaches: it never holds a start back.
NON_BINDING_STARTS = 1_000_000
BURST = 50
SKIP_S = 1.0


async def set_rate_limit(target: str, starts: int, burst: int) -> None:
    """A rate limit of `starts` per second (burst `burst`) on tenant `TENANT`."""
    async with grpc.aio.insecure_channel(target) as channel:
        admin = admin_service_pb2_grpc.AdminServiceStub(channel)
        await admin.SetRateLimit(
            admin_service_pb2.SetRateLimitRequest(
                limit=admin_service_pb2.RateLimit(
                    kind=admin_service_pb2.LIMIT_SCOPE_KIND_TENANT,
                    value=TENANT,
                    starts=starts,
                    period=duration_pb2.Duration(seconds=1),
                    burst=burst,
                )
            ),
            timeout=30,
        )


def held_rate(records: list[StartRecord], skip_s: float) -> float:
    """Starts per second after the first `skip_s` seconds of `records` (sorted)."""
    if not records:
        raise ValueError("no starts recorded")
    since = records[0].start_ns + int(skip_s * 1e9)
    after = [r.start_ns for r in records if r.start_ns >= since]
    if len(after) < 2:
        raise ValueError(f"only {len(after)} starts after the first {skip_s:.0f} s")
    return (len(after) - 1) / ((after[-1] - after[0]) / 1e9)


async def measure_accuracy(
    server: PostgresServer, *, database: str, rate: int, seconds: float, concurrency: int
) -> float:
    """Starts/s under a limit of `rate`/s, over `seconds` from the first start."""
    coordinator = wfjobs.Coordinator(server, database)
    coordinator.start()
    record = LOG_DIR / f"rate-limits-{time.monotonic_ns()}"
    paths = [Path(f"{record}.{i}") for i in range(WORKER_PROCESSES)]
    workers: list[ManagedProcess] = []
    try:
        await set_rate_limit(coordinator.target, rate, BURST)
        workers = wfjobs.start_workers(
            coordinator.target,
            WORKER_PROCESSES,
            concurrency=concurrency,
            deadline_s=TIMEOUT_S + 60,
            record=str(record),
        )
        end = time.monotonic() + TIMEOUT_S
        first_seen: float | None = None
        while first_seen is None or time.monotonic() < first_seen + seconds:
            if time.monotonic() > end:
                raise TimeoutError(f"no start within {TIMEOUT_S:.0f} s")
            if first_seen is None and count_records(paths) > 0:
                first_seen = time.monotonic()
            for worker in workers:
                if not worker.running():
                    raise ProcessFailed(f"{worker.name} exited:\n{worker.log_tail()}")
            coordinator.check_alive()
            await asyncio.sleep(0.05)
    finally:
        stop_all(workers)
        coordinator.stop()
    return held_rate(read_records(paths), SKIP_S)


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    server = config.server
    window = sizes.acquisition_window
    rate = sizes.rate_limit_rate
    seconds = sizes.rate_limit_seconds
    live = seeding.Backlog(window, tenants=1, definition_id="live", age_s=60)
    accuracy_backlog = seeding.Backlog(
        int(rate * seconds * 2), tenants=1, definition_id="limited", age_s=60
    )
    rates: dict[str, list[float]] = {"none": [], "limit": []}
    held: list[float] = []
    cost_note = accuracy_note = ""
    try:
        for database in DATABASES.values():
            server.recreate_database(database)
            wfjobs.Coordinator(server, database).migrate()

        async def non_binding(target: str) -> None:
            await set_rate_limit(target, NON_BINDING_STARTS, 0)

        for run_index in range(config.runs):
            for case, database in DATABASES.items():
                dsn = server.dsn(database)
                seeding.delete_jobs(dsn, definition_id="live")
                seeding.insert_backlog(dsn, live)
                measured = await measure_rate(
                    server,
                    database=database,
                    window=window,
                    concurrency=sizes.worker_concurrency,
                    prepare=non_binding if case == "limit" else None,
                )
                rates[case].append(measured)
                print(
                    f"  rate_limits run {run_index + 1} ({case}): {measured:,.0f} jobs/s",
                    flush=True,
                )
        cost_note = (
            f"{window:,} eligible jobs, limit {NON_BINDING_STARTS:,}/s on their "
            "tenant, rate over starts 10–90 %"
        )
        dsn = server.dsn(DATABASES["limit"])
        for run_index in range(config.runs):
            seeding.delete_jobs(dsn, definition_id="live")
            seeding.delete_jobs(dsn, definition_id="limited")
            seeding.insert_backlog(dsn, accuracy_backlog)
            measured = await measure_accuracy(
                server,
                database=DATABASES["limit"],
                rate=rate,
                seconds=seconds,
                concurrency=sizes.worker_concurrency,
            )
            held.append(measured)
            print(
                f"  rate_limits run {run_index + 1} (accuracy): {measured:,.1f} starts/s "
                f"under {rate}/s",
                flush=True,
            )
        accuracy_note = (
            f"limit {rate}/s burst {BURST}, {accuracy_backlog.count:,} pending, "
            f"{WORKER_PROCESSES}×{sizes.worker_concurrency} slots, "
            f"{seconds:.0f} s, first {SKIP_S:.0f} s not counted"
        )
    except Exception as exc:  # reported in the table
        failed = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"  rate_limits {failed}", flush=True)
        cost_note = cost_note or failed
        accuracy_note = accuracy_note or failed
    finally:
        for database in DATABASES.values():
            server.drop_database(database)
    return [
        Row(
            figure="acquisition throughput with a rate limit that does not bind ÷ with none",
            unit="jobs/s",
            ours=rates["limit"],
            comparison=rates["none"],
            comparison_name="no rate limit",
            target=Target.reported("reported"),
            note=cost_note,
        ),
        Row(
            figure=f"starts/s under a rate limit of {rate}/s (÷ the limit)",
            unit="starts/s",
            ours=held,
            comparison=[float(rate)] * len(held),
            comparison_name="the limit",
            target=Target(
                "within 10 % (0.9 ≤ ratio ≤ 1.1)",
                lambda _o, _c, r: None if r is None else 0.9 <= r <= 1.1,
            ),
            note=accuracy_note,
        ),
    ]
