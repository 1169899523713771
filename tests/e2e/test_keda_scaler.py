"""KEDA's external scaler served by a coordinator process, called as KEDA calls
it (``externalscaler.ExternalScaler`` over gRPC, no token), on both stores:
the ready backlog of the ScaledObject's job types plus the jobs in flight,
paused and scheduled work left out, tenant and category filters, bad
metadata refused, StreamIsActive following the backlog; and the gauges."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from faults.harness import CoordinatorProcess

from coordinator.api.auth import hash_token
from coordinator.model import ScalingFigures
from coordinator.telemetry.instruments import MAX_SCALING_TYPES, OTHER_JOB_TYPES, bounded_by_type
from wfj_testing import coordinator_args, subprocess_env, wait_until
from worker_sdk import AdminClient, SchedulerClient, WorkflowRef
from workflowjobs.externalscaler import externalscaler_pb2 as kpb
from workflowjobs.externalscaler import externalscaler_pb2_grpc as kpb_grpc


def _ref(**metadata: str) -> kpb.ScaledObjectRef:
    return kpb.ScaledObjectRef(name="workers", namespace="jobs", scalerMetadata=metadata)


def _metric(stub: Any, **metadata: str) -> float:
    response = stub.GetMetrics(
        kpb.GetMetricsRequest(scaledObjectRef=_ref(**metadata), metricName="s0-wfjobs_backlog"),
        timeout=30,
    )
    [value] = response.metricValues
    assert value.metricName == "s0-wfjobs_backlog"
    assert value.metricValue == int(value.metricValueFloat)
    return value.metricValueFloat


def _settled(stub: Any, want: float, **metadata: str) -> float:
    """The metric once the scaler's cached figure (at most about 1 s old) shows ``want``."""
    seen: list[float] = []

    def shows() -> bool:
        seen.append(_metric(stub, **metadata))
        return seen[-1] == want

    try:
        wait_until(shows, 30, f"the metric of {metadata} to be {want}")
    except AssertionError:
        pass
    return seen[-1]


def test_the_scaler_answers_ready_plus_in_flight_without_paused_or_scheduled_work(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    target = coordinator.target
    channel = grpc.insecure_channel(target)
    stub = kpb_grpc.ExternalScalerStub(channel)
    email = {"jobTypes": "email"}
    assert stub.IsActive(_ref(**email), timeout=30).result is False
    assert _settled(stub, 0, **email) == 0
    [spec] = stub.GetMetricSpec(_ref(**email, targetPerReplica="2.5"), timeout=30).metricSpecs
    assert (spec.metricName, spec.targetSizeFloat, spec.targetSize) == ("wfjobs_backlog", 2.5, 2)
    [spec] = stub.GetMetricSpec(_ref(**email), timeout=30).metricSpecs
    assert spec.targetSizeFloat == 10

    stream = stub.StreamIsActive(_ref(jobTypes="sleep"), timeout=120)
    assert next(stream).result is False

    with SchedulerClient(target) as client, AdminClient(target) as admin:
        for _ in range(3):
            client.enqueue("email", {}, workflow=WorkflowRef(definition_id="newsletter"))
        client.enqueue("email", {}, tenant_id="other", category="integration")
        client.enqueue("email", {}, delay=timedelta(hours=1))  # scheduled: not ready
        client.enqueue("report", {})
        assert _settled(stub, 4, **email) == 4
        assert _settled(stub, 5, jobTypes="email,report") == 5
        assert _settled(stub, 1, jobTypes="email", tenant="other") == 1
        assert _settled(stub, 1, jobTypes="email", category="integration") == 1
        assert stub.IsActive(_ref(**email), timeout=30).result is True
        # A paused definition does not scale workers up.
        admin.pause("definition", "newsletter", reason="frozen")
        assert _settled(stub, 1, **email) == 1
        # Jobs in flight keep their workers: a running job counts with nothing ready.
        client.enqueue("sleep", {"seconds": 60})
        processes["worker"](target)
        assert next(stream).result is True  # the stream follows the backlog
        wait_until(
            lambda: any(j.status.name == "RUNNING" for j in admin.iter_jobs()), 60, "sleep to run"
        )
        assert _settled(stub, 1, jobTypes="sleep") == 1
        assert stub.IsActive(_ref(jobTypes="sleep"), timeout=30).result is True
    stream.cancel()

    for metadata, words in (
        ({}, "scalerMetadata.jobTypes is required"),
        ({"jobTypes": "email", "category": "nope"}, "is not a job category"),
        ({"jobTypes": "email", "targetPerReplica": "0"}, "targetPerReplica must be a number"),
    ):
        with pytest.raises(grpc.RpcError) as refused:
            stub.IsActive(_ref(**metadata), timeout=30)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert words in (refused.value.details() or "")
    channel.close()


def test_the_gauges_keep_at_most_a_hundred_job_types() -> None:
    rows = [
        ScalingFigures(
            f"type-{i:03d}", ready=i, scheduled=1, running=1, oldest_ready_due_at=1000 + i
        )
        for i in range(150)
    ]
    bounded = bounded_by_type(rows)
    assert len(bounded) == MAX_SCALING_TYPES
    kept = {r.job_type for r in bounded}
    assert "type-149" in kept and "type-000" not in kept  # the busiest keep their own
    [other] = [r for r in bounded if r.job_type == OTHER_JOB_TYPES]
    summed = rows[: 150 - MAX_SCALING_TYPES + 1]
    assert other.ready == sum(r.ready for r in summed)
    assert other.running == len(summed)
    assert other.oldest_ready_due_at == 1000
    assert sum(r.demand for r in bounded) == sum(r.demand for r in rows)


def _tokens(path: Path) -> Path:
    entry = {
        "name": "keda",
        "sha256": hash_token("keda-secret"),
        "roles": ["worker"],
        "tenants": ["*"],
    }
    path.write_text(json.dumps(entry) + "\n")
    return path


def _refused(stub: Any, metadata: tuple[tuple[str, str], ...] | None) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as refused:
        stub.IsActive(_ref(jobTypes="email"), timeout=30, metadata=metadata)
    return refused.value.code()


def test_scaler_requires_token_closes_the_scaler_to_calls_without_a_known_token(
    e2e_database: str, tmp_path: Path
) -> None:
    """``--scaler-requires-token``: no token or an unknown one is UNAUTHENTICATED;
    any token of the file (whatever its roles) gets the figures."""
    tokens = _tokens(tmp_path / "tokens.jsonl")
    coordinator = CoordinatorProcess(
        e2e_database, tmp_path, args=["--tokens-file", str(tokens), "--scaler-requires-token"]
    )
    try:
        with grpc.insecure_channel(coordinator.target) as channel:
            stub = kpb_grpc.ExternalScalerStub(channel)
            assert _refused(stub, None) == grpc.StatusCode.UNAUTHENTICATED
            assert _refused(stub, (("authorization", "Bearer nope"),)) == (
                grpc.StatusCode.UNAUTHENTICATED
            )
            known = (("authorization", "Bearer keda-secret"),)
            assert stub.IsActive(_ref(jobTypes="email"), timeout=30, metadata=known).result is False
            [value] = stub.GetMetrics(
                kpb.GetMetricsRequest(scaledObjectRef=_ref(jobTypes="email")),
                timeout=30,
                metadata=known,
            ).metricValues
            assert value.metricValue == 0
    finally:
        coordinator.stop()


def test_with_tokens_the_scaler_is_open_by_default_and_closed_by_the_environment(
    tmp_path: Path,
) -> None:
    tokens = _tokens(tmp_path / "tokens.jsonl")
    database = f"sqlite:///{tmp_path / 'scaler.db'}"
    open_by_default = CoordinatorProcess(
        database, tmp_path, env={"WFJOBS_TOKENS_FILE": str(tokens)}, name="open"
    )
    try:
        with grpc.insecure_channel(open_by_default.target) as channel:
            stub = kpb_grpc.ExternalScalerStub(channel)
            assert stub.IsActive(_ref(jobTypes="email"), timeout=30).result is False
    finally:
        open_by_default.stop()
    closed = CoordinatorProcess(
        database,
        tmp_path,
        env={"WFJOBS_TOKENS_FILE": str(tokens), "WFJOBS_AUTH_OPEN_SCALER": "0"},
        name="closed",
    )
    try:
        with grpc.insecure_channel(closed.target) as channel:
            stub = kpb_grpc.ExternalScalerStub(channel)
            assert _refused(stub, None) == grpc.StatusCode.UNAUTHENTICATED
    finally:
        closed.stop()


def test_scaler_requires_token_without_a_token_file_is_refused_at_start(tmp_path: Path) -> None:
    result = subprocess.run(
        coordinator_args(
            f"sqlite:///{tmp_path / 'x.db'}", "127.0.0.1:0", "--scaler-requires-token"
        ),
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_env(),
    )
    assert result.returncode == 5
    assert "--scaler-requires-token (WFJOBS_AUTH_OPEN_SCALER=0) needs authentication" in (
        result.stderr
    )
