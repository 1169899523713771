"""Schedule ticks end to end on both stores, through the CLI and the SDK: a
tick sent twice is one job, a late tick follows its misfire policy, a tick
of a paused definition waits, bad ticks are INVALID_ARGUMENT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from wfj_testing import REPO
from worker_sdk import InvalidArgumentError, SchedulerClient, WorkflowRef

BIN = Path(sys.executable).parent


def wfjobs(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), WFJOBS_TARGET=target)
    return subprocess.run(
        [str(BIN / "wfjobs"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_ticks_through_the_cli_and_the_sdk(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    target = coordinator.target
    now = datetime.now(UTC).replace(microsecond=0)
    tick = (now - timedelta(seconds=5)).isoformat()
    args = ("enqueue", "report", "{}", "--definition", "nightly", "--schedule-id", "nightly")
    first = wfjobs(target, *args, "--tick-time", tick)
    assert first.returncode == 0, first.stderr
    job_id = first.stdout.split()[0]
    again = wfjobs(target, *args, "--tick-time", tick)
    assert again.stdout.strip() == f"{job_id} pending (already existed)"
    late = (now - timedelta(minutes=10)).isoformat()
    skipped = wfjobs(target, *args, "--tick-time", late, "--misfire", "skip")
    assert skipped.returncode == 0, skipped.stderr
    assert skipped.stdout.strip() == "skipped: the tick misfired and its policy skips it"
    # The same late tick, allowed to be 15 minutes late, is a job.
    made = wfjobs(
        target, "--json", *args, "--tick-time", late, "--misfire", "skip", "--misfire-grace", "15m"
    )
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["idempotency_key"].startswith("schedule:nightly@")
    bad = wfjobs(target, *args)
    assert bad.returncode != 0 and "--tick-time" in bad.stderr

    paused = wfjobs(target, "pause", "definition", "nightly", "--reason", "deploy")
    assert paused.returncode == 0, paused.stderr
    with SchedulerClient(target) as client:
        waiting = client.enqueue_tick(
            "nightly", now, "report", {}, workflow=WorkflowRef(definition_id="nightly")
        )
        assert waiting is not None and waiting.status.name == "PENDING"
        assert not waiting.deduplicated
        assert client.enqueue_tick("nightly", now, "report", {}).deduplicated  # type: ignore[union-attr]
        old = now - timedelta(hours=3)
        assert client.enqueue_tick("nightly", old, "report", misfire="skip") is None
        once = client.enqueue_tick("hourly", old, "report")
        coalesced = client.enqueue_tick("hourly", old + timedelta(hours=1), "report")
        assert once is not None and coalesced is not None
        assert coalesced.id == once.id and coalesced.deduplicated
        with pytest.raises(InvalidArgumentError, match="leave idempotency_key empty"):
            client.enqueue_tick("nightly", now, "report", idempotency_key="k")
    explain = wfjobs(target, "jobs", "explain", waiting.id)
    assert "paused" in explain.stdout
