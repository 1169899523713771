"""Sizes and knobs of every figure, full and `--quick`.

The full sizes are SPEC §11's. Quick sizes keep every figure under ~20 s (the
held-snapshot figure: one minute per system) so a `--quick` run of all
figures stays within a few minutes; they are a smoke check of the harness,
not numbers to quote.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.database import PostgresServer


@dataclass(frozen=True)
class Sizes:
    """Workload sizes.

    Attributes:
        throughput_jobs: Jobs per end-to-end throughput run (ours and PgQueuer).
        procrastinate_jobs: Jobs per Procrastinate run (it is ~40× slower; its rate is what counts).
        enqueue_batch: Jobs per enqueue call.
        worker_concurrency: Handler slots per workflow-jobs worker process.
        latency_rate: Offered load of the latency figure, jobs/s.
        latency_seconds: How long the load is offered.
        paused_jobs: Paused jobs present in the "paused" acquisition figure.
        backlog_large: Pending jobs in the large case of the backlog figure.
        backlog_small: Pending jobs in the small case of the backlog figure.
        ordering_keys: Ordering keys in the keyed case of the ordering figure.
        ordering_jobs_per_key: Pending jobs of each of those keys.
        acquisition_window: Completions timed in the acquisition figures (after a warm-up tenth).
        fairness_big: Jobs of the one big tenant.
        fairness_small: Jobs of each of the nine small tenants.
        rate_limit_rate: The limit (starts per second) of the rate-limit accuracy figure.
        rate_limit_seconds: How long the rate-limit accuracy figure runs.
        idle_seconds: Length of the idle-cost window.
        memory_workers: Connected workers in the memory figure.
        memory_backlog: Pending jobs in the memory figure.
        memory_seconds: How long the memory figure runs its workers.
        snapshot_rate: Offered load of the held-snapshot figure, jobs/s.
        snapshot_seconds: How long the held-snapshot load is offered.
        snapshot_hold_s: How long the other session holds its snapshot each time.
        snapshot_gap_s: Pause between two holds (the snapshot is released).
        snapshot_interval_s: Length of each reported interval of the held-snapshot figure.
    """

    throughput_jobs: int = 50_000
    procrastinate_jobs: int = 5_000
    enqueue_batch: int = 1_000
    worker_concurrency: int = 200
    latency_rate: int = 500
    latency_seconds: float = 20.0
    paused_jobs: int = 1_000_000
    backlog_large: int = 5_000_000
    backlog_small: int = 10_000
    ordering_keys: int = 10_000
    ordering_jobs_per_key: int = 100
    acquisition_window: int = 20_000
    fairness_big: int = 100_000
    fairness_small: int = 2_000
    rate_limit_rate: int = 500
    rate_limit_seconds: float = 20.0
    idle_seconds: float = 30.0
    memory_workers: int = 200
    memory_backlog: int = 1_000_000
    memory_seconds: float = 30.0
    snapshot_rate: int = 1_000
    snapshot_seconds: float = 600.0
    snapshot_hold_s: float = 120.0
    snapshot_gap_s: float = 5.0
    snapshot_interval_s: float = 60.0


QUICK_SIZES = Sizes(
    throughput_jobs=5_000,
    procrastinate_jobs=500,
    latency_seconds=4.0,
    paused_jobs=100_000,
    backlog_large=200_000,
    backlog_small=5_000,
    ordering_keys=1_000,
    ordering_jobs_per_key=50,
    acquisition_window=3_000,
    fairness_big=10_000,
    fairness_small=400,
    rate_limit_seconds=5.0,
    idle_seconds=6.0,
    memory_workers=200,
    memory_backlog=50_000,
    memory_seconds=6.0,
    snapshot_seconds=60.0,
    snapshot_hold_s=20.0,
    snapshot_interval_s=10.0,
)


@dataclass(frozen=True)
class BenchConfig:
    """What one `python -m bench` invocation runs.

    Attributes:
        runs: Runs per figure; the table shows the median.
        quick: Reduced sizes (see QUICK_SIZES).
        sizes: The sizes in force.
        server: The PostgreSQL to use.
    """

    runs: int = 3
    quick: bool = False
    sizes: Sizes = field(default_factory=Sizes)
    server: PostgresServer = field(default_factory=PostgresServer.from_environment)
