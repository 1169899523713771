"""The latency figure's anatomy: where a single enqueued job's time goes, stage by stage.

Timestamps (wall clock, ns; every process shares the machine's clock):

- `client_send`, `client_answer`: the bench, just before it sends the
  `Enqueue` and when the answer arrives (kept by `StageClock`);
- `received` … `stream_write`: the coordinator, with `WFJOBS_STAGE_LOG` set
  (`coordinator.telemetry.stages` names each stage and what it waits for);
- `received_by_worker`: the worker SDK, when the job's batch arrives;
- `handler_start`: the bench handler's start record (`bench.recording`).

Each step's duration is the difference of two consecutive stages of one job;
the table shows the p50 and p99 over the jobs of a run that have both.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from bench.recording import StartRecord

# How often the coordinator's stage log is written (coordinator.telemetry.stages).
FLUSH_WAIT_S = 0.1

# (from stage, to stage, what the step is; "wait" names a queue or timer).
STEPS: tuple[tuple[str, str, str], ...] = (
    (
        "client_send",
        "received",
        "client → servicer: gRPC client and server, interceptors, request decoding",
    ),
    ("received", "flush", "wait: group commit queue (enqueues behind the insert in flight)"),
    ("flush", "store_thread", "hand-off to a store thread (thread pool queue)"),
    ("store_thread", "committed", "insert statement and commit (SQLAlchemy, psycopg, PostgreSQL)"),
    ("committed", "resumed", "hand-off back to the event loop"),
    (
        "resumed",
        "stream_write",
        "to the worker stream (direct dispatch, or wait: a dispatcher pass)",
    ),
    ("stream_write", "received_by_worker", "gRPC write, network, worker SDK receive"),
    ("received_by_worker", "handler_start", "worker SDK: context, scheduling, handler call"),
    ("client_send", "handler_start", "end to end"),
    ("client_send", "client_answer", "the Enqueue round trip, as the client sees it"),
)


class StageClock:
    """The bench's own stages of each job: send and answer times by job id."""

    def __init__(self) -> None:
        self.stamps: dict[str, dict[str, int]] = defaultdict(dict)

    @staticmethod
    def now() -> int:
        return time.time_ns()

    def note(self, job_id: str, sent_ns: int) -> None:
        self.stamps[job_id]["client_send"] = sent_ns
        self.stamps[job_id]["client_answer"] = time.time_ns()


def read_stage_files(prefix: Path) -> dict[str, dict[str, int]]:
    """Every `job_id stage ns` line of the processes' stage logs under `prefix`."""
    stamps: dict[str, dict[str, int]] = defaultdict(dict)
    for path in prefix.parent.glob(prefix.name + ".*"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                # A job seen twice at one stage (a retried write) keeps its first time.
                stamps[parts[0]].setdefault(parts[1], int(parts[2]))
    return stamps


def merge(
    clock: StageClock, logged: dict[str, dict[str, int]], starts: Iterable[StartRecord]
) -> dict[str, dict[str, int]]:
    jobs: dict[str, dict[str, int]] = defaultdict(dict)
    for source in (clock.stamps, logged):
        for job_id, stages in source.items():
            jobs[job_id].update(stages)
    for record in starts:
        if record.job_id != "-":
            jobs[record.job_id]["handler_start"] = record.start_ns
    return jobs


def _nearest_rank(sorted_values: Sequence[float], fraction: float) -> float:
    rank = max(1, min(len(sorted_values), round(fraction * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


def step_percentiles(jobs: dict[str, dict[str, int]]) -> dict[str, tuple[float, float, int]]:
    """Step (`from→to`) → (p50 ms, p99 ms, jobs measured)."""
    out: dict[str, tuple[float, float, int]] = {}
    for start, end, _ in STEPS:
        values = sorted((s[end] - s[start]) / 1e6 for s in jobs.values() if start in s and end in s)
        if values:
            out[f"{start}→{end}"] = (
                _nearest_rank(values, 0.5),
                _nearest_rank(values, 0.99),
                len(values),
            )
    return out


def render(runs: Sequence[dict[str, tuple[float, float, int]]], title: str) -> str:
    """A Markdown table of the steps: the median over runs of each step's p50 and p99."""
    if not runs:
        return ""
    lines = [
        f"### {title}",
        "",
        "| step | what it is | p50 ms | p99 ms | jobs |",
        "|---|---|---|---|---|",
    ]
    for start, end, what in STEPS:
        key = f"{start}→{end}"
        measured = [r[key] for r in runs if key in r]
        if not measured:
            lines.append(f"| {key} | {what} | — | — | 0 |")
            continue
        p50 = sorted(m[0] for m in measured)[len(measured) // 2]
        p99 = sorted(m[1] for m in measured)[len(measured) // 2]
        lines.append(f"| {key} | {what} | {p50:.2f} | {p99:.2f} | {measured[0][2]} |")
    lines.append("")
    lines.append(
        "Median over runs of each step's percentile; percentiles of steps do not add up "
        "to the end-to-end percentile. Stage lines are kept in memory and written every "
        "100 ms; the quoted latency comes from the uninstrumented runs."
    )
    return "\n".join(lines)
