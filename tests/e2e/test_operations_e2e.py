"""Operations end to end: real coordinator and worker processes, the ``wfjobs``
console script and the real ``grpcurl`` binary.

No test waits for time to pass: each waits for a state it can observe (a
record line from the worker, a job status), with a generous ceiling.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from wfj_testing import REPO, read_records, wait_until
from worker_sdk import AdminClient, JobFilter, JobStatus, SchedulerClient

BIN = Path(sys.executable).parent


def _env(target: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env["WFJOBS_TARGET"] = target
    return env


def wfjobs(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the installed ``wfjobs`` console script against ``target`` (from the env)."""
    return subprocess.run(
        [str(BIN / "wfjobs"), *args],
        env=_env(target),
        capture_output=True,
        text=True,
        timeout=60,
    )


def wfjobs_json(target: str, *args: str) -> Any:
    out = wfjobs(target, "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _events(worker: Any, event: str, job_id: str) -> list[list[str]]:
    return [r for r in read_records(worker.record) if r[0] == event and r[1] == job_id]


def _status(admin: AdminClient, job_id: str) -> JobStatus:
    return admin.get_job(job_id).status


# -- cancel and drain on both stores -----------------------------------------------------------


def test_cancel_reaches_the_running_handler(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    # Heartbeat every 0.3 s: the cancel reaches the handler with the next one.
    worker = processes["worker"](coordinator.target, "--heartbeat-interval", "0.3")
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        job = scheduler.enqueue("cancellable", {"seconds": 120}, heartbeat_timeout=5)
        wait_until(lambda: _events(worker, "start", job.id), 30, "the handler to start")
        cancelled = admin.cancel_job(job.id, reason="operator says stop")
        assert cancelled.status == JobStatus.RUNNING and cancelled.cancel_requested
        # The handler observed ctx.is_cancelled() long before its 120 s wait ended.
        wait_until(
            lambda: _events(worker, "cancelled", job.id), 30, "the handler to see the cancel"
        )
        wait_until(lambda: _status(admin, job.id) == JobStatus.CANCELLED, 30, "CANCELLED")
        final = admin.get_job(job.id)
        assert [str(a.outcome) for a in final.attempts] == ["CANCELLED"]
        assert not _events(worker, "end", job.id)


def test_drain_lets_running_jobs_finish_and_holds_new_ones(
    e2e_database: str, processes: dict[str, Callable[..., Any]], tmp_path: Path
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    worker = processes["worker"](coordinator.target)
    gate = tmp_path / "gate"
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        running = scheduler.enqueue("gate", {"path": str(gate)})
        wait_until(lambda: _events(worker, "start", running.id), 30, "the gated job to start")
        out = wfjobs(coordinator.target, "drain")
        assert out.returncode == 0, out.stderr
        assert "drained coordinator" in out.stdout
        assert admin.get_stats().draining
        held = scheduler.enqueue("noop", {})
        reasons = admin.explain_job(held.id).reasons
        assert "KIND_DRAINING" in [_kind(r) for r in reasons]
        # The worker was told; it still holds the running job.
        [info] = admin.list_workers()
        assert info.in_flight_job_ids == [running.id]
        gate.touch()
        wait_until(
            lambda: _status(admin, running.id) == JobStatus.COMPLETED, 30, "the job to finish"
        )
        assert _status(admin, held.id) == JobStatus.PENDING
        assert wfjobs_json(coordinator.target, "stats")["draining"] is True
        assert wfjobs(coordinator.target, "undrain").returncode == 0
        wait_until(
            lambda: _status(admin, held.id) == JobStatus.COMPLETED, 30, "the held job to run"
        )
        assert "draining" not in wfjobs_json(coordinator.target, "stats")


def test_drained_worker_is_named_by_explain_and_undrained_by_id(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    worker = processes["worker"](coordinator.target)
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        wait_until(lambda: admin.list_workers(), 30, "the worker to connect")
        [info] = admin.list_workers()
        out = wfjobs(coordinator.target, "drain", "--worker", info.worker_id)
        assert out.returncode == 0, out.stderr
        wait_until(lambda: admin.list_workers()[0].draining, 30, "the worker to be drained")
        held = scheduler.enqueue("noop", {})
        [reason] = [r for r in admin.explain_job(held.id).reasons if _kind(r) == "KIND_DRAINING"]
        assert f"is drained: {info.worker_id} (coordinator" in reason.message
        assert f"wfjobs undrain --worker {info.worker_id}" in reason.message
        assert _status(admin, held.id) == JobStatus.PENDING
        out = wfjobs(coordinator.target, "undrain", "--worker", info.worker_id)
        assert out.returncode == 0, out.stderr
        assert f"undrained worker {info.worker_id}" in out.stdout
        wait_until(lambda: _status(admin, held.id) == JobStatus.COMPLETED, 30, "the job to run")
        assert _events(worker, "end", held.id)
        again = wfjobs(coordinator.target, "undrain", "--worker", info.worker_id)
        assert again.returncode == 4 and "is not drained" in again.stderr


def test_stats_count_ready_held_and_scheduled_apart_and_name_drained_workers(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    target = coordinator.target
    processes["worker"](target)
    with SchedulerClient(target) as scheduler, AdminClient(target) as admin:
        wait_until(lambda: admin.list_workers(), 30, "the worker to connect")
        [info] = admin.list_workers()
        assert wfjobs(target, "drain", "--worker", info.worker_id).returncode == 0
        wait_until(lambda: admin.list_workers()[0].draining, 30, "the worker to be drained")
        admin.pause("job-type", "frozen")
        admin.set_concurrency_limit("job-type", "limited", 1)
        for job_type in ("noop", "noop", "nobody", "frozen", "limited", "limited", "limited"):
            scheduler.enqueue(job_type, {}, tenant_id="s")
        scheduler.enqueue("noop", {}, tenant_id="s", delay=3600)
    out = wfjobs(target, "stats", "--tenant", "s")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "of the pending, 0 ready (runnable now), 7 held and 1 scheduled (not due yet)" in lines
    assert (
        "held: 1 paused, 2 over a concurrency limit, 2 with no worker serving them, "
        "2 whose workers are all drained"
    ) in lines
    [drain] = [line for line in lines if line.startswith("workers connected")]
    assert "draining no, but every worker of job type(s) noop is drained (2 job(s) wait" in drain
    backlog = wfjobs_json(target, "stats", "--tenant", "s")["backlog"]
    assert {k: int(v) for k, v in backlog.items()} == {
        "scheduled": 1,
        "held_paused": 1,
        "held_limit": 2,
        "held_no_worker": 2,
        "held_drained": 2,
    }


def test_explain_says_a_killed_workers_lease_is_reclaimed(
    e2e_database: str, processes: dict[str, Callable[..., Any]], tmp_path: Path
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    worker = processes["worker"](coordinator.target)
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        job = scheduler.enqueue("gate", {"path": str(tmp_path / "never")}, heartbeat_timeout=60)
        wait_until(lambda: _events(worker, "start", job.id), 30, "the job to start")
        [reason] = admin.explain_job(job.id).reasons
        assert reason.message.startswith("running: leased by worker ") and "until" in reason.message
        worker.kill()  # SIGKILL: no release, the lease stays until it expires
        wait_until(lambda: not admin.list_workers(), 30, "the worker to be gone")
        [reason] = admin.explain_job(job.id).reasons
        assert _kind(reason) == "KIND_LEASED"
        assert "which is no longer connected to any coordinator" in reason.message
        assert "the lease is reclaimed when it expires at" in reason.message
        assert _status(admin, job.id) == JobStatus.RUNNING


def _kind(reason: Any) -> str:
    from workflowjobs.v1 import admin_service_pb2

    return admin_service_pb2.WaitReason.Kind.Name(reason.kind)


# -- the CLI -----------------------------------------------------------------------------------


@pytest.fixture
def sqlite_coordinator(tmp_path: Path, processes: dict[str, Callable[..., Any]]) -> Any:
    return processes["coordinator"](f"sqlite:///{tmp_path / 'ops.db'}")


def test_cli_bulk_retry_dry_run_then_real(
    sqlite_coordinator: Any, processes: dict[str, Callable[..., Any]]
) -> None:
    target = sqlite_coordinator.target
    processes["worker"](target)
    ids = [
        wfjobs(
            target, "enqueue", "flaky", '{"succeed_on": 2}', "--max-attempts", "1", "--tenant", "t9"
        ).stdout.split()[0]
        for _ in range(3)
    ]
    wfjobs(
        target, "enqueue", "flaky", '{"succeed_on": 2}', "--max-attempts", "1", "--tenant", "other"
    )
    with AdminClient(target) as admin:
        flt = JobFilter(statuses=["faulted"])
        wait_until(lambda: len(admin.list_jobs(flt).jobs) == 4, 60, "four faulted jobs")
        dry = wfjobs(target, "jobs", "retry", "--status", "faulted", "--tenant", "t9", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "would retry 3 job(s)" in dry.stdout
        assert len(admin.list_jobs(flt).jobs) == 4  # nothing changed
        real = wfjobs_json(target, "jobs", "retry", "--status", "faulted", "--tenant", "t9")
        assert real == {"matched": 3, "changed": 3, "dry_run": False}
        for job_id in ids:
            wait_until(lambda j=job_id: _status(admin, j) == JobStatus.COMPLETED, 60, "retried job")
        assert [j.tenant_id for j in admin.list_jobs(flt).jobs] == ["other"]
        shown = wfjobs(target, "jobs", "show", ids[0])
        assert shown.returncode == 0 and "completed" in shown.stdout
        assert "failed" in shown.stdout and "RuntimeError" in shown.stdout


def test_cli_commands_against_a_live_coordinator(
    sqlite_coordinator: Any, processes: dict[str, Callable[..., Any]], tmp_path: Path
) -> None:
    target = sqlite_coordinator.target
    worker = processes["worker"](target)
    gate = tmp_path / "gate"

    enqueued = wfjobs(target, "enqueue", "noop", "{}", "--tenant", "acme", "--wait", "120s")
    assert enqueued.returncode == 0, enqueued.stderr
    queued, first, result = enqueued.stdout.splitlines()
    job_id, status = first.split()
    assert (queued, status) == (f"{job_id} pending", "completed")
    assert result == 'result: {"ok": true}'

    listed = wfjobs(target, "jobs", "list", "--tenant", "acme")
    assert job_id in listed.stdout and "completed" in listed.stdout
    assert wfjobs_json(target, "jobs", "list", "--tenant", "nobody") == {
        "jobs": [],
        "next_page_token": "",
    }
    shown = wfjobs_json(target, "jobs", "show", job_id)
    assert shown["status"] == "JOB_STATUS_COMPLETED"
    assert shown["attempts"][0]["outcome"] == "ATTEMPT_OUTCOME_COMPLETED"

    workers = wfjobs_json(target, "workers")["workers"]
    # The e2e fixture names each worker after its log file.
    assert [w["worker_id"] for w in workers] == [worker.log_path.stem]
    assert "noop" in workers[0]["job_types"] and workers[0]["pid"] == worker.proc.pid
    table = wfjobs(target, "workers").stdout
    assert "WORKER" in table and workers[0]["worker_id"] in table
    # This coordinator's own worker is never stale (the last column).
    header, *rows = table.splitlines()
    [row] = [r for r in rows if workers[0]["worker_id"] in r]
    assert (header.split()[-1], row.split()[-1]) == ("STALE", "no")

    # Unlock a running job: the old attempt is fenced, the job runs again.
    gated = wfjobs_json(target, "enqueue", "gate", json.dumps({"path": str(gate)}))["id"]
    wait_until(
        lambda: wfjobs_json(target, "jobs", "show", gated)["status"] == "JOB_STATUS_RUNNING",
        90,
        "RUNNING",
    )
    unlocked = wfjobs_json(target, "jobs", "unlock", gated)
    assert unlocked["status"] in ("JOB_STATUS_PENDING", "JOB_STATUS_RUNNING")
    wait_until(lambda: len(_events(worker, "start", gated)) == 2, 90, "the job to run again")
    gate.touch()
    wait_until(
        lambda: wfjobs_json(target, "jobs", "show", gated)["status"] == "JOB_STATUS_COMPLETED",
        90,
        "COMPLETED",
    )
    outcomes = [a["outcome"] for a in wfjobs_json(target, "jobs", "show", gated)["attempts"]]
    assert outcomes == ["ATTEMPT_OUTCOME_UNLOCKED", "ATTEMPT_OUTCOME_COMPLETED"]

    replayed = wfjobs_json(target, "jobs", "replay", job_id)
    assert replayed["replay_of"] == job_id

    paused = wfjobs(target, "pause", "tenant", "acme", "--reason", "maintenance", "--for", "1h")
    assert paused.returncode == 0 and "paused tenant acme" in paused.stdout
    held = wfjobs_json(target, "enqueue", "noop", "--tenant", "acme")["id"]
    assert "tenant acme is disabled" in wfjobs(target, "jobs", "explain", held).stdout
    assert "maintenance" in wfjobs(target, "pauses").stdout
    (listed_pause,) = wfjobs_json(target, "pauses")["pauses"]
    assert listed_pause["reason"] == "maintenance"
    assert wfjobs(target, "jobs", "cancel", held, "--reason", "not needed").returncode == 0
    assert wfjobs(target, "unpause", "tenant", "acme").returncode == 0

    stats = wfjobs(target, "stats")
    assert stats.returncode == 0 and "cancelled 1" in stats.stdout

    # Exit codes scripts can rely on, and errors a person can act on.
    wrong_state = wfjobs(target, "jobs", "cancel", held)
    assert wrong_state.returncode == 4 and "is CANCELLED" in wrong_state.stderr
    missing = wfjobs(target, "jobs", "show", "0190b6e2-5c1a-7d3e-8f00-123456789abc")
    assert missing.returncode == 3 and "not found" in missing.stderr
    assert wfjobs(target, "jobs", "show", "not-an-id").returncode == 2
    assert wfjobs(target, "jobs", "cancel").returncode == 2  # bulk needs a filter
    assert wfjobs(target, "jobs", "frobnicate").returncode == 2
    unreachable = wfjobs("127.0.0.1:1", "stats")
    assert unreachable.returncode == 5
    assert "cannot reach the coordinator at 127.0.0.1:1" in unreachable.stderr
    assert "WFJOBS_TARGET" in unreachable.stderr


# -- grpcurl -----------------------------------------------------------------------------------


def grpcurl(target: str, *args: str, data: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "grpcurl"), "-plaintext"]
    if data is not None:
        cmd += ["-d", data]
    return subprocess.run([*cmd, target, *args], capture_output=True, text=True, timeout=60)


def test_pauses_all_says_who_lifted_each_pause_or_that_it_expired(sqlite_coordinator: Any) -> None:
    target = sqlite_coordinator.target
    for args in (
        ("pause", "job-type", "lift-me", "--actor", "alice"),
        ("unpause", "job-type", "lift-me", "--actor", "bob"),
        ("pause", "job-type", "anonymous-lift", "--actor", ""),
        ("unpause", "job-type", "anonymous-lift", "--actor", ""),
        ("pause", "job-type", "lapse-me", "--actor", "alice", "--for", "1s"),
    ):
        done = wfjobs(target, *args)
        assert done.returncode == 0, done.stderr
    # The last pause lifts by itself a second after it was made.
    deadline = time.monotonic() + 30
    while "lapse-me" in wfjobs(target, "pauses").stdout:
        assert time.monotonic() < deadline, "the pause never expired"
        time.sleep(0.2)
    table = wfjobs(target, "pauses", "--all").stdout.splitlines()
    header = table[0].split()
    assert header[-2:] == ["LIFTED", "BY"] and "LIFTED" in header[:-2]
    rows = {
        name: next(line for line in table if name in line)
        for name in ("lift-me", "anonymous-lift", "lapse-me")
    }
    assert rows["lift-me"].rstrip().endswith("bob")
    assert rows["anonymous-lift"].rstrip().endswith("unauthenticated")
    assert rows["lapse-me"].rstrip().endswith("expiry")


def test_stats_say_how_many_pending_jobs_wait_behind_their_ordering_key(
    sqlite_coordinator: Any,
) -> None:
    target = sqlite_coordinator.target
    with SchedulerClient(target) as scheduler:
        for step in range(3):
            scheduler.enqueue("hello", {"step": step}, tenant_id="h", ordering_key="instance-1")
    stats = grpcurl(target, "workflowjobs.v1.AdminService/GetStats", data='{"tenant_id": "h"}')
    assert stats.returncode == 0, stats.stderr
    answer = json.loads(stats.stdout)
    assert (answer["pending"], answer["held"]) == ("3", "2")
    out = wfjobs(target, "stats", "--tenant", "h")
    assert out.returncode == 0, out.stderr
    assert "held: 2 behind an earlier job of their ordering key" in out.stdout


def test_grpcurl_against_a_live_coordinator(sqlite_coordinator: Any) -> None:
    target = sqlite_coordinator.target
    listed = grpcurl(target, "list")
    assert listed.returncode == 0, listed.stderr
    assert "workflowjobs.v1.AdminService" in listed.stdout.split()
    described = grpcurl(target, "describe", "workflowjobs.v1.AdminService")
    assert described.returncode == 0, described.stderr
    for rpc in ("CancelJob", "BulkRetryJobs", "Drain", "ListWorkers"):
        assert f"rpc {rpc}" in described.stdout

    with SchedulerClient(target) as scheduler:
        job = scheduler.enqueue("hello", {"name": "grpcurl"}, tenant_id="g")

    stats = grpcurl(target, "workflowjobs.v1.AdminService/GetStats", data='{"tenant_id": "g"}')
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["pending"] == "1"  # int64 prints as a string in JSON

    jobs = grpcurl(
        target,
        "workflowjobs.v1.AdminService/ListJobs",
        data='{"filter": {"tenant_id": "g", "statuses": ["JOB_STATUS_PENDING"]}}',
    )
    assert jobs.returncode == 0, jobs.stderr
    assert [j["id"] for j in json.loads(jobs.stdout)["jobs"]] == [job.id]

    cancel = grpcurl(
        target,
        "workflowjobs.v1.AdminService/CancelJob",
        data=json.dumps({"job_id": job.id, "reason": "from grpcurl"}),
    )
    assert cancel.returncode == 0, cancel.stderr
    assert json.loads(cancel.stdout)["job"]["status"] == "JOB_STATUS_CANCELLED"

    again = grpcurl(
        target, "workflowjobs.v1.AdminService/CancelJob", data=json.dumps({"job_id": job.id})
    )
    assert again.returncode != 0
    assert "FailedPrecondition" in again.stderr and "is CANCELLED" in again.stderr


def test_explain_shows_the_traceback_a_retry_waits_after(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    from datetime import timedelta

    from worker_sdk import RetryPolicy

    coordinator = processes["coordinator"](e2e_database)
    worker = processes["worker"](coordinator.target)
    target = coordinator.target
    with SchedulerClient(target) as scheduler, AdminClient(target) as admin:
        job = scheduler.enqueue(
            "flaky",
            {"succeed_on": 2},
            retry_policy=RetryPolicy(max_attempts=3, initial_backoff=timedelta(hours=1)),
        )
        wait_until(lambda: _events(worker, "fail", job.id), 30, "the first attempt to fail")
        wait_until(
            lambda: admin.explain_job(job.id).last_failure is not None, 30, "the failure recorded"
        )
    explained = wfjobs(target, "jobs", "explain", job.id)
    assert explained.returncode == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert lines[0].endswith("is pending")
    assert any(line.startswith("- not_due: not due until") for line in lines)
    failed_at = lines.index(next(line for line in lines if line.startswith("attempt 1 failed")))
    assert "RuntimeError: attempt 1 fails on purpose" in lines[failed_at]
    assert lines[failed_at + 1] == "Traceback (most recent call last):"
    assert lines[-1] == "RuntimeError: attempt 1 fails on purpose"
    as_json = wfjobs_json(target, "jobs", "explain", job.id)
    assert as_json["last_failure"]["outcome"] == "ATTEMPT_OUTCOME_FAILED"
    assert "Traceback (most recent call last)" in as_json["last_failure"]["traceback"]


def test_a_nul_in_one_error_message_spoils_no_other_outcome(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    from worker_sdk import RetryPolicy

    coordinator = processes["coordinator"](e2e_database)
    worker = processes["worker"](coordinator.target)
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        bad = scheduler.enqueue(
            "flaky",
            {"succeed_on": 99, "message": "bytes \x00 in the message"},
            retry_policy=RetryPolicy(max_attempts=1),
        )
        good = [scheduler.enqueue("noop", {"n": i}) for i in range(20)]
        wait_until(
            lambda: all(_status(admin, j.id) == JobStatus.COMPLETED for j in good),
            30,
            "the other jobs to complete",
        )
        wait_until(lambda: _status(admin, bad.id) == JobStatus.FAULTED, 30, "the bad job to fault")
        failed = admin.get_job(bad.id)
        # The NUL is shown escaped; the text around it is kept.
        assert failed.attempts[-1].error == "RuntimeError: bytes \\x00 in the message"
        assert "bytes \\x00 in the message" in failed.attempts[-1].traceback
        # Every other job ran once: no outcome was refused and no lease ran out.
        assert all(len(admin.get_job(j.id).attempts) <= 1 for j in good)
    assert "reconnect" not in worker.log().lower(), worker.log()[-3000:]


def test_an_outcome_batch_the_coordinator_refuses_ends_one_stream_not_every_one(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    """A handler's raw result with a NUL in its content type makes the coordinator
    refuse the whole OutcomeBatch and end the stream. The SDK sends that batch
    again with ReportOutcomes, which answers each outcome on its own: the other
    outcomes are recorded, the refused one is logged, and the next stream lives."""
    coordinator = processes["coordinator"](e2e_database)
    worker = processes["worker"](coordinator.target)
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        bad = scheduler.enqueue("raw-result", {"content_type": "text/plain\x00"})
        good = [scheduler.enqueue("noop", {"n": i}) for i in range(20)]
        wait_until(
            lambda: all(_status(admin, j.id) == JobStatus.COMPLETED for j in good),
            30,
            "the other jobs to complete",
        )
        wait_until(
            lambda: f"rejected outcome(s) for job(s) {bad.id}: INVALID_ARGUMENT" in worker.log(),
            30,
            "the refused outcome to be logged",
        )
        assert _status(admin, bad.id) == JobStatus.RUNNING  # its lease runs out, then a retry
        later = [scheduler.enqueue("noop", {"n": i}) for i in range(5)]
        wait_until(
            lambda: all(_status(admin, j.id) == JobStatus.COMPLETED for j in later),
            30,
            "jobs enqueued afterwards to complete",
        )
    # The refused batch ended one stream; sent again, it ended no other.
    assert worker.log().count("reconnected to coordinator") <= 1, worker.log()[-3000:]
