"""Uniqueness keys end to end, over real gRPC to a coordinator process on both
stores: fifty concurrent debounced enqueues of one key become one job with a
sent payload, the SDK's and the CLI's rules, ExplainJob's DEBOUNCED reason,
bad rules refused with INVALID_ARGUMENT; and on PostgreSQL the same race
split over two replicas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2, timestamp_pb2

from wfj_testing import REPO
from worker_sdk import (
    AdminClient,
    JobRequest,
    JobStatus,
    SchedulerClient,
    UniqueKeyRule,
    Uniqueness,
)
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc

BIN = Path(sys.executable).parent
CALLERS = 50


def wfjobs(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), WFJOBS_TARGET=target)
    return subprocess.run(
        [str(BIN / "wfjobs"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def _debounced_spec(key: str, n: int) -> jpb.JobSpec:
    return jpb.JobSpec(
        job_type="noop",
        tenant_id="tenant-u",
        payload=jpb.Payload(data=json.dumps({"n": n}).encode(), content_type="application/json"),
        uniqueness=jpb.Uniqueness(
            key=key,
            debounce=jpb.Debounce(
                delay=duration_pb2.Duration(seconds=3600),
                max_wait=duration_pb2.Duration(seconds=7200),
            ),
        ),
    )


def _race(stubs: list[Any], key: str) -> list[spb.EnqueueResponse]:
    futures = [
        stubs[n % len(stubs)].Enqueue.future(spb.EnqueueRequest(job=_debounced_spec(key, n)))
        for n in range(CALLERS)
    ]
    answers = []
    for f in futures:
        answers.append(f.result(timeout=60))
    return answers


def _check_one_job(answers: list[spb.EnqueueResponse], stub: Any) -> str:
    assert len({a.job.id for a in answers}) == 1
    assert sorted(a.debounced for a in answers) == [False] + [True] * (CALLERS - 1)
    assert sorted(a.deduplicated for a in answers) == [False] + [True] * (CALLERS - 1)
    job = stub.GetJob(spb.GetJobRequest(job_id=answers[0].job.id), timeout=30).job
    assert json.loads(job.payload.data)["n"] in range(CALLERS)
    return job.id


def test_debounce_while_and_period_over_grpc_sdk_and_cli(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    with grpc.insecure_channel(coordinator.target) as channel:
        stub = spb_grpc.JobSchedulerServiceStub(channel)
        admin = apb_grpc.AdminServiceStub(channel)
        plain = stub.Enqueue(
            spb.EnqueueRequest(job=jpb.JobSpec(job_type="noop", tenant_id="tenant-u"))
        ).job
        job_id = _check_one_job(_race([stub], "storm"), stub)
        explained = admin.ExplainJob(apb.ExplainJobRequest(job_id=job_id), timeout=30)
        [reason] = [r for r in explained.reasons if r.kind == apb.WaitReason.KIND_DEBOUNCED]
        assert reason.count == CALLERS - 1
        assert "uniqueness key 'storm'" in reason.message
        # The key that names the job, with what debounce did to it.
        key = explained.unique_key
        assert (key.key, key.rule, key.debounced) == (
            "storm",
            apb.UNIQUE_KEY_RULE_DEBOUNCE,
            CALLERS - 1,
        )
        assert key.last_debounce_time.ToMicroseconds() >= key.admit_time.ToMicroseconds() > 0
        assert not key.HasField("window_end_time")
        unkeyed = admin.ExplainJob(apb.ExplainJobRequest(job_id=plain.id), timeout=30)
        assert not unkeyed.HasField("unique_key")

        # Bad rules: INVALID_ARGUMENT naming the field, nothing stored.
        for spec, words in (
            (jpb.JobSpec(job_type="noop", uniqueness=jpb.Uniqueness(key="k")), "names no rule"),
            (
                jpb.JobSpec(
                    job_type="noop",
                    due_time=timestamp_pb2.Timestamp(seconds=4_000_000_000),
                    uniqueness=jpb.Uniqueness(
                        key="k", debounce=jpb.Debounce(delay=duration_pb2.Duration(seconds=5))
                    ),
                ),
                "cannot have a due_time",
            ),
            (
                jpb.JobSpec(
                    job_type="noop",
                    uniqueness=jpb.Uniqueness(key="k", unique_while=jpb.UniqueWhile(statuses=[42])),
                ),
                "known JobStatus",
            ),
        ):
            spec.tenant_id = "tenant-u"
            with pytest.raises(grpc.RpcError) as refused:
                stub.Enqueue(spb.EnqueueRequest(job=spec), timeout=30)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert words in (refused.value.details() or "")
            with pytest.raises(grpc.RpcError) as refused:
                stub.EnqueueBatch(
                    spb.EnqueueBatchRequest(
                        jobs=[jpb.JobSpec(job_type="noop", tenant_id="tenant-u"), spec]
                    ),
                    timeout=30,
                )
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert (refused.value.details() or "").startswith("jobs[1]: ")

    with SchedulerClient(coordinator.target) as client:
        first = client.enqueue("noop", {"a": 1}, uniqueness=Uniqueness.unique_while("sdk"))
        again = client.enqueue("noop", {"a": 2}, uniqueness=Uniqueness.unique_while("sdk"))
        assert (again.id, again.deduplicated, again.debounced) == (first.id, True, False)
        assert again.payload_value() == {"a": 1}
        period = Uniqueness.for_period("daily", 86400)
        results = client.enqueue_batch(
            [
                *(JobRequest("noop", i, uniqueness=period) for i in range(3)),
            ]
        )
        assert len({r.job_id for r in results}) == 1
        assert [r.deduplicated for r in results] == [False, True, True]
        assert all(r.status == JobStatus.PENDING for r in results)
    with AdminClient(coordinator.target) as admin_client:
        held = admin_client.explain_job(first.id).unique_key
        assert held is not None
        assert (held.key, held.rule, held.window_ends, held.debounced) == (
            "sdk",
            UniqueKeyRule.WHILE,
            None,
            0,
        )
        daily = admin_client.explain_job(results[0].job_id).unique_key
        assert daily is not None and daily.rule == UniqueKeyRule.PERIOD
        assert daily.admitted is not None and daily.window_ends is not None
        assert daily.window_ends - daily.admitted == timedelta(days=1)
        assert str(daily).startswith("uniqueness key 'daily' (period), admits a new job from ")

    target = coordinator.target
    made = wfjobs(target, "enqueue", "noop", '{"v": 1}', "--unique-key", "cli", "--debounce", "1h")
    assert made.returncode == 0, made.stderr
    job_id = made.stdout.split()[0]
    moved = wfjobs(
        target,
        "enqueue",
        "noop",
        '{"v": 2}',
        "--unique-key",
        "cli",
        "--debounce",
        "1h",
        "--max-wait",
        "2h",
    )
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.startswith(f"{job_id} pending (debounced")
    explain = wfjobs(target, "jobs", "explain", job_id)
    assert explain.returncode == 0, explain.stderr
    assert "debounced" in explain.stdout
    # The first enqueue admitted the key without a max wait: the second's is not applied.
    assert "\nuniqueness key 'cli' (debounce), debounced 1 time(s)\n" in explain.stdout
    as_json = wfjobs(target, "--json", "jobs", "explain", job_id)
    assert as_json.returncode == 0, as_json.stderr
    shown = json.loads(as_json.stdout)["unique_key"]
    assert (shown["key"], shown["rule"], shown["debounced"]) == (
        "cli",
        "UNIQUE_KEY_RULE_DEBOUNCE",
        "1",
    )
    bad = wfjobs(target, "enqueue", "noop", "--debounce", "1h")
    assert bad.returncode != 0 and "--unique-key" in bad.stderr


@pytest.fixture
def pg_url(pg_database: str):
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_unique")
    yield url
    drop()


def test_debounced_enqueues_of_one_key_over_two_replicas_make_one_job(
    pg_url: str, processes: dict[str, Callable[..., Any]]
) -> None:
    first = processes["coordinator"](pg_url)
    second = processes["coordinator"](pg_url)
    with (
        grpc.insecure_channel(first.target) as one,
        grpc.insecure_channel(second.target) as two,
    ):
        stubs = [spb_grpc.JobSchedulerServiceStub(one), spb_grpc.JobSchedulerServiceStub(two)]
        for stub in stubs:
            stub.Enqueue(spb.EnqueueRequest(job=jpb.JobSpec(job_type="noop", tenant_id="tenant-u")))
        for round_ in range(3):
            _check_one_job(_race(stubs, f"storm-{round_}"), stubs[0])
