"""Processes and checks shared by the fault scenarios.

Every scenario ends with ``check_run``: it reads the attempt history straight
from the database and the workers' execution records, asserts the crash-safety
invariants (SPEC §5.4, §5.12) and prints one summary line::

    jobs=5000 kills=12 re-executions=37 lost=0 duplicates=0

Sizes scale with ``WFJOBS_FAULTS_SCALE`` (default 1; CI runs the default, a
soak run uses e.g. 10).
"""

from __future__ import annotations

import collections
import os
import random
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from coordinator.model import AttemptOutcome, JobStatus
from coordinator.store.base import create_sa_engine
from wfj_testing import ManagedProcess, WorkerProcess, coordinator_args, wait_until
from worker_sdk import JobRequest, SchedulerClient

SCALE = float(os.environ.get("WFJOBS_FAULTS_SCALE", "1"))
WORKER_APP = Path(__file__).resolve().parent / "fault_worker.py"


def scaled(n: int) -> int:
    return max(1, int(n * SCALE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CoordinatorProcess(ManagedProcess):
    """A coordinator subprocess on a fixed port, so it can be killed and restarted in place."""

    def __init__(
        self,
        database_url: str,
        log_dir: Path,
        *,
        port: int | None = None,
        env: dict[str, str] | None = None,
        args: Iterable[str] = (),
        name: str = "coordinator",
    ) -> None:
        self.database_url = database_url
        self.log_dir = log_dir
        self.port = port or free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.env = env
        self.args = list(args)
        self.name = name
        self.starts = 0
        self.start()

    def start(self) -> None:
        self.starts += 1
        command = coordinator_args(
            self.database_url, self.target, "--drain-timeout", "2", *self.args
        )
        self._spawn(command, self.log_dir / f"{self.name}-{self.starts}.log", self.env)
        wait_until(self._listening, 30, f"{self.name} to listen (log: {self.log_path})")

    def _listening(self) -> bool:
        if not self.alive():
            raise AssertionError(f"{self.name} exited: {self.log()[-3000:]}")
        return "listening on" in self.log()

    def log_text(self) -> str:
        return "\n".join(
            (self.log_dir / f"{self.name}-{n}.log").read_text(errors="replace")
            for n in range(1, self.starts + 1)
        )


class FaultWorker(WorkerProcess):
    """``fault_worker.py`` in a subprocess; executions go to ``record``."""

    app = WORKER_APP


class WorkerPool:
    """N worker slots, each a process that can be killed and replaced."""

    def __init__(self, target: str, tmp: Path, size: int, *args: str, name: str = "worker") -> None:
        self.target = target
        self.tmp = tmp
        self.name = name
        self.args = args
        self.started = 0
        self.kills = 0
        self.records: list[Path] = []
        self.workers = [self._spawn() for _ in range(size)]

    def _spawn(self) -> FaultWorker:
        self.started += 1
        n = self.started
        record = self.tmp / f"record-{self.name}-{n}.txt"
        self.records.append(record)
        return FaultWorker(
            self.target,
            record,
            self.tmp / f"{self.name}-{n}.log",
            "--worker-id",
            f"{self.name}-{n}",
            *self.args,
        )

    def kill_one(self, rng: random.Random) -> None:
        """SIGKILL a random worker and start a replacement at once."""
        i = rng.randrange(len(self.workers))
        self.workers[i].kill()
        self.kills += 1
        self.workers[i] = self._spawn()

    def stop(self) -> None:
        for w in self.workers:
            w.stop()


def enqueue_work(
    target: str,
    total: int,
    *,
    ms: int = 5,
    min_ms: int = 0,
    heartbeat_timeout: float = 2.0,
    tenants: int = 4,
) -> list[str]:
    """Enqueue ``total`` ``work`` jobs lasting ``min_ms``..``ms`` each; returns their ids."""
    ids: list[str] = []
    rng = random.Random(total)
    with SchedulerClient(target) as scheduler:
        for first in range(0, total, 500):
            batch = [
                JobRequest(
                    "work",
                    {"n": i, "ms": rng.randint(min_ms, ms)},
                    tenant_id=f"tenant-{i % tenants}",
                    heartbeat_timeout=heartbeat_timeout,
                    max_attempts=100,
                )
                for i in range(first, min(first + 500, total))
            ]
            ids.extend(r.job_id for r in scheduler.enqueue_batch(batch))
    return ids


def count_status(database_url: str, status: JobStatus) -> int:
    engine = create_sa_engine(database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text("SELECT count(*) FROM wfj_jobs WHERE status = :s"), {"s": int(status)}
                ).scalar()
                or 0
            )
    finally:
        engine.dispose()


def wait_all_completed(database_url: str, total: int, timeout: float) -> None:
    wait_until(
        lambda: count_status(database_url, JobStatus.COMPLETED) >= total,
        timeout,
        f"all {total} jobs to complete",
        interval=0.25,
    )


def count_starts(records: Iterable[Path]) -> int:
    """Handler starts recorded so far (cheap enough to poll)."""
    return sum(p.read_bytes().count(b"start ") for p in records if p.exists())


def read_executions(records: Iterable[Path]) -> list[tuple[str, int, str]]:
    """(job id, attempt, worker) for every handler start in the record files."""
    out = []
    for path in records:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[0] == "start":
                out.append((parts[1], int(parts[2]), parts[3]))
    return out


@dataclass
class Summary:
    jobs: int
    kills: int
    re_executions: int
    lost: int
    duplicates: int

    def line(self) -> str:
        return (
            f"jobs={self.jobs} kills={self.kills} re-executions={self.re_executions} "
            f"lost={self.lost} duplicates={self.duplicates}"
        )


_EXPLAINING = {int(AttemptOutcome.LEASE_EXPIRED), int(AttemptOutcome.UNLOCKED)}


def check_run(
    database_url: str, job_ids: list[str], records: Iterable[Path], kills: int, scenario: str
) -> Summary:
    """Assert the crash-safety invariants and print the scenario's summary line.

    * every job is COMPLETED (none lost, none faulted);
    * each job has exactly one COMPLETED attempt (its outcome recorded once);
    * every handler execution is accounted for: the attempt it ran as ended
      COMPLETED, or ended LEASE_EXPIRED / UNLOCKED (the lease was taken away),
      so every re-execution is explained by the attempt history;
    * no attempt ran twice.
    """
    engine = create_sa_engine(database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            statuses = dict(conn.execute(sa.text("SELECT id, status FROM wfj_jobs")).all())
            attempts: dict[str, dict[int, int]] = collections.defaultdict(dict)
            completed = collections.Counter()
            for job_id, number, outcome in conn.execute(
                sa.text("SELECT job_id, number, outcome FROM wfj_job_attempts")
            ):
                attempts[job_id][number] = outcome
                if outcome == int(AttemptOutcome.COMPLETED):
                    completed[job_id] += 1
    finally:
        engine.dispose()
    wanted = set(job_ids)
    lost = sorted(j for j in wanted if statuses.get(j) != int(JobStatus.COMPLETED))
    duplicates = sorted(j for j, n in completed.items() if n > 1)
    executions = read_executions(records)
    runs = collections.Counter((job_id, attempt) for job_id, attempt, _ in executions)
    per_job = collections.Counter(job_id for job_id, _, _ in executions)
    unexplained = []
    for (job_id, attempt), n in runs.items():
        outcome = attempts.get(job_id, {}).get(attempt)
        if n > 1 or (outcome != int(AttemptOutcome.COMPLETED) and outcome not in _EXPLAINING):
            unexplained.append((job_id, attempt, n, outcome))
    summary = Summary(
        jobs=len(wanted),
        kills=kills,
        re_executions=sum(n - 1 for n in per_job.values() if n > 1),
        lost=len(lost),
        duplicates=len(duplicates),
    )
    print(f"\n[{scenario}] {summary.line()}")
    assert not lost, f"{len(lost)} job(s) not COMPLETED, e.g. {lost[:5]}"
    assert not duplicates, f"{len(duplicates)} job(s) with several COMPLETED attempts"
    assert all(completed[j] == 1 for j in wanted), "a job has no COMPLETED attempt"
    assert not unexplained, f"executions not explained by the history: {unexplained[:5]}"
    assert wanted <= set(per_job), "a job completed without any recorded execution"
    return summary


def run_for(seconds: float) -> float:
    """A deadline ``seconds`` from now (monotonic)."""
    return time.monotonic() + seconds
