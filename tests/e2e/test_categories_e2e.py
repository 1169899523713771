"""Job categories end to end: a real coordinator and worker on both stores, driven
through the ``wfjobs`` console script (pause, limits, stats, list by category)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wfj_testing import REPO, read_records, wait_until
from worker_sdk import AdminClient, JobStatus
from worker_sdk.cli.output import scope_text

BIN = Path(sys.executable).parent


def wfjobs(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), WFJOBS_TARGET=target)
    return subprocess.run(
        [str(BIN / "wfjobs"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def wfjobs_json(target: str, *args: str) -> Any:
    out = wfjobs(target, "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _started(worker: Any, job_id: str) -> bool:
    return any(r[0] == "start" and r[1] == job_id for r in read_records(worker.record))


def test_category_pause_limit_and_filters_through_the_cli(
    e2e_database: str, processes: dict[str, Callable[..., Any]], tmp_path: Path
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    target = coordinator.target
    worker = processes["worker"](target)

    paused = wfjobs(target, "pause", "category", "integration", "--reason", "api down")
    assert paused.returncode == 0, paused.stderr
    assert "paused category integration" in paused.stdout
    held = wfjobs_json(target, "enqueue", "noop", "{}", "--category", "integration")["id"]
    free = wfjobs_json(
        target, "enqueue", "noop", "{}", "--category", "maintenance", "--wait", "120s"
    )
    assert free["status"] == "JOB_STATUS_COMPLETED"
    explained = wfjobs(target, "jobs", "explain", held)
    assert "category integration is paused" in explained.stdout, explained.stdout
    with AdminClient(target) as admin:
        assert admin.get_job(held).status == JobStatus.PENDING
        [record] = admin.list_pauses()
        assert scope_text(record.scope) == "category integration"
    listed = wfjobs_json(target, "jobs", "list", "--category", "integration")["jobs"]
    assert [j["id"] for j in listed] == [held]
    stats = wfjobs_json(target, "stats", "--category", "maintenance")
    assert stats["completed"] == "1" and "pending" not in stats

    # One integration job at a time: a gated one holds the category's only slot.
    assert wfjobs(target, "limits", "set", "category", "integration", "1").returncode == 0
    limits = wfjobs(target, "limits", "list")
    assert "category" in limits.stdout and "integration" in limits.stdout, limits.stdout
    assert wfjobs(target, "unpause", "category", "integration").returncode == 0
    wait_until(
        lambda: wfjobs_json(target, "jobs", "show", held)["status"] == "JOB_STATUS_COMPLETED",
        30,
        "the unpaused job to run",
    )
    gate = tmp_path / "gate"
    gated = wfjobs_json(
        target, "enqueue", "gate", json.dumps({"path": str(gate)}), "--category", "integration"
    )["id"]
    wait_until(lambda: _started(worker, gated), 30, "the gated job to start")
    behind = wfjobs_json(target, "enqueue", "noop", "{}", "--category", "integration")["id"]
    wait_until(
        lambda: (
            "concurrency limit of category integration is full"
            in wfjobs(target, "jobs", "explain", behind).stdout
        ),
        30,
        "the limit to hold the next integration job",
    )
    other = wfjobs_json(target, "enqueue", "noop", "{}", "--category", "custom", "--wait", "120s")
    assert other["status"] == "JOB_STATUS_COMPLETED"
    assert wfjobs_json(target, "jobs", "show", behind)["status"] == "JOB_STATUS_PENDING"
    gate.touch()
    wait_until(
        lambda: wfjobs_json(target, "jobs", "show", behind)["status"] == "JOB_STATUS_COMPLETED",
        30,
        "the held job to run once the slot frees",
    )
    assert wfjobs(target, "limits", "set", "category", "integration", "0").returncode == 0
    assert wfjobs_json(target, "limits", "list") == {"limits": []}
    bad = wfjobs(target, "pause", "category", "integrations")
    assert bad.returncode == 2 and "not a job category" in bad.stderr, bad.stderr
