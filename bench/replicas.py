"""Figure: two coordinators on one PostgreSQL beside one.

Both cases are the throughput figure's run (`bench.throughput.measure_once`:
N no-op jobs enqueued in batches while two worker processes run them) and the
latency figure's open-loop run (`bench.latency.measure_ours`: single
`Enqueue` calls at the latency rate, enqueue→handler-start per job). With two
coordinators, both serve the same bench database, worker process i connects
to coordinator i mod 2, and the enqueue batches (or single sends) go to the
coordinators in turn, so every job may be enqueued on one replica and run
from the other. The baseline is one coordinator with both worker processes,
in the same run; runs of the two cases are interleaved.
"""

from __future__ import annotations

import asyncio

from bench import latency
from bench.config import BenchConfig
from bench.cpu import BACKENDS
from bench.results import Row, Target
from bench.throughput import COORDINATOR, TOTAL, WORKERS, measure_once
from bench.wfjobs import WorkflowJobsSystem

WORKER_PROCESSES = 2
CASES = (2, 1)  # coordinators; the first is "ours", the second the baseline
SPEC_TARGET = "reported, with p99 latency"


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    rate: dict[int, list[float]] = {n: [] for n in CASES}
    cpu: dict[int, list[dict[str, float]]] = {n: [] for n in CASES}
    lat: dict[int, dict[str, list[float]]] = {n: {"p50": [], "p99": []} for n in CASES}
    errors: dict[str, str] = {}
    for run_index in range(config.runs):
        for n in CASES:
            key = f"{n} coordinator{'s' if n > 1 else ''}"
            try:
                measured = await measure_once(
                    WorkflowJobsSystem(
                        config.server, worker_concurrency=sizes.worker_concurrency, coordinators=n
                    ),
                    processes=WORKER_PROCESSES,
                    jobs=sizes.throughput_jobs,
                    batch=sizes.enqueue_batch,
                    timeout_s=max(120.0, sizes.throughput_jobs / 100),
                )
                rate[n].append(measured.rate)
                cpu[n].append(measured.cpu_us)
                print(
                    f"  replicas run {run_index + 1} throughput, {key}: {measured.rate:,.0f} jobs/s,"
                    f" CPU {measured.cpu_us[TOTAL]:.0f} µs/job",
                    flush=True,
                )
            except Exception as exc:  # reported in the table
                errors.setdefault(f"throughput, {key}", _error(exc))
                print(f"  replicas throughput, {key} failed: {_error(exc)}", flush=True)
            try:
                samples, note, _ = await latency.measure_ours(
                    config.server,
                    sizes.latency_rate,
                    sizes.latency_seconds,
                    sizes.worker_concurrency,
                    coordinators=n,
                )
                if samples:
                    lat[n]["p50"].append(latency.percentile(samples, 0.50))
                    lat[n]["p99"].append(latency.percentile(samples, 0.99))
                    print(
                        f"  replicas run {run_index + 1} latency, {key}: "
                        f"p50 {lat[n]['p50'][-1]:.1f} ms, p99 {lat[n]['p99'][-1]:.1f} ms ({note})",
                        flush=True,
                    )
                if "only" in note or "failed" in note:
                    errors.setdefault(f"latency, {key}", note)
            except Exception as exc:  # reported in the table
                errors.setdefault(f"latency, {key}", _error(exc))
                print(f"  replicas latency, {key} failed: {_error(exc)}", flush=True)

    two, one = CASES
    baseline = "one coordinator"
    target = Target.reported(SPEC_TARGET)
    head = f"two coordinators on one PostgreSQL ÷ one, {WORKER_PROCESSES} worker processes spread"
    note = "; ".join(f"{k} failed: {v}" for k, v in errors.items())
    rows = [
        Row(
            figure=f"{head}: throughput, {sizes.throughput_jobs // 1000}k jobs",
            unit="jobs/s",
            ours=rate[two],
            comparison=rate[one],
            comparison_name=baseline,
            target=target,
            note=note or "ratio = two coordinators ÷ one",
        )
    ]
    for name in ("p50", "p99"):
        rows.append(
            Row(
                figure=f"{head}: enqueue→handler-start latency at {sizes.latency_rate} jobs/s, {name}",
                unit="ms",
                ours=lat[two][name],
                comparison=lat[one][name],
                comparison_name=baseline,
                target=target if name == "p99" else None,
                higher_is_better=False,
            )
        )
    for what in (COORDINATOR, WORKERS, BACKENDS, TOTAL):
        label = "coordinators (both)" if what == COORDINATOR else what
        rows.append(
            Row(
                figure=f"{head}: CPU per job, {label}",
                unit="µs",
                ours=[c[what] for c in cpu[two]],
                comparison=[c[what] for c in cpu[one]],
                comparison_name=baseline,
                higher_is_better=False,
            )
        )
    return rows
