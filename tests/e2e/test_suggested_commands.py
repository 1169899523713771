"""Every command ExplainJob, the CLI or the dashboard suggests works as
suggested: the test takes each one from the text a user reads, runs it with
the real CLI against a real coordinator (with real workers), and checks it
did what the text promised."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wfj_testing import REPO, read_records, wait_until
from worker_sdk import AdminClient, JobStatus, SchedulerClient

BIN = Path(sys.executable).parent
SUGGESTED = re.compile(r"`(wfjobs [^`]+)`")


def wfjobs(target: str, command: str) -> subprocess.CompletedProcess[str]:
    """Run a suggested command as a user would paste it."""
    args = shlex.split(command)
    assert args[0] == "wfjobs", command
    env = dict(os.environ, PYTHONPATH=str(REPO), WFJOBS_TARGET=target)
    return subprocess.run(
        [str(BIN / "wfjobs"), *args[1:]], env=env, capture_output=True, text=True, timeout=60
    )


def run_ok(target: str, command: str) -> str:
    done = wfjobs(target, command)
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    return done.stdout


def suggested(text: str) -> list[str]:
    return SUGGESTED.findall(text)


def reason(admin: AdminClient, job_id: str, kind: str) -> str | None:
    """The message of the job's ExplainJob reason of ``kind`` (e.g. "KIND_ORDERING")."""
    from workflowjobs.v1 import admin_service_pb2 as apb

    wanted = apb.WaitReason.Kind.Value(kind)
    for r in admin.explain_job(job_id).reasons:
        if r.kind == wanted:
            return r.message
    return None


def status(scheduler: SchedulerClient, job_id: str) -> JobStatus:
    return scheduler.get_job(job_id).status


def test_explain_s_suggestions_work(
    tmp_path: Path, processes: dict[str, Callable[..., Any]]
) -> None:
    coordinator = processes["coordinator"](f"sqlite:///{tmp_path / 'suggest.db'}")
    target = coordinator.target
    worker = processes["worker"](target, "--worker-id", "w-suggest")
    with SchedulerClient(target) as scheduler, AdminClient(target) as admin:
        wait_until(lambda: admin.list_workers() or None, 30, "the worker to connect")

        # A FAULTED head holds its ordering key. Suggestion 1: retry it; it completes
        # (its second attempt succeeds) and the job behind it runs.
        def faulted_head(key: str) -> tuple[str, str]:
            head = scheduler.enqueue(
                "flaky", {"succeed_on": 2}, ordering_key=key, max_attempts=1
            ).id
            behind = scheduler.enqueue("noop", {}, ordering_key=key).id
            wait_until(
                lambda: status(scheduler, head) == JobStatus.FAULTED or None,
                30,
                "the head to fault",
            )
            return head, behind

        head, behind = faulted_head("key-1")
        message = wait_until(lambda: reason(admin, behind, "KIND_ORDERING"), 30, "ORDERING")
        cancel, retry = suggested(message)
        assert retry == f"wfjobs jobs retry {head}", message
        assert cancel == f"wfjobs jobs cancel {head}", message
        run_ok(target, retry)
        for job_id in (head, behind):
            wait_until(
                lambda j=job_id: status(scheduler, j) == JobStatus.COMPLETED or None,
                30,
                "the retried head, then the job behind it, to complete",
            )

        # Suggestion 2: cancel sets the FAULTED head aside without running it, with
        # the worker connected: it ends CANCELLED and the job behind it runs.
        head, behind = faulted_head("key-2")
        message = wait_until(lambda: reason(admin, behind, "KIND_ORDERING"), 30, "ORDERING")
        cancel, _ = suggested(message)
        run_ok(target, cancel)
        assert status(scheduler, head) == JobStatus.CANCELLED
        wait_until(
            lambda: status(scheduler, behind) == JobStatus.COMPLETED or None,
            30,
            "the job behind the cancelled head to run",
        )
        starts = [r for r in read_records(worker.record) if r[0] == "start" and r[1] == head]
        assert len(starts) == 1, starts  # its one faulted attempt: never run again
        assert status(scheduler, head) == JobStatus.CANCELLED

        # A job not due yet: run-now makes it due, and the worker runs it at once.
        later = scheduler.enqueue("noop", {}, delay=3600).id
        message = wait_until(lambda: reason(admin, later, "KIND_NOT_DUE"), 30, "NOT_DUE")
        [run_now] = suggested(message)
        assert run_now == f"wfjobs jobs run-now {later}", message
        run_ok(target, run_now)
        wait_until(
            lambda: status(scheduler, later) == JobStatus.COMPLETED or None,
            30,
            "the job made due now to run",
        )

        # While its only worker is drained, a job names the undrain command.
        run_ok(target, "wfjobs drain --worker w-suggest")
        behind = scheduler.enqueue("noop", {}, ordering_key="key-3").id
        message = wait_until(lambda: reason(admin, behind, "KIND_DRAINING"), 30, "DRAINING")
        [undrain] = suggested(message) or re.findall(r"\((wfjobs undrain [^;)]+)\)", message)
        assert undrain == "wfjobs undrain --worker w-suggest", message
        run_ok(target, undrain)
        wait_until(
            lambda: status(scheduler, behind) == JobStatus.COMPLETED or None,
            30,
            "the job to run once undrained",
        )

        # Fair share: the weight command, with the weight filled in.
        waiting = scheduler.enqueue("nobody-serves", {}, tenant_id="acme").id
        scheduler.enqueue("nobody-serves", {}, tenant_id="globex")
        message = wait_until(lambda: reason(admin, waiting, "KIND_FAIR_SHARE"), 30, "FAIR_SHARE")
        [set_weight] = suggested(message)
        assert set_weight == "wfjobs tenants set-weight acme N", message
        run_ok(target, set_weight.replace(" N", " 5"))
        weights = {w.tenant_id: w.weight for w in admin.list_tenant_weights().weights}
        assert weights["acme"] == 5

        # A lease held by a worker that is gone: unlock reclaims it now.
        run_ok(target, "wfjobs drain --worker w-suggest")  # only w-gone takes it
        sleeper = processes["worker"](target, "--worker-id", "w-gone")
        wait_until(
            lambda: "w-gone" in [w.worker_id for w in admin.list_workers()] or None,
            30,
            "the second worker to connect",
        )
        sleeping = scheduler.enqueue("sleep", {"seconds": 600}).id
        wait_until(
            lambda: status(scheduler, sleeping) == JobStatus.RUNNING or None, 30, "the sleep to run"
        )
        os.kill(sleeper.proc.pid, signal.SIGKILL)
        message = wait_until(
            lambda: (lambda m: m if m and "unlock" in m else None)(
                reason(admin, sleeping, "KIND_LEASED")
            ),
            30,
            "the lease of a gone worker to be explained",
        )
        [unlock] = suggested(message)
        assert unlock == f"wfjobs jobs unlock {sleeping}", message
        run_ok(target, unlock)
        assert status(scheduler, sleeping) == JobStatus.PENDING
    assert worker.alive()


def test_the_cli_s_and_the_dashboard_s_suggestions_work(
    tmp_path: Path, processes: dict[str, Callable[..., Any]]
) -> None:
    coordinator = processes["coordinator"](f"sqlite:///{tmp_path / 'cli.db'}")
    target = coordinator.target
    # `wfjobs enqueue --wait` that runs out names two commands about the job.
    out = wfjobs(target, "wfjobs enqueue nobody-serves --wait 1s")
    assert out.returncode == 10, (out.stdout, out.stderr)
    explain, show = suggested(out.stderr)
    job_id = explain.split()[-1]
    assert (explain, show) == (f"wfjobs jobs explain {job_id}", f"wfjobs jobs show {job_id}")
    assert "no connected worker" in run_ok(target, explain)
    assert job_id in run_ok(target, show)
    # A pause (or unpause) without its value names the form to use.
    for verb in ("pause", "unpause"):
        refused = wfjobs(target, f"wfjobs {verb} tenant")
        assert refused.returncode != 0
        [form] = re.findall(r"name the tenant: (wfjobs \S+ tenant TENANT_ID)", refused.stderr)
        assert form.startswith(f"wfjobs {verb} "), form  # unpause once suggested pause
        run_ok(target, form.replace("TENANT_ID", "acme"))
        refused = wfjobs(target, f"wfjobs {verb} job-type")
        [form] = re.findall(r"name the job-type: (wfjobs \S+ job-type VALUE)", refused.stderr)
        assert form.startswith(f"wfjobs {verb} "), form
        run_ok(target, form.replace("VALUE", "send-email"))
    with AdminClient(target) as admin:
        # Paused, then unpaused, as the suggested commands said.
        assert [p for p in admin.list_pauses() if p.lift_time is None] == []
    # The dashboard's category-weight section names the CLI command doing the same.
    from wfj_dashboard import Dashboard, fetch

    dashboard = Dashboard(tmp_path / "dash.log", "--target", target, "--listen", "127.0.0.1:0")
    try:
        url = dashboard.url()
        _, _, headers = fetch(url + "/")
        cookie = {"Cookie": headers["Set-Cookie"].split(";")[0]}
        code, page, _ = fetch(url + "/tenants", headers=cookie)
    finally:
        dashboard.stop()
    assert code == 200, page[:500]
    [command] = re.findall(r"<code>(wfjobs [^<]+)</code>", page)
    assert command == "wfjobs tenants set-category-weight"
    run_ok(target, f"{command} acme integration 3")
    with AdminClient(target) as admin:
        weights = admin.list_category_weights(tenant_id="acme").weights
    assert [(w.tenant_id, w.weight) for w in weights] == [("acme", 3)], weights
