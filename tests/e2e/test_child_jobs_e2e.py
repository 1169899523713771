"""Child jobs end to end: a real worker's handler enqueues children over its own
channel, fails and is retried; the children exist once, name their parent, sit in
the parent's trace, and are listed by parent (SDK, CLI), on both stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from wfj_testing import REPO, read_records, wait_until
from worker_sdk import AdminClient, JobFilter, JobStatus, RetryPolicy, SchedulerClient

BIN = Path(sys.executable).parent
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"


def wfjobs_json(target: str, *args: str) -> Any:
    env = dict(os.environ, PYTHONPATH=str(REPO), WFJOBS_TARGET=target)
    out = subprocess.run(
        [str(BIN / "wfjobs"), "--json", *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("job_type", ["spawn", "spawn-sync"])
def test_a_retried_parent_does_not_duplicate_its_children(
    e2e_database: str,
    processes: dict[str, Callable[..., Any]],
    monkeypatch: pytest.MonkeyPatch,
    job_type: str,
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    target = coordinator.target
    # Tracing on in the worker process only (spans to its log): each attempt gets a span.
    with monkeypatch.context() as env:
        env.setenv("OTEL_TRACES_EXPORTER", "console")
        worker = processes["worker"](target)
    with SchedulerClient(target) as scheduler, AdminClient(target) as admin:
        parent = scheduler.enqueue(
            job_type,
            {"children": 2},
            tenant_id="acme",
            workflow=None,
            retry_policy=RetryPolicy(max_attempts=3, initial_backoff=timedelta(milliseconds=50)),
            traceparent=f"00-{TRACE_ID}-{PARENT_SPAN}-01",
        )
        wait_until(
            lambda: admin.get_job(parent.id).status == JobStatus.COMPLETED,
            60,
            "the parent to complete on its second attempt",
        )
        done = scheduler.get_job(parent.id, include_attempts=True)
        assert [str(a.outcome) for a in done.attempts] == ["FAILED", "COMPLETED"]
        starts = [r for r in read_records(worker.record) if r[0] == "start" and r[1] == parent.id]
        assert len(starts) == 2

        children = admin.list_jobs(JobFilter(parent_job_id=parent.id)).jobs
        # Two attempts enqueued three children each: three jobs exist.
        assert len(children) == 3
        assert sorted(done.result_value()["children"]) == sorted(c.id for c in children)
        keys = sorted(c.idempotency_key for c in children)
        assert keys == sorted(
            [f"child:{parent.id}:#0", f"child:{parent.id}:#1", f"child:{parent.id}:summary"]
        )
        for child in children:
            assert child.parent_job_id == parent.id
            assert child.tenant_id == "acme"
            trace_id, span_id = child.raw.traceparent.split("-")[1:3]
            assert trace_id == TRACE_ID and span_id != PARENT_SPAN
        wait_until(
            lambda: all(admin.get_job(c.id).status == JobStatus.COMPLETED for c in children),
            30,
            "the children to run",
        )
        assert admin.list_jobs(JobFilter(parent_job_id=children[0].id)).jobs == []

    listed = wfjobs_json(target, "jobs", "list", "--parent", parent.id)["jobs"]
    assert sorted(j["id"] for j in listed) == sorted(c.id for c in children)
    shown = wfjobs_json(target, "jobs", "show", children[0].id)
    assert shown["parent_job_id"] == parent.id
