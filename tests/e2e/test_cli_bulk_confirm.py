"""Bulk actions across every tenant ask first: the count, then a typed "y" or --yes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from wfj_testing import Coordinator, subprocess_env
from worker_sdk import AdminClient, JobFilter, SchedulerClient

WFJOBS = str(Path(sys.executable).parent / "wfjobs")


def run(target: str, *args: str, answer: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run wfjobs; with ``answer``, on a terminal that types it."""
    env = subprocess_env({"WFJOBS_TARGET": target})
    if answer is None:
        return subprocess.run(
            [WFJOBS, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )
    controller, terminal = os.openpty()
    try:
        os.write(controller, answer)
        return subprocess.run(
            [WFJOBS, *args],
            stdin=terminal,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )
    finally:
        os.close(terminal)
        os.close(controller)


def pending(target: str) -> int:
    with AdminClient(target) as admin:
        return len(admin.list_jobs(JobFilter(statuses=["pending"])).jobs)


def test_cancel_across_every_tenant_needs_confirmation(tmp_path: Path) -> None:
    coordinator = Coordinator(f"sqlite:///{tmp_path / 'bulk.db'}", tmp_path / "coordinator.log")
    target = coordinator.target
    try:
        with SchedulerClient(target) as client:
            for tenant in ("a", "b", "b"):
                client.enqueue("nobody-serves-this", {}, tenant_id=tenant)

        piped = run(target, "jobs", "cancel", "--status", "pending")
        left_after_pipe = pending(target)
        refused = run(target, "jobs", "cancel", "--status", "pending", answer=b"n\n")
        left_after_no = pending(target)
        one_tenant = run(target, "jobs", "cancel", "--status", "pending", "--tenant", "a")
        accepted = run(target, "jobs", "cancel", "--status", "pending", answer=b"y\n")
        with SchedulerClient(target) as client:
            client.enqueue("nobody-serves-this", {}, tenant_id="c")
        forced = run(target, "jobs", "cancel", "--status", "pending", "--yes")
        left_at_end = pending(target)
    finally:
        coordinator.stop()

    assert piped.returncode == 9
    assert piped.stderr.splitlines() == [
        "wfjobs: this would cancel 3 job(s) across every tenant",
        "wfjobs: not confirmed; pass --yes to cancel them "
        "(or --tenant to limit the action to one tenant)",
    ]
    assert left_after_pipe == 3
    assert refused.returncode == 9
    assert "Cancel 3 job(s)? [y/N] wfjobs: not confirmed; nothing changed" in refused.stderr
    assert left_after_no == 3
    assert one_tenant.returncode == 0 and one_tenant.stderr == ""
    assert one_tenant.stdout == "cancel: 1 of 1 matching job(s) changed\n"
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stderr.startswith("wfjobs: this would cancel 2 job(s) across every tenant\n")
    assert accepted.stdout == "cancel: 2 of 2 matching job(s) changed\n"
    assert forced.returncode == 0 and forced.stderr == ""
    assert forced.stdout == "cancel: 1 of 1 matching job(s) changed\n"
    assert left_at_end == 0
