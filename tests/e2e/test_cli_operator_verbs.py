"""``wfjobs jobs run-now``, ``wfjobs jobs purge`` and ``wfjobs groups list`` as a
user runs them: the CLI as a process against a real coordinator."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from wfj_testing import Coordinator, subprocess_env
from worker_sdk import AdminClient, JobFilter, JobRequest, JobStatus, SchedulerClient

WFJOBS = str(Path(sys.executable).parent / "wfjobs")


def run(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WFJOBS, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=subprocess_env({"WFJOBS_TARGET": target}),
    )


@pytest.fixture
def target(tmp_path: Path) -> Iterator[str]:
    coordinator = Coordinator(f"sqlite:///{tmp_path / 'verbs.db'}", tmp_path / "coordinator.log")
    try:
        yield coordinator.target
    finally:
        coordinator.stop()


def test_run_now_makes_a_delayed_job_due_and_retry_points_to_it(target: str) -> None:
    with SchedulerClient(target) as scheduler:
        job_id = scheduler.enqueue("nobody-serves", {}, delay=3600).id
        refused = run(target, "jobs", "retry", job_id)
        assert refused.returncode == 4, refused
        assert f"wfjobs jobs run-now {job_id}" in refused.stderr, refused.stderr
        done = run(target, "jobs", "run-now", job_id)
        assert done.returncode == 0, done
        assert done.stdout.strip() == f"made due now {job_id}: now pending"
        job = scheduler.get_job(job_id)
        assert job.due_time is not None and job.due_time.timestamp() < time.time() + 60
        cancelled = scheduler.enqueue("nobody-serves", {}, delay=3600).id
    with AdminClient(target) as admin:
        admin.cancel_job(cancelled)
    wrong = run(target, "jobs", "run-now", cancelled)
    assert wrong.returncode == 4, wrong
    assert f"job {cancelled} is CANCELLED; only PENDING jobs can be run now" in wrong.stderr


def test_purge_counts_first_asks_across_tenants_and_deletes_finished_jobs(target: str) -> None:
    with SchedulerClient(target) as scheduler, AdminClient(target) as admin:
        ids = [scheduler.enqueue("nobody-serves", {}, tenant_id=t).id for t in "aaab"]
        live = scheduler.enqueue("nobody-serves", {}, tenant_id="a").id
        for job_id in ids:
            admin.cancel_job(job_id)
        assert run(target, "jobs", "purge").returncode == 2  # no filter, no --all-jobs
        dry = run(target, "jobs", "purge", "--tenant", "a", "--dry-run")
        assert dry.returncode == 0, dry
        assert dry.stdout.strip() == "would purge 3 finished job(s) (dry run; nothing deleted)"
        live_status = run(target, "jobs", "purge", "--status", "pending", "--tenant", "a")
        assert live_status.returncode == 2, live_status
        assert "filter.statuses has PENDING" in live_status.stderr
        unconfirmed = run(target, "jobs", "purge", "--status", "cancelled")
        assert unconfirmed.returncode == 9, unconfirmed
        assert "this would purge 4 job(s) across every tenant" in unconfirmed.stderr
        assert len(admin.list_jobs(JobFilter(statuses=["cancelled"])).jobs) == 4
        done = run(target, "--json", "jobs", "purge", "--status", "cancelled", "--yes")
        assert done.returncode == 0, done
        assert json.loads(done.stdout) == {"matched": 4, "deleted": 4, "kept": 0, "dry_run": False}
        assert [j.id for j in admin.list_jobs().jobs] == [live]
        assert admin.get_job(live).status == JobStatus.PENDING


def test_groups_list_shows_progress_pages_and_refuses_unknown_statuses(target: str) -> None:
    with SchedulerClient(target) as scheduler:
        first, _ = scheduler.create_group(
            JobRequest("summary", {}, tenant_id="t"),
            members=[JobRequest("nobody-serves", {}, tenant_id="t") for _ in range(3)],
            tenant_id="t",
        )
        second, _ = scheduler.create_group(
            JobRequest("summary", {}, tenant_id="t"), tenant_id="t", close=True
        )
    listed = run(target, "groups", "list", "--tenant", "t")
    assert listed.returncode == 0, listed
    header, *rows = listed.stdout.strip().splitlines()
    assert header.split()[:4] == ["ID", "TENANT", "STATUS", "DONE"]
    assert [r.split()[:5] for r in rows] == [
        [second.id, "t", "completed", "0/0", "0"],
        [first.id, "t", "open", "0/3", "3"],
    ]
    completion = run(target, "--json", "groups", "list", "--status", "completed")
    [group] = json.loads(completion.stdout)["groups"]
    assert group["id"] == second.id and group["completion_job_id"]
    paged = run(target, "groups", "list", "--limit", "1")
    assert "(more: --page-token " in paged.stdout, paged.stdout
    every = run(target, "groups", "list", "--limit", "1", "--all")
    assert first.id in every.stdout and second.id in every.stdout
    bad = run(target, "groups", "list", "--status", "finished")
    assert bad.returncode == 2, bad
    assert "unknown group status 'finished'" in bad.stderr
