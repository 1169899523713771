"""Figure: acquisition throughput with 10,000 ordering keys × 100 jobs ÷ the same jobs unkeyed.

The keyed case holds `ordering_keys × ordering_jobs_per_key` pending jobs
enqueued key by key (a key's jobs consecutive in id order, the keys
round-robin over ten tenants); the baseline holds as many jobs without
ordering keys, over the same ten tenants. Both are seeded once, stored as
enqueue stores them (`bench.seeding`), and each run times the same number of
starts on a fresh coordinator (`bench.acquisition.measure_rate`). Only the
head of each key can start, so the keyed case starts each key's jobs one at
a time; what the ratio shows is whether finding those heads costs more when
every key has a long queue behind its head. The cases live in two databases
and alternate run by run.
"""

from __future__ import annotations

import asyncio

from bench import seeding, wfjobs
from bench.acquisition import measure_rate
from bench.config import BenchConfig
from bench.results import Row, Target

DEFINITION = "bench"
TENANTS = 10
KEYED_DATABASE = "wfjobs_bench_ordering"
PLAIN_DATABASE = "wfjobs_bench_unordered"


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    server = config.server
    keys, per_key = sizes.ordering_keys, sizes.ordering_jobs_per_key
    total = keys * per_key
    # At most a fifth of the keys' jobs run, so every key keeps a long queue.
    window = min(sizes.acquisition_window, total // 5)
    rates: dict[str, list[float]] = {"keyed": [], "plain": []}
    note = ""
    try:
        for database, per in ((KEYED_DATABASE, per_key), (PLAIN_DATABASE, 0)):
            server.recreate_database(database)
            wfjobs.Coordinator(server, database).migrate()
            seconds = seeding.insert_backlog(server.dsn(database), seeding.Backlog(
                total, tenants=TENANTS, definition_id=DEFINITION, jobs_per_key=per))
            print(f"  ordering: seeded {total:,} jobs ({'keyed' if per else 'unkeyed'}) "
                  f"in {seconds:.0f} s", flush=True)
        for run_index in range(config.runs):
            for case, database in (("keyed", KEYED_DATABASE), ("plain", PLAIN_DATABASE)):
                rate = await measure_rate(server, database=database, window=window,
                                          concurrency=sizes.worker_concurrency)
                rates[case].append(rate)
                print(f"  ordering run {run_index + 1} ({case}): {rate:,.0f} jobs/s", flush=True)
        note = (f"{keys:,} keys × {per_key} jobs enqueued key by key, {TENANTS} tenants; "
                f"{window:,} starts timed, rate over 10–90 %")
    except Exception as exc:  # reported in the table
        note = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"  ordering {note}", flush=True)
    finally:
        for database in (KEYED_DATABASE, PLAIN_DATABASE):
            server.drop_database(database)
    return [Row(
        figure=(f"acquisition throughput with {keys:,} ordering keys × {per_key} jobs "
                f"÷ {total:,} unkeyed jobs"),
        unit="jobs/s", ours=rates["keyed"], comparison=rates["plain"],
        comparison_name=f"{total:,} unkeyed", target=Target.ratio_at_least(0.8, "ratio ≥ 0.8"),
        note=note)]
