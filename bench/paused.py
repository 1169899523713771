"""Figure 3: acquisition throughput with 1,000,000 paused jobs present ÷ with none.

Both cases hold the same eligible jobs (tenant `tenant-0`, definition
`live`) and the same pause on definition `paused` of that tenant; the
measured case also holds 1,000,000 PENDING jobs of the paused definition —
same tenant, same job type, older than every eligible job, so a queue that
scans or re-checks paused rows pays for them. SPEC §5.2: the cost of
acquisition does not grow with the number of paused jobs. The cases live in
two databases and alternate run by run.
"""

from __future__ import annotations

import asyncio

from bench import seeding, wfjobs
from bench.acquisition import measure_rate
from bench.config import BenchConfig
from bench.results import Row, Target

TENANT = "tenant-0"
LIVE = "live"
PAUSED = "paused"
DATABASES = {"none": wfjobs.DATABASE, "paused": "wfjobs_bench_large"}


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    server = config.server
    window = sizes.acquisition_window
    live = seeding.Backlog(window, tenants=1, definition_id=LIVE, age_s=60)
    paused = seeding.Backlog(sizes.paused_jobs, tenants=1, definition_id=PAUSED, age_s=7200)
    rates: dict[str, list[float]] = {"none": [], "paused": []}
    note = ""
    try:
        for database in DATABASES.values():
            server.recreate_database(database)
            wfjobs.Coordinator(server, database).migrate()
        seconds = seeding.insert_backlog(server.dsn(DATABASES["paused"]), paused)
        print(f"  paused: seeded {sizes.paused_jobs:,} paused jobs in {seconds:.0f} s", flush=True)
        for run_index in range(config.runs):
            for case, database in DATABASES.items():
                dsn = server.dsn(database)
                seeding.delete_jobs(dsn, definition_id=LIVE)
                seeding.insert_backlog(dsn, live)
                rate = await measure_rate(
                    server,
                    database=database,
                    window=window,
                    concurrency=sizes.worker_concurrency,
                    pause=(TENANT, PAUSED),
                )
                rates[case].append(rate)
                print(f"  paused run {run_index + 1} ({case}): {rate:,.0f} jobs/s", flush=True)
        note = f"{window:,} eligible jobs, rate over starts 10–90 %"
    except Exception as exc:  # reported in the table
        note = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"  paused {note}", flush=True)
    finally:
        server.drop_database(DATABASES["paused"])
    return [
        Row(
            figure=f"acquisition throughput with {sizes.paused_jobs:,} paused jobs ÷ with none",
            unit="jobs/s",
            ours=rates["paused"],
            comparison=rates["none"],
            comparison_name="no paused jobs",
            target=Target.ratio_at_least(0.9, "ratio ≥ 0.9"),
            note=note,
        )
    ]
