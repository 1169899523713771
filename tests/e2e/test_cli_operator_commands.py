"""``wfjobs`` as an operator uses it, through its process against a real coordinator:
``jobs count``, ``enqueue --from-file`` (JSON lines, in batches, per-line errors),
what ``jobs show`` and ``enqueue --json`` tell, the ``job-type`` spelling and the
unknown-type warning of ``pause``, and what ``jobs retry`` does to a due time.

The CLI only reads what the coordinator answers, so one SQLite coordinator serves
the module; the store's side of each call is tested on both stores elsewhere.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest

from wfj_testing import Coordinator, subprocess_env
from worker_sdk import AdminClient, JobFilter, JobStatus, SchedulerClient
from workflowjobs.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    job_pb2,
    scheduler_service_pb2,
    scheduler_service_pb2_grpc,
    worker_service_pb2_grpc,
)
from workflowjobs.v1 import worker_service_pb2 as wpb

WFJOBS = str(Path(sys.executable).parent / "wfjobs")
# How every surface writes a time for people (workflowjobs.times).
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    tmp = tmp_path_factory.mktemp("cli-operator")
    coordinator = Coordinator(f"sqlite:///{tmp / 'cli.db'}", tmp / "coordinator.log")
    try:
        yield coordinator
    finally:
        coordinator.stop()


@pytest.fixture(scope="module")
def target(coordinator: Coordinator) -> str:
    return coordinator.target


def wfjobs(target: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WFJOBS, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=subprocess_env({"WFJOBS_TARGET": target}),
    )


def count(target: str, *args: str) -> int:
    out = wfjobs(target, "jobs", "count", *args)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def jobs_of(target: str, tenant: str) -> list[str]:
    with AdminClient(target) as admin:
        return [j.id for j in admin.iter_jobs(JobFilter(tenant_id=tenant))]


# -- jobs count ------------------------------------------------------------------------------


def test_jobs_count_takes_the_filters_of_jobs_list(target: str) -> None:
    with SchedulerClient(target) as scheduler, AdminClient(target) as admin:
        for job_type in ("count-mail", "count-mail", "count-sms"):
            scheduler.enqueue(job_type, {}, tenant_id="count-t")
        cancelled = scheduler.enqueue("count-sms", {}, tenant_id="count-t")
        admin.cancel_job(cancelled.id)

    assert count(target, "--tenant", "count-t") == 4
    assert count(target, "--tenant", "count-t", "--job-type", "count-mail") == 2
    # --type is the same option (the spelling scripts used before --job-type).
    assert count(target, "--tenant", "count-t", "--type", "count-sms") == 2
    assert count(target, "--tenant", "count-t", "--job-type", "count-mail,count-sms") == 4
    assert count(target, "--tenant", "count-t", "--status", "cancelled") == 1
    assert count(target, "--tenant", "no-such-tenant") == 0
    listed = wfjobs(target, "--json", "jobs", "list", "--tenant", "count-t", "--status", "pending")
    as_json = wfjobs(
        target, "--json", "jobs", "count", "--tenant", "count-t", "--status", "pending"
    )
    assert (
        json.loads(as_json.stdout)
        == {"count": len(json.loads(listed.stdout)["jobs"])}
        == {"count": 3}
    )


# -- enqueue --from-file ---------------------------------------------------------------------


def test_enqueue_from_file_enqueues_every_line_in_batches(target: str, tmp_path: Path) -> None:
    lines = [json.dumps({"payload": {"n": n}}) for n in range(1, 1201)]
    lines.insert(3, "")  # a blank line is skipped, and still counted in the numbering
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")

    out = wfjobs(target, "enqueue", "bulk-line", "--tenant", "bulk-t", "--from-file", str(path))

    assert out.returncode == 0, out.stderr
    printed = out.stdout.splitlines()
    assert printed[-1] == f"enqueued 1200 of 1200 line(s) of {path}"
    assert printed[0].startswith("line 1: ") and printed[0].endswith(" pending")
    assert printed[3].startswith("line 5: ")  # line 4 was the blank one
    assert count(target, "--tenant", "bulk-t", "--job-type", "bulk-line") == 1200
    with AdminClient(target) as admin:
        by_line = {line.split()[1].rstrip(":"): line.split()[2] for line in printed[:-1]}
        job = admin.get_job(by_line["1201"])
    assert json.loads(job.payload) == {"n": 1200}


def test_enqueue_from_standard_input_takes_per_line_options(target: str) -> None:
    lines = "\n".join(
        [
            json.dumps({"job_type": "stdin-a", "payload": [1], "priority": 5, "delay": "1h"}),
            json.dumps({"job_type": "stdin-b", "tenant": "stdin-other", "idempotency_key": "k1"}),
            json.dumps({"job_type": "stdin-b", "tenant": "stdin-other", "idempotency_key": "k1"}),
        ]
    )

    out = wfjobs(
        target, "--json", "enqueue", "--tenant", "stdin-t", "--from-file", "-", stdin=lines
    )

    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert [(e["line"], e["deduplicated"]) for e in answer["enqueued"]] == [
        (1, False),
        (2, False),
        (3, True),
    ]
    assert answer["refused"] == []
    assert answer["enqueued"][1]["job_id"] == answer["enqueued"][2]["job_id"]
    with AdminClient(target) as admin:
        first = admin.get_job(answer["enqueued"][0]["job_id"])
        second = admin.get_job(answer["enqueued"][1]["job_id"])
    assert (first.tenant_id, first.job_type, first.priority) == ("stdin-t", "stdin-a", 5)
    assert first.due_time is not None and first.due_time > datetime.now(UTC) + timedelta(minutes=50)
    assert (second.tenant_id, second.job_type) == ("stdin-other", "stdin-b")


def test_a_malformed_line_enqueues_nothing_and_names_each_bad_line(
    target: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"job_type": "bad-file", "payload": 1}),
                "{not json",
                json.dumps({"job_type": "bad-file", "priorty": 3}),
                json.dumps({"job_type": "bad-file", "delay": "soon"}),
                json.dumps(["bad-file"]),
                json.dumps({"job_type": "bad-file", "unique_for": "1m", "debounce": "1m"}),
                json.dumps({"payload": 2}),
            ]
        )
    )

    out = wfjobs(target, "enqueue", "--tenant", "bad-t", "--from-file", str(path))

    assert out.returncode == 2
    assert out.stdout == ""
    errors = out.stderr.splitlines()
    assert [e.split(":")[1].strip() for e in errors[:-1]] == [
        "line 2",
        "line 3",
        "line 4",
        "line 5",
        "line 6",
        "line 7",
    ]
    assert "not JSON" in errors[0] and "'priorty'" in errors[1] and "'soon'" in errors[2]
    assert "no job_type" in errors[5]
    assert errors[-1] == f"wfjobs: 6 line(s) of {path} are not valid; nothing was enqueued"
    assert jobs_of(target, "bad-t") == []


def test_a_line_the_coordinator_refuses_is_named_and_the_others_enqueued(
    target: str, tmp_path: Path
) -> None:
    path = tmp_path / "refused.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"payload": 1}),
                json.dumps({"payload": 2, "group": "no-such-group"}),
                json.dumps({"payload": 3}),
            ]
        )
    )

    out = wfjobs(
        target, "enqueue", "refused-line", "--tenant", "refused-t", "--from-file", str(path)
    )

    assert out.returncode != 0
    assert re.fullmatch(r"wfjobs: line 2: .*no-such-group.*\n", out.stderr), out.stderr
    printed = out.stdout.splitlines()
    assert [p.split(":")[0] for p in printed[:-1]] == ["line 1", "line 3"]
    assert printed[-1] == f"enqueued 2 of 3 line(s) of {path}; refused: line 2"
    with AdminClient(target) as admin:
        payloads = sorted(
            json.loads(admin.get_job(j).payload) for j in jobs_of(target, "refused-t")
        )
    assert payloads == [1, 3]


def test_from_file_refuses_options_each_line_must_give_itself(target: str, tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"payload": 1}) + "\n")

    out = wfjobs(
        target, "enqueue", "x", "--idempotency-key", "same", "--wait", "--from-file", str(path)
    )

    assert out.returncode == 2
    assert "--wait, --idempotency-key" in out.stderr
    missing = wfjobs(target, "enqueue")
    assert missing.returncode == 2 and "give the job type" in missing.stderr


# -- what enqueue --json and jobs show tell ----------------------------------------------------


def test_enqueue_json_says_whether_it_was_deduplicated_or_debounced(target: str) -> None:
    base = ("--json", "enqueue", "json-dedup", "{}", "--tenant", "json-t")
    first = json.loads(wfjobs(target, *base, "--idempotency-key", "j1").stdout)
    again = json.loads(wfjobs(target, *base, "--idempotency-key", "j1").stdout)
    debounce = ("--unique-key", "d1", "--debounce", "1h")
    wfjobs(target, *base, *debounce)
    debounced = json.loads(wfjobs(target, *base, *debounce).stdout)

    assert (first["deduplicated"], first["debounced"]) == (False, False)
    assert (again["deduplicated"], again["id"]) == (True, first["id"])
    assert debounced["debounced"] is True


def _cancelled_while_running(target: str) -> str:
    """A job cancelled while it ran whose attempt then completed with a result."""
    with grpc.insecure_channel(target) as channel:
        scheduler = scheduler_service_pb2_grpc.JobSchedulerServiceStub(channel)
        worker = worker_service_pb2_grpc.WorkerServiceStub(channel)
        admin = admin_service_pb2_grpc.AdminServiceStub(channel)
        answer = scheduler.Enqueue(
            scheduler_service_pb2.EnqueueRequest(
                job=job_pb2.JobSpec(job_type="show-cancelled", tenant_id="show-t"),
                inline=scheduler_service_pb2.InlineExecution(worker_id="raw-worker"),
            )
        )
        job_id, token = answer.job.id, answer.lease_token
        admin.CancelJob(admin_service_pb2.CancelJobRequest(job_id=job_id, reason="stop it"))
        worker.Heartbeat(
            wpb.HeartbeatRequest(
                worker_id="raw-worker", leases=[wpb.LeaseRef(job_id=job_id, lease_token=token)]
            )
        )
        result = job_pb2.Payload(data=b'{"done": true}', content_type="application/json")
        worker.CompleteJob(wpb.CompleteJobRequest(job_id=job_id, lease_token=token, result=result))
    return job_id


def _fields(text: str) -> dict[str, str]:
    """The ``key  value`` block that opens ``jobs show``."""
    block = text.split("\n\n")[0]
    return dict(re.split(r"\s{2,}", line, maxsplit=1) for line in block.splitlines())


def test_jobs_show_tells_a_cancelled_job_s_reason_and_kept_result(target: str) -> None:
    job_id = _cancelled_while_running(target)

    shown = wfjobs(target, "jobs", "show", job_id)
    as_json = json.loads(wfjobs(target, "--json", "jobs", "show", job_id).stdout)

    assert shown.returncode == 0, shown.stderr
    fields = _fields(shown.stdout)
    assert fields["status"] == "cancelled"
    assert fields["cancel reason"] == as_json["cancel_reason"] == "stop it"
    assert fields["result"] == '{"done": true}'
    assert as_json["result"]["value"] == {"done": True}
    # The lease was the running attempt's: an ended job shows none (attempts keep the worker).
    assert "lease owner" not in fields and "lease expires" not in fields
    assert as_json["lease_owner"] == "raw-worker"  # kept by the job, left out by the table
    assert "raw-worker" in shown.stdout.split("\n\n")[1]


def test_jobs_show_writes_times_as_the_dashboard_does_and_no_version_when_none(
    target: str,
) -> None:
    with SchedulerClient(target) as scheduler:
        job = scheduler.enqueue("show-times", {}, tenant_id="show-t", delay=3600)
    with_definition = wfjobs(target, "enqueue", "show-times", "--definition", "billing")
    job_with_definition = with_definition.stdout.split()[0]

    fields = _fields(wfjobs(target, "jobs", "show", job.id).stdout)
    other = _fields(wfjobs(target, "jobs", "show", job_with_definition).stdout)
    listed = wfjobs(target, "jobs", "list", "--tenant", "show-t", "--job-type", "show-times")

    assert re.fullmatch(TIME, fields["created"]) and re.fullmatch(TIME, fields["due"])
    assert re.search(TIME, listed.stdout.splitlines()[1])
    assert other["definition"] == "billing"  # no version was given: no "v0"


def test_text_logs_write_times_as_the_cli_and_the_dashboard_do(
    coordinator: Coordinator,
) -> None:
    logged = TIME.replace(" UTC", r"\.\d{3} UTC")
    lines = coordinator.log_path.read_text().splitlines()
    assert lines and all(
        re.match(logged + " [A-Z]+ ", line) for line in lines if line[:1].isdigit()
    )
    assert re.match(logged + " INFO ", lines[0]), lines[0]
    # A worker's default stderr logging (no logging set up by the application).
    worker = subprocess.run(
        [
            sys.executable,
            "-c",
            "import logging\n"
            "from worker_sdk._logging import install_default_logging\n"
            "install_default_logging({})\n"
            "logging.getLogger('worker_sdk.worker').info('started')",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=subprocess_env(),
    )
    assert re.fullmatch(logged + " INFO worker_sdk.worker started\n", worker.stderr), worker.stderr


def test_a_running_job_shows_its_lease(target: str) -> None:
    with grpc.insecure_channel(target) as channel:
        scheduler = scheduler_service_pb2_grpc.JobSchedulerServiceStub(channel)
        answer = scheduler.Enqueue(
            scheduler_service_pb2.EnqueueRequest(
                job=job_pb2.JobSpec(job_type="show-running", tenant_id="show-t"),
                inline=scheduler_service_pb2.InlineExecution(worker_id="lease-worker"),
            )
        )

    fields = _fields(wfjobs(target, "jobs", "show", answer.job.id).stdout)

    assert fields["status"] == "running"
    assert fields["lease owner"] == "lease-worker"
    assert re.fullmatch(TIME, fields["lease expires"])


# -- retry and a due time ----------------------------------------------------------------------


def test_retrying_a_cancelled_delayed_job_says_it_is_due_now(target: str) -> None:
    with SchedulerClient(target) as scheduler, AdminClient(target) as admin:
        job = scheduler.enqueue("retry-delayed", {}, tenant_id="retry-t", delay=86400)
        admin.cancel_job(job.id)

    out = wfjobs(target, "jobs", "retry", job.id)
    bulk_dry = wfjobs(
        target, "jobs", "retry", "--tenant", "retry-t", "--status", "cancelled", "--dry-run"
    )

    assert out.returncode == 0, out.stderr
    assert out.stdout == f"retried {job.id}: now pending, due now\n"
    with AdminClient(target) as admin:
        retried = admin.get_job(job.id)
    assert retried.status == JobStatus.PENDING
    assert retried.due_time is not None and retried.due_time < job.due_time - timedelta(hours=23)
    assert bulk_dry.stdout == "would retry 0 job(s) (dry run; nothing changed)\n"


# -- pause job-type ------------------------------------------------------------------------------


def test_pausing_a_job_type_nothing_knows_warns(target: str) -> None:
    with SchedulerClient(target) as scheduler:
        scheduler.enqueue("pause-known", {}, tenant_id="pause-t")

    unknown = wfjobs(target, "pause", "job-type", "pause-nosuch")
    known = wfjobs(target, "pause", "job-type", "pause-known")
    wfjobs(target, "unpause", "job-type", "pause-nosuch")
    wfjobs(target, "unpause", "job-type", "pause-known")

    assert unknown.returncode == 0
    assert unknown.stdout.startswith("paused job-type pause-nosuch")
    assert "warning: no job and no connected worker has job type 'pause-nosuch'" in unknown.stderr
    assert known.returncode == 0 and known.stderr == ""
