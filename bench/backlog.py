"""Figure 4: acquisition throughput with 5,000,000 pending jobs ÷ with 10,000.

Both cases spread their pending jobs round-robin over ten tenants of equal
weight (one job type, one definition) and time the same number of starts;
only the size of the backlog differs. The large backlog is generated once
and shared by the runs (each run consumes a fraction of a percent of it);
the small one is generated afresh for each run.
"""

from __future__ import annotations

import asyncio

from bench import seeding, wfjobs
from bench.acquisition import measure_rate
from bench.config import BenchConfig
from bench.results import Row, Target

DEFINITION = "bench"


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    server = config.server
    dsn = server.dsn(wfjobs.DATABASE)
    window = min(sizes.acquisition_window, sizes.backlog_small * 4 // 5)
    rates: dict[str, list[float]] = {"small": [], "large": []}
    note = ""
    try:
        server.recreate_database(wfjobs.DATABASE)
        wfjobs.Coordinator(server).migrate()
        for run_index in range(config.runs):
            seeding.delete_jobs(dsn, definition_id=DEFINITION)
            seeding.insert_backlog(dsn, seeding.Backlog(sizes.backlog_small, tenants=10,
                                                        definition_id=DEFINITION))
            rate = await measure_rate(server, window=window, concurrency=sizes.worker_concurrency)
            rates["small"].append(rate)
            print(f"  backlog run {run_index + 1} ({sizes.backlog_small:,}): {rate:,.0f} jobs/s",
                  flush=True)
        seeding.delete_jobs(dsn, definition_id=DEFINITION)
        seconds = seeding.insert_backlog(dsn, seeding.Backlog(sizes.backlog_large, tenants=10,
                                                              definition_id=DEFINITION))
        print(f"  backlog: seeded {sizes.backlog_large:,} jobs in {seconds:.0f} s", flush=True)
        for run_index in range(config.runs):
            rate = await measure_rate(server, window=window, concurrency=sizes.worker_concurrency)
            rates["large"].append(rate)
            print(f"  backlog run {run_index + 1} ({sizes.backlog_large:,}): {rate:,.0f} jobs/s",
                  flush=True)
        note = f"10 tenants; {window:,} starts timed, rate over 10–90 %"
    except Exception as exc:  # reported in the table
        note = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"  backlog {note}", flush=True)
    return [Row(
        figure=(f"acquisition throughput with {sizes.backlog_large:,} pending jobs "
                f"÷ with {sizes.backlog_small:,}"),
        unit="jobs/s", ours=rates["large"], comparison=rates["small"],
        comparison_name=f"{sizes.backlog_small:,} pending", target=Target.ratio_at_least(
            0.8, "ratio ≥ 0.8"), note=note)]
