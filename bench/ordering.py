"""Figure: acquisition throughput behind long ordering-key queues.

Three tables of `ordering_keys × ordering_jobs_per_key` pending jobs each,
over the same ten tenants:

- *long*: `ordering_keys` keys of `ordering_jobs_per_key` jobs (10,000 × 100);
- *short*: ten times the keys with a tenth of the jobs each (100,000 × 10);
- *unkeyed*: as many jobs without ordering keys.

Keyed jobs are enqueued key by key (a key's jobs consecutive in id order, the
keys round-robin over the tenants) and stored as enqueue stores them
(`bench.seeding`: every job but a key's first held behind its key). Each run
times the same number of starts on a fresh coordinator
(`bench.acquisition.measure_rate`); the cases alternate run by run.

Two rows. *Long ÷ short* is what the ordering design promises, judged at ≥
0.8 like the backlog figure: only a key's head can start, and the ready
index holds only heads, so finding them must not cost more when every key
has a long queue behind its head. *Long ÷ unkeyed* is the price of ordering
itself, reported like the other costs of a feature (rate limits, the event
log): a keyed job is written three times (its release when the job ahead of
it ends, its lease, its outcome) where an unkeyed one is written twice, its
lease re-checks its key, and the heads of keys enqueued key by key lie on as
many heap pages as there are heads, where unkeyed jobs are leased a page of
neighbours at a time.

The bench's PostgreSQL runs without autovacuum (the test machines' setting),
so each run starts after a `VACUUM` of its table, as autovacuum would leave
it: otherwise every run would walk the dead rows and index entries of all
the runs before it, which no production server keeps.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bench import seeding, wfjobs
from bench.acquisition import measure_rate
from bench.config import BenchConfig
from bench.database import PostgresServer
from bench.results import Row, Target

DEFINITION = "bench"
TENANTS = 10
# How many times more keys (and fewer jobs per key) the short case has.
SHORTER = 10


@dataclass(frozen=True)
class Case:
    name: str
    database: str
    jobs_per_key: int  # 0: no ordering keys


def cases(per_key: int) -> list[Case]:
    return [
        Case("long", "wfjobs_bench_ordering", per_key),
        Case("short", "wfjobs_bench_ordering_short", max(1, per_key // SHORTER)),
        Case("unkeyed", "wfjobs_bench_unordered", 0),
    ]


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


def _vacuum(server: PostgresServer, database: str) -> None:
    with server.connect(database) as conn:
        conn.execute(f"VACUUM {seeding.JOBS_TABLE}")


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    server = config.server
    keys, per_key = sizes.ordering_keys, sizes.ordering_jobs_per_key
    total = keys * per_key
    # At most a fifth of the jobs run, so every key keeps a queue.
    window = min(sizes.acquisition_window, total // 5)
    figure_cases = cases(per_key)
    rates: dict[str, list[float]] = {case.name: [] for case in figure_cases}
    note = ""
    try:
        for case in figure_cases:
            server.recreate_database(case.database)
            wfjobs.Coordinator(server, case.database).migrate()
            seconds = seeding.insert_backlog(
                server.dsn(case.database),
                seeding.Backlog(
                    total, tenants=TENANTS, definition_id=DEFINITION, jobs_per_key=case.jobs_per_key
                ),
            )
            print(f"  ordering: seeded {total:,} jobs ({case.name}) in {seconds:.0f} s", flush=True)
        for run_index in range(config.runs):
            for case in figure_cases:
                _vacuum(server, case.database)
                rate = await measure_rate(
                    server,
                    database=case.database,
                    window=window,
                    concurrency=sizes.worker_concurrency,
                )
                rates[case.name].append(rate)
                print(
                    f"  ordering run {run_index + 1} ({case.name}): {rate:,.0f} jobs/s", flush=True
                )
        note = (
            f"enqueued key by key, {TENANTS} tenants; {window:,} starts timed, "
            "rate over 10–90 %; VACUUM before each run"
        )
    except Exception as exc:  # reported in the table
        note = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        print(f"  ordering {note}", flush=True)
    finally:
        for case in figure_cases:
            server.drop_database(case.database)
    long, short, _ = figure_cases
    short_keys = total // short.jobs_per_key
    return [
        Row(
            figure=(
                f"acquisition throughput with {keys:,} ordering keys × {per_key} jobs "
                f"÷ {short_keys:,} keys × {short.jobs_per_key} jobs"
            ),
            unit="jobs/s",
            ours=rates[long.name],
            comparison=rates[short.name],
            comparison_name=f"{short_keys:,} keys × {short.jobs_per_key}",
            target=Target.ratio_at_least(0.8, "ratio ≥ 0.8"),
            note=note,
        ),
        Row(
            figure=(
                f"acquisition throughput with {keys:,} ordering keys × {per_key} jobs "
                f"÷ {total:,} unkeyed jobs"
            ),
            unit="jobs/s",
            ours=rates[long.name],
            comparison=rates["unkeyed"],
            comparison_name=f"{total:,} unkeyed",
            target=Target.reported("reported"),
            note=note,
        ),
    ]
