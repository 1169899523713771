"""Figure: end-to-end throughput with a TypeScript worker process beside a Python one.

The run of the throughput figure (`bench.throughput.measure_once`: workers
ready, the clock starts, N no-op jobs enqueued in batches while the workers
run them, the clock stops at N completed), with one worker process: the
TypeScript SDK's (`sdks/typescript/bench/noop-worker.ts`, built by
`make install`) or the Python SDK's (`bench.worker_proc`), the same no-op
handler and concurrency, runs interleaved.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from bench.config import BenchConfig
from bench.processes import ManagedProcess
from bench.results import Row
from bench.throughput import measure_once
from bench.wfjobs import WorkflowJobsSystem

WORKER_JS = Path(__file__).resolve().parent.parent / "sdks/typescript/dist/bench/noop-worker.js"


class TypeScriptWorkers(WorkflowJobsSystem):
    """workflow-jobs with TypeScript worker processes."""

    def start_workers(self, processes: int, deadline_s: float) -> list[ManagedProcess]:
        assert self.coordinators
        node = shutil.which("node")
        if node is None or not WORKER_JS.exists():
            raise FileNotFoundError(f"needs Node.js and {WORKER_JS} (make install builds it)")
        return [
            ManagedProcess(
                f"ts-worker-{i}",
                [
                    node,
                    str(WORKER_JS),
                    "--target",
                    self.coordinators[0].target,
                    "--concurrency",
                    str(self.worker_concurrency),
                ],
                deadline_s=deadline_s,
            )
            for i in range(processes)
        ]


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    sizes = config.sizes
    jobs = sizes.throughput_jobs
    cases = {
        "typescript": TypeScriptWorkers(config.server, worker_concurrency=sizes.worker_concurrency),
        "python": WorkflowJobsSystem(config.server, worker_concurrency=sizes.worker_concurrency),
    }
    samples: dict[str, list[float]] = {key: [] for key in cases}
    errors: dict[str, str] = {}
    for run_index in range(config.runs):
        for key, system in cases.items():
            if key in errors:
                continue
            try:
                measured = await measure_once(
                    system,
                    processes=1,
                    jobs=jobs,
                    batch=sizes.enqueue_batch,
                    timeout_s=max(120.0, jobs / 100),
                )
            except Exception as exc:  # reported in the table; the bench goes on
                errors[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                print(f"  typescript {key}: {errors[key]}", flush=True)
                continue
            samples[key].append(measured.rate)
            print(
                f"  typescript run {run_index + 1} {key} worker: {measured.rate:,.0f} jobs/s",
                flush=True,
            )
    note = "; ".join(f"{k} failed: {v}" for k, v in errors.items())
    return [
        Row(
            figure=f"end-to-end throughput, {jobs // 1000}k jobs, 1 TypeScript worker process",
            unit="jobs/s",
            ours=samples["typescript"],
            comparison=samples["python"],
            comparison_name="1 Python worker process",
            note="; ".join(
                filter(
                    None,
                    [
                        f"same no-op handler, {sizes.worker_concurrency} slots, one coordinator",
                        note,
                    ],
                )
            ),
        )
    ]
