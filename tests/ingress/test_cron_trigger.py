"""examples/cron_trigger.py against a real coordinator: a fast schedule, fired
twice over; and two triggers firing every second on both stores, one of them
killed half-way, making exactly one job per tick with none lost."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ingress.harness import Process, free_port, start_coordinator

from wfj_testing import REPO, wait_until
from worker_sdk import AdminClient, JobFilter

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "examples" / "cron_trigger.py"


def _every_second(target: str, workflow: str, start_at: datetime, *more: str) -> list[str]:
    """The example's command line for a trigger firing every second from ``start_at``."""
    return [
        sys.executable,
        str(EXAMPLE),
        "--target",
        target,
        "--cron",
        "* * * * *",
        "--second",
        "*",
        "--job-type",
        "report.tick",
        "--workflow",
        workflow,
        "--start-at",
        start_at.isoformat(),
        *more,
    ]


def test_two_triggers_on_one_schedule_enqueue_one_job_per_fire(tmp_path: Path) -> None:
    coordinator = start_coordinator(
        f"sqlite:///{tmp_path / 'cron.db'}", free_port(), tmp_path / "c.log"
    )
    # Both start firing at the same second, so every fire happens on both: a double fire.
    # Far enough ahead that both have started by then with every core busy.
    start_at = (datetime.now(UTC) + timedelta(seconds=8)).replace(microsecond=0)
    triggers = [
        Process(
            _every_second(coordinator.target, "tick-report", start_at, "--stop-after", "3"),
            tmp_path / f"trigger-{n}.log",
        )
        for n in range(2)
    ]
    try:
        wait_until(lambda: not any(t.alive() for t in triggers), 60, "both triggers to finish")
        fired = [
            line.split()
            for t in triggers
            for line in t.log().splitlines()
            if line.startswith("fired ")
        ]
        assert len(fired) == 6, "\n".join(t.log() for t in triggers)
        with AdminClient(coordinator.target) as admin:
            jobs = list(admin.iter_jobs(JobFilter(job_type="report.tick")))
        fire_times = {f[1] for f in fired}
        assert sorted(j.payload_value()["fire_time"] for j in jobs) == sorted(fire_times)
        assert {j.idempotency_key for j in jobs} == {
            f"schedule:tick-report@{t.replace('+00:00', 'Z')}" for t in fire_times
        }
        assert {j.workflow.definition_id for j in jobs} == {"tick-report"}
        # Each fire time that both triggers saw was enqueued once and found once.
        shared = len(fired) - len(fire_times)
        assert shared >= 1
        assert sum(f[-1] == "existed" for f in fired) == shared
        assert {f[3] for f in fired} == {j.id for j in jobs}
    finally:
        for t in triggers:
            t.stop()
        coordinator.stop()


SCALE = float(os.environ.get("WFJOBS_FAULTS_SCALE", "1"))
# How long both triggers fire every second (one is killed half-way).
TICKS_S = int(12 * SCALE)


@pytest.fixture(params=["sqlite", "postgres"])
def tick_database(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ticks.db'}"
        return
    request.getfixturevalue("pg_database")
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_ticks")
    try:
        yield url
    finally:
        drop()  # type: ignore[operator]


def test_two_triggers_every_second_make_one_job_per_tick_and_a_kill_loses_none(
    tick_database: str, tmp_path: Path
) -> None:
    coordinator = start_coordinator(tick_database, free_port(), tmp_path / "c.log")
    start_at = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=0)
    stop_at = start_at + timedelta(seconds=TICKS_S)

    def trigger(n: int) -> Process:
        return Process(
            _every_second(
                coordinator.target,
                "every-second",
                start_at,
                "--stop-at",
                (stop_at - timedelta(milliseconds=500)).isoformat(),
            ),
            tmp_path / f"ticker-{n}.log",
        )

    survivor, victim = trigger(0), trigger(1)
    try:
        half = start_at + timedelta(seconds=TICKS_S / 2)
        wait_until(lambda: datetime.now(UTC) >= half, TICKS_S + 30, "half of the ticking to pass")
        assert victim.alive(), victim.log()
        victim.kill()  # SIGKILL mid-schedule, maybe mid-enqueue
        wait_until(lambda: not survivor.alive(), TICKS_S + 60, "the surviving trigger to stop")
        fired = [line.split() for line in survivor.log().splitlines() if line.startswith("fired ")]
        victim_fired = [
            line.split() for line in victim.log().splitlines() if line.startswith("fired ")
        ]
        assert victim_fired, victim.log()
        with AdminClient(coordinator.target) as admin:
            jobs = list(admin.iter_jobs(JobFilter(job_type="report.tick")))
        ticks = [j.payload_value()["fire_time"] for j in jobs]
        # One job per tick: no tick has two jobs, and every second of the run has its job.
        assert len(ticks) == len(set(ticks))
        expected = {(start_at + timedelta(seconds=s)).isoformat() for s in range(TICKS_S)}
        assert set(ticks) == expected, (sorted(expected - set(ticks)), survivor.log())
        # Both triggers fired the ticks they shared; each found the other's job or made it.
        shared = {f[1] for f in fired} & {f[1] for f in victim_fired}
        assert shared
        by_tick = {j.payload_value()["fire_time"]: j.id for j in jobs}
        for f in fired + victim_fired:
            if len(f) >= 4:  # a complete line: "fired TIME job ID new|already existed"
                assert by_tick[f[1]] == f[3]
    finally:
        survivor.stop()
        victim.stop()
        coordinator.stop()
