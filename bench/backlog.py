"""Figure 4: acquisition throughput with 5,000,000 pending jobs ÷ with 10,000.

Both cases spread their pending jobs round-robin over ten tenants of equal
weight (one job type, one definition) and time the same number of starts;
only the size of the backlog differs. The large backlog is generated once
and shared by the runs (each run consumes a fraction of a percent of it);
the small one is generated afresh for each run. The cases live in two
databases and alternate run by run.
"""

from __future__ import annotations

import asyncio

from bench import seeding, wfjobs
from bench.acquisition import measure_rate
from bench.config import BenchConfig
from bench.results import Row, Target

DEFINITION = "bench"
SMALL_DATABASE = wfjobs.DATABASE
LARGE_DATABASE = "wfjobs_bench_large"


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    server = config.server
    window = min(sizes.acquisition_window, sizes.backlog_small * 4 // 5)
    rates: dict[str, list[float]] = {"small": [], "large": []}
    note = ""
    try:
        for database in (SMALL_DATABASE, LARGE_DATABASE):
            server.recreate_database(database)
            wfjobs.Coordinator(server, database).migrate()
        seconds = seeding.insert_backlog(
            server.dsn(LARGE_DATABASE),
            seeding.Backlog(sizes.backlog_large, tenants=10, definition_id=DEFINITION),
        )
        print(f"  backlog: seeded {sizes.backlog_large:,} jobs in {seconds:.0f} s", flush=True)
        for run_index in range(config.runs):
            small_dsn = server.dsn(SMALL_DATABASE)
            seeding.delete_jobs(small_dsn, definition_id=DEFINITION)
            seeding.insert_backlog(
                small_dsn,
                seeding.Backlog(sizes.backlog_small, tenants=10, definition_id=DEFINITION),
            )
            for case, database, size in (
                ("small", SMALL_DATABASE, sizes.backlog_small),
                ("large", LARGE_DATABASE, sizes.backlog_large),
            ):
                rate = await measure_rate(
                    server, database=database, window=window, concurrency=sizes.worker_concurrency
                )
                rates[case].append(rate)
                print(f"  backlog run {run_index + 1} ({size:,}): {rate:,.0f} jobs/s", flush=True)
        note = f"10 tenants; {window:,} starts timed, rate over 10–90 %"
    except Exception as exc:  # reported in the table
        note = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"  backlog {note}", flush=True)
    finally:
        server.drop_database(LARGE_DATABASE)
    return [
        Row(
            figure=(
                f"acquisition throughput with {sizes.backlog_large:,} pending jobs "
                f"÷ with {sizes.backlog_small:,}"
            ),
            unit="jobs/s",
            ours=rates["large"],
            comparison=rates["small"],
            comparison_name=f"{sizes.backlog_small:,} pending",
            target=Target.ratio_at_least(0.8, "ratio ≥ 0.8"),
            note=note,
        )
    ]
