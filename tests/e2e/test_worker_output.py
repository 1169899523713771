"""What a worker prints out of the box, read as a user reads it: its stderr."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from wfj_testing import Coordinator, ManagedProcess, subprocess_env, wait_until
from worker_sdk import AdminClient, JobFilter, SchedulerClient, __version__

# A worker as the README writes one: no logging set-up at all.
WORKER_APP = textwrap.dedent(
    """
    import sys

    from worker_sdk import JobContext, Worker

    worker = Worker(sys.argv[1], concurrency=4, worker_id="talker", reconnect_max_backoff=0.5)

    @worker.handler("greet")
    async def greet(payload: dict, ctx: JobContext) -> dict:
        ctx.logger.info("greeting %s", payload["name"])
        return {"greeting": "hello " + payload["name"]}

    @worker.handler("boom")
    def boom(payload: dict) -> None:
        raise ValueError("the disk is full")

    @worker.handler("checksum")
    def checksum(payload: bytes) -> bytes:
        return sum(payload).to_bytes(2, "big")

    worker.run()
    """
)


class UserWorker(ManagedProcess):
    def __init__(self, app: Path, target: str, log_path: Path, env: dict[str, str]) -> None:
        self._spawn([sys.executable, str(app), target], log_path, env=env)


def start_worker(tmp_path: Path, target: str, **env: str) -> UserWorker:
    app = tmp_path / "app.py"
    app.write_text(WORKER_APP)
    return UserWorker(app, target, tmp_path / "worker.log", env)


def lines_with(worker: UserWorker, text: str) -> list[str]:
    return [line for line in worker.log().splitlines() if text in line]


def test_worker_prints_start_connection_changes_and_failed_attempts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'talk.db'}"
    coordinator = Coordinator(url, tmp_path / "coordinator-1.log")
    target = coordinator.target
    worker = start_worker(tmp_path, target)
    try:
        wait_until(lambda: lines_with(worker, "connected to coordinator"), 30, "connected line")
        with SchedulerClient(target) as client:
            ok = client.enqueue("greet", {"name": "Ada"})
            bad = client.enqueue("boom", {}, max_attempts=2)
            client.wait_for_job(ok.id, timeout=30)
            wait_until(lambda: len(lines_with(worker, "failed after")) == 2, 30, "two failures")

        coordinator.stop()
        wait_until(lambda: lines_with(worker, "lost the connection"), 30, "lost line")
        coordinator = Coordinator(url, tmp_path / "coordinator-2.log", listen=target)
        wait_until(lambda: lines_with(worker, "reconnected to coordinator"), 30, "reconnect")
    finally:
        worker.stop()
        coordinator.stop()

    log = worker.log()
    (started,) = lines_with(worker, "started")
    assert f"INFO worker_sdk.worker worker talker started (workflow-jobs {__version__})" in started
    assert f"coordinator {target}, job types greet, boom, checksum, 4 slot(s)" in started
    (connected,) = lines_with(worker, "connected to coordinator")[:1]
    assert f"at {target} as worker talker" in connected
    assert "INFO worker_sdk.job greeting Ada" in log
    first, second = lines_with(worker, "failed after")
    assert f"WARNING worker_sdk.job job {bad.id} (boom) attempt 1/2 failed after" in first
    assert first.endswith("s: ValueError: the disk is full")
    assert second.endswith("s: ValueError: the disk is full; no attempts left")
    (lost,) = lines_with(worker, "lost the connection")
    assert f"WARNING worker_sdk.worker lost the connection to the coordinator at {target}" in lost
    assert "running jobs carry on" in lost
    (back,) = lines_with(worker, "reconnected to coordinator")
    assert f"at {target} after " in back
    # Nothing per successful job by default.
    assert ok.id not in log
    assert "Traceback" not in log


def test_worker_log_level_and_json_format_come_from_the_environment(tmp_path: Path) -> None:
    coordinator = Coordinator(f"sqlite:///{tmp_path / 'json.db'}", tmp_path / "coordinator.log")
    worker = start_worker(
        tmp_path, coordinator.target, WFJOBS_LOG_LEVEL="debug", WFJOBS_LOG_FORMAT="json"
    )
    try:
        wait_until(lambda: lines_with(worker, "connected to coordinator"), 30, "connected line")
        with SchedulerClient(coordinator.target) as client:
            ok = client.enqueue("greet", {"name": "Grace"})
            client.wait_for_job(ok.id, timeout=30)
        wait_until(lambda: lines_with(worker, "completed in"), 30, "the DEBUG completion line")
    finally:
        worker.stop()
        coordinator.stop()

    records = [json.loads(line) for line in worker.log().splitlines() if line.startswith("{")]
    (completed,) = [r for r in records if "completed in" in r["message"]]
    assert completed["level"] == "DEBUG"
    assert completed["job_id"] == ok.id
    assert completed["message"].startswith(f"job {ok.id} (greet) attempt 1/3 completed in ")
    (greeting,) = [r for r in records if r["message"] == "greeting Grace"]
    assert greeting["logger"] == "worker_sdk.job" and greeting["job_type"] == "greet"


def test_bad_log_level_stops_the_worker_with_a_message(tmp_path: Path) -> None:
    worker = start_worker(tmp_path, "127.0.0.1:1", WFJOBS_LOG_LEVEL="chatty")
    worker.proc.wait(30)
    worker.stop()

    assert worker.proc.returncode != 0
    assert (
        "WFJOBS_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, not 'chatty'"
        in (worker.log())
    )


def test_a_failed_attempt_shows_its_traceback_in_jobs_show(
    tmp_path: Path, e2e_database: str
) -> None:
    coordinator = Coordinator(e2e_database, tmp_path / "coordinator.log")
    worker = start_worker(tmp_path, coordinator.target)
    try:
        with SchedulerClient(coordinator.target) as client:
            job = client.enqueue("boom", {}, max_attempts=1)
            client.wait_for_job(job.id, timeout=30)
            view = client.get_job(job.id, include_attempts=True)
        shown = subprocess.run(
            [str(Path(sys.executable).parent / "wfjobs"), "jobs", "show", job.id],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=subprocess_env({"WFJOBS_TARGET": coordinator.target}),
        )
    finally:
        worker.stop()
        coordinator.stop()

    (attempt,) = view.attempts
    assert attempt.traceback.startswith("Traceback (most recent call last):\n")
    assert attempt.traceback.endswith("ValueError: the disk is full\n")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "traceback of attempt 1 (talker):" in out
    block = out.split("traceback of attempt 1 (talker):\n", 1)[1].splitlines()
    assert block[0] == "  Traceback (most recent call last):"
    # It starts in the user's code: the SDK's frames are left out.
    assert block[1].startswith('    File "') and block[1].endswith('app.py", line 15, in boom')
    assert block[2] == '      raise ValueError("the disk is full")'
    assert block[3] == "  ValueError: the disk is full"


def run_wfjobs(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "wfjobs"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=subprocess_env({"WFJOBS_TARGET": target}),
    )


def test_enqueue_wait_prints_the_result_or_the_error_and_show_decodes_payloads(
    tmp_path: Path,
) -> None:
    coordinator = Coordinator(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "coordinator.log")
    target = coordinator.target
    worker = start_worker(tmp_path, target)
    try:
        ok = run_wfjobs(target, "enqueue", "greet", '{"name": "Ada"}', "--wait", "120s")
        bad = run_wfjobs(target, "enqueue", "boom", "{}", "--max-attempts", "1", "--wait", "120s")
        job_id = ok.stdout.split()[0]
        shown = run_wfjobs(target, "jobs", "show", job_id)
        shown_json = json.loads(run_wfjobs(target, "--json", "jobs", "show", job_id).stdout)
    finally:
        worker.stop()
        coordinator.stop()

    assert ok.returncode == 0, ok.stderr
    # The id first, as soon as the job is enqueued, then how it ended.
    assert ok.stdout.splitlines() == [
        f"{job_id} pending",
        f"{job_id} completed",
        'result: {"greeting": "hello Ada"}',
    ]
    assert bad.returncode == 8
    lines = bad.stdout.splitlines()
    assert lines[0].endswith(" pending")
    assert lines[1] == f"{lines[0].split()[0]} faulted"
    assert lines[2] == "error: ValueError: the disk is full"
    assert "traceback of attempt 1 (talker):" in lines
    assert lines[-1] == "  ValueError: the disk is full"
    fields = dict(line.split(None, 1) for line in shown.stdout.split("\n\n")[0].splitlines())
    assert fields["payload"] == '{"name": "Ada"}'
    assert fields["result"] == '{"greeting": "hello Ada"}'
    assert shown_json["payload"]["value"] == {"name": "Ada"}
    assert shown_json["payload"]["content_type"] == "application/json"
    assert shown_json["result"]["value"] == {"greeting": "hello Ada"}


def test_enqueue_wait_that_ends_first_prints_the_id_and_why_the_job_still_waits(
    tmp_path: Path,
) -> None:
    """No worker takes the type: ``--wait 3s`` ends after its own 3 s (not the
    30 s call timeout), with the id printed first, the job's status and its first
    ExplainJob reason, and exit code 10, not 5 (coordinator unreachable)."""
    coordinator = Coordinator(f"sqlite:///{tmp_path / 'wait.db'}", tmp_path / "coordinator.log")
    target = coordinator.target
    try:
        waited = run_wfjobs(
            target, "enqueue", "nobody.runs", "{}", "--wait", "3s", "--timeout", "120"
        )
        as_json = run_wfjobs(target, "--json", "enqueue", "nobody.runs", "{}", "--wait", "250ms")
        with AdminClient(target) as admin:
            jobs = list(admin.iter_jobs(JobFilter(job_type="nobody.runs")))
    finally:
        coordinator.stop()
    assert waited.returncode == 10, waited.stderr
    [line] = waited.stdout.splitlines()
    job_id, status = line.split()
    assert status == "pending"
    assert (
        f"wfjobs: job {job_id} is still pending after 3s (--wait): no_worker: " in waited.stderr
    ), waited.stderr
    assert f"wfjobs jobs explain {job_id}" in waited.stderr
    assert "did not answer" not in waited.stderr
    assert as_json.returncode == 10, as_json.stderr
    assert json.loads(as_json.stdout)["status"] == "JOB_STATUS_PENDING"
    assert "after 0.25s (--wait)" in as_json.stderr
    # Both jobs stay enqueued, once each: the user need not enqueue again.
    assert sorted(j.id for j in jobs) == sorted([job_id, json.loads(as_json.stdout)["id"]])


def test_show_prints_binary_payload_and_result_as_hex_with_their_size(
    tmp_path: Path, e2e_database: str
) -> None:
    coordinator = Coordinator(e2e_database, tmp_path / "coordinator.log")
    target = coordinator.target
    worker = start_worker(tmp_path, target)
    data = bytes(range(70))  # more than the 64 bytes shown
    try:
        with SchedulerClient(target) as client:
            job = client.enqueue("checksum", data)
            done = client.wait_for_job(job.id, timeout=30)
        shown = run_wfjobs(target, "jobs", "show", job.id)
        shown_json = json.loads(run_wfjobs(target, "--json", "jobs", "show", job.id).stdout)
    finally:
        worker.stop()
        coordinator.stop()

    assert done.status.name == "COMPLETED"
    assert shown.returncode == 0, shown.stderr
    fields = dict(line.split(None, 1) for line in shown.stdout.split("\n\n")[0].splitlines())
    first_64 = " ".join(f"{b:02x}" for b in range(64))
    assert fields["payload"] == f"70 bytes application/octet-stream: {first_64} ..."
    # sum(range(70)) == 2415 == 0x096f
    assert fields["result"] == "2 bytes application/octet-stream: 09 6f"
    assert shown_json["payload"]["content_type"] == "application/octet-stream"
    assert shown_json["payload"]["hex"] == data.hex()
    assert shown_json["payload"]["size"] == 70
    assert shown_json["result"]["hex"] == "096f"
    assert shown_json["result"]["size"] == 2


def test_enqueue_wait_exits_8_when_the_job_is_cancelled_while_it_waits(
    tmp_path: Path, e2e_database: str
) -> None:
    coordinator = Coordinator(e2e_database, tmp_path / "coordinator.log")
    target = coordinator.target
    # Nobody serves the job type: the job stays pending until another client cancels it.
    waiting = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "wfjobs"),
            "enqueue",
            "nobody-serves-this",
            "{}",
            "--wait",
            "60s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env({"WFJOBS_TARGET": target}),
    )
    try:
        # The id comes first, while it waits.
        assert waiting.stdout is not None
        job_id, status = waiting.stdout.readline().split()
        assert status == "pending"
        with AdminClient(target) as admin:
            (job,) = admin.list_jobs(JobFilter(job_types=["nobody-serves-this"])).jobs
            assert job.id == job_id
            assert waiting.poll() is None, "wfjobs returned before the job was cancelled"
            admin.cancel_job(job.id, reason="not needed any more")
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
        coordinator.stop()

    assert waiting.returncode == 8, err
    assert err == ""
    assert out.splitlines() == [f"{job.id} cancelled", "error: cancelled: not needed any more"]
