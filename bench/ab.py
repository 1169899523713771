"""Figure (on request only): the current build beside a variant of it, in the same run.

    BENCH_AB='NAME=VALUE[,NAME=VALUE...]' python -m bench ab [--runs N]

The variant is the same code with extra environment for its coordinators
(e.g. `WFJOBS_PLAN_CACHE_MODE=auto`, a lever switched off). Each run measures,
for the default and then the variant: end-to-end throughput (two worker
processes, as `bench.throughput`), the unary Enqueue round trip p50
(`bench.unary`) and enqueue→handler-start p50 at the latency figure's load
(`bench.latency`). The table shows medians and default ÷ variant; the last
run's per-statement cost of each throughput case goes under it (where the
server has pg_stat_statements: `--private-cluster`).
"""

from __future__ import annotations

import asyncio
import os

from bench import latency, unary, wfjobs
from bench.config import BenchConfig
from bench.cpu import BACKENDS
from bench.results import Row
from bench.throughput import COORDINATOR, measure_once
from bench.wfjobs import WorkflowJobsSystem

DEFAULT, VARIANT = "default", "variant"


def _variant_env() -> dict[str, str]:
    text = os.environ.get("BENCH_AB", "")
    pairs = [p.split("=", 1) for p in text.split(",") if p.strip()]
    if not pairs or any(len(p) != 2 for p in pairs):
        raise ValueError("set BENCH_AB to NAME=VALUE[,NAME=VALUE...]: the variant's environment")
    return {k.strip(): v.strip() for k, v in pairs}


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    variant = _variant_env()
    sizes = config.sizes
    figures = (
        "throughput",
        "coordinator CPU per job",
        "PostgreSQL CPU per job",
        "unary p50",
        "latency p50",
    )
    got: dict[str, dict[str, list[float]]] = {f: {DEFAULT: [], VARIANT: []} for f in figures}
    for run_index in range(config.runs):
        for case, env in ((DEFAULT, {}), (VARIANT, variant)):
            wfjobs.COORDINATOR_ENV.clear()
            wfjobs.COORDINATOR_ENV.update(env)
            try:
                title = (
                    f"Per-statement cost: A/B throughput, {case} (run {run_index + 1})"
                    if run_index == config.runs - 1
                    else None
                )
                measured = await measure_once(
                    WorkflowJobsSystem(config.server, sizes.worker_concurrency),
                    processes=2,
                    jobs=sizes.throughput_jobs,
                    batch=sizes.enqueue_batch,
                    timeout_s=max(120.0, sizes.throughput_jobs / 100),
                    statements_title=title,
                )
                got["throughput"][case].append(measured.rate)
                got["coordinator CPU per job"][case].append(measured.cpu_us[COORDINATOR])
                got["PostgreSQL CPU per job"][case].append(measured.cpu_us[BACKENDS])
                times = await unary.measure_enqueue(config, 300 if config.quick else 1000)
                got["unary p50"][case].append(latency.percentile(times, 0.5))
                samples, _ = await latency.measure_ours(
                    config.server,
                    sizes.latency_rate,
                    sizes.latency_seconds,
                    sizes.worker_concurrency,
                )
                got["latency p50"][case].append(latency.percentile(samples, 0.5))
            finally:
                wfjobs.COORDINATOR_ENV.clear()
            print(
                f"  ab run {run_index + 1} {case}: "
                + ", ".join(f"{f} {got[f][case][-1]:,.2f}" for f in figures),
                flush=True,
            )
    name = "variant " + ",".join(f"{k}={v}" for k, v in variant.items())
    units = {
        "throughput": "jobs/s",
        "coordinator CPU per job": "µs",
        "PostgreSQL CPU per job": "µs",
        "unary p50": "ms",
        "latency p50": "ms",
    }
    return [
        Row(
            figure=f"A/B: {f}",
            unit=units[f],
            ours=got[f][DEFAULT],
            comparison=got[f][VARIANT],
            comparison_name=name,
            higher_is_better=f == "throughput",
        )
        for f in figures
    ]
