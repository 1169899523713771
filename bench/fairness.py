"""Figure 5: tenant fairness under a skewed backlog.

One tenant enqueues 100,000 jobs, then nine tenants enqueue 2,000 each (so a
FIFO queue would starve the nine until the big one is done); all weights are
equal. Two worker processes then start and record every handler start with
its tenant. "While all are backlogged" is the prefix of the start order
before any tenant's last job starts; over that prefix each tenant's share of
starts should be 1/10. Reported: Jain's fairness index of the shares
((Σx)² / (n·Σx²), 1.0 = perfectly even) and the largest relative deviation
of a share from 1/10. The run ends once the nine small tenants are done.
No peer: PgQueuer and Procrastinate have no per-tenant fair sharing.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

from bench import wfjobs
from bench.config import BenchConfig
from bench.database import PostgresServer
from bench.processes import LOG_DIR, ManagedProcess, ProcessFailed, stop_all
from bench.recording import StartRecord, count_records, read_records
from bench.results import Row, Target

WORKER_PROCESSES = 2
BIG_TENANT = "tenant-big"


def small_tenants() -> list[str]:
    return [f"tenant-small-{n}" for n in range(9)]


def backlogged_prefix(records: list[StartRecord], totals: dict[str, int]) -> list[StartRecord]:
    """Starts before the first moment some tenant has no job left to start."""
    started: Counter[str] = Counter()
    for index, record in enumerate(records):
        started[record.tenant] += 1
        if started[record.tenant] >= totals.get(record.tenant, 0):
            return records[:index]
    return records


def fairness_of(prefix: list[StartRecord], tenants: list[str]) -> tuple[float, float]:
    """(Jain index, max relative deviation from the fair share) over `prefix`."""
    counts = Counter(r.tenant for r in prefix)
    total = sum(counts[t] for t in tenants)
    if total == 0:
        raise ValueError("no starts while all tenants were backlogged")
    shares = [counts[t] / total for t in tenants]
    jain = sum(shares) ** 2 / (len(shares) * sum(s * s for s in shares))
    fair = 1 / len(tenants)
    deviation = max(abs(s - fair) / fair for s in shares)
    return jain, deviation


async def measure_once(
    server: PostgresServer, big: int, small: int, batch: int, concurrency: int
) -> tuple[float, float, int]:
    server.recreate_database(wfjobs.DATABASE)
    coordinator = wfjobs.Coordinator(server)
    coordinator.migrate()
    coordinator.start()
    record = LOG_DIR / f"fairness-{time.monotonic_ns()}"
    paths = [Path(f"{record}.{i}") for i in range(WORKER_PROCESSES)]
    workers: list[ManagedProcess] = []
    totals = {BIG_TENANT: big, **{t: small for t in small_tenants()}}
    try:
        await wfjobs.enqueue_noop(coordinator.target, big, batch, tenant=BIG_TENANT)
        for tenant in small_tenants():
            await wfjobs.enqueue_noop(coordinator.target, small, batch, tenant=tenant)
        workers = wfjobs.start_workers(
            coordinator.target,
            WORKER_PROCESSES,
            concurrency=concurrency,
            deadline_s=600,
            record=str(record),
        )
        # Done when every small tenant's jobs have started; the big tenant's rest is not needed.
        end = time.monotonic() + 300
        while time.monotonic() < end:
            records = read_records(paths) if count_records(paths) >= 9 * small else []
            counts = Counter(r.tenant for r in records)
            if records and all(counts[t] >= small for t in small_tenants()):
                break
            for worker in workers:
                if not worker.running():
                    raise ProcessFailed(f"{worker.name} exited:\n{worker.log_tail()}")
            coordinator.check_alive()
            await asyncio.sleep(0.5)
        else:
            raise TimeoutError("small tenants not done within 300 s")
    finally:
        stop_all(workers)
        coordinator.stop()
    prefix = backlogged_prefix(read_records(paths), totals)
    jain, deviation = fairness_of(prefix, list(totals))
    return jain, deviation, len(prefix)


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    jains: list[float] = []
    deviations: list[float] = []
    windows: list[int] = []
    error = ""
    for run_index in range(config.runs):
        try:
            jain, deviation, window = await measure_once(
                config.server,
                sizes.fairness_big,
                sizes.fairness_small,
                sizes.enqueue_batch,
                sizes.worker_concurrency,
            )
        except Exception as exc:  # reported in the table
            error = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            print(f"  fairness {error}", flush=True)
            break
        jains.append(jain)
        deviations.append(deviation * 100)
        windows.append(window)
        print(
            f"  fairness run {run_index + 1}: Jain {jain:.4f}, max deviation "
            f"{deviation * 100:.1f} % over {window} starts",
            flush=True,
        )
    label = (
        f"fairness: 1 tenant × {sizes.fairness_big:,} + 9 × {sizes.fairness_small:,}, equal weights"
    )
    note = error or (
        f"over the first {min(windows):,}–{max(windows):,} starts (all backlogged)"
        if windows
        else ""
    )
    return [
        Row(
            figure=f"{label}: Jain index",
            unit="",
            ours=jains,
            target=Target.at_least(0.99, "≥ 0.99"),
            note=note,
        ),
        Row(
            figure=f"{label}: max deviation from fair share",
            unit="%",
            ours=deviations,
            target=Target.at_most(10.0, "≤ 10 %"),
            higher_is_better=False,
            note="no peer: PgQueuer and Procrastinate have no per-tenant sharing",
        ),
    ]
