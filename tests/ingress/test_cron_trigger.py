"""examples/cron_trigger.py against a real coordinator: a fast schedule, fired twice over."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ingress.harness import Process, free_port, start_coordinator

from wfj_testing import REPO, wait_until
from worker_sdk import AdminClient, JobFilter

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "examples" / "cron_trigger.py"


def test_two_triggers_on_one_schedule_enqueue_one_job_per_fire(tmp_path: Path) -> None:
    coordinator = start_coordinator(f"sqlite:///{tmp_path / 'cron.db'}", free_port(), tmp_path / "c.log")
    # Both start firing at the same second, so every fire happens on both: a double fire.
    # Far enough ahead that both have started by then with every core busy.
    start_at = (datetime.now(UTC) + timedelta(seconds=8)).replace(microsecond=0)
    triggers = [
        Process(
            [
                sys.executable,
                str(EXAMPLE),
                "--target",
                coordinator.target,
                "--cron",
                "* * * * *",
                "--second",
                "*",
                "--job-type",
                "report.tick",
                "--workflow",
                "tick-report",
                "--start-at",
                start_at.isoformat(),
                "--stop-after",
                "3",
            ],
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
        assert {j.idempotency_key for j in jobs} == {f"tick-report:{t}" for t in fire_times}
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
