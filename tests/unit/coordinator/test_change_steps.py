"""Steps of docs/design.md's "Where to change what" that are easy to forget,
each caught here when it is.

- A job field: the contract's ``JobSpec`` and ``Job``, ``convert.new_job_from_spec``
  and ``fill_job``, ``enqueue.record_of_new``, and the SDK's ``JobRequest`` and
  ``JobView``. A ``JobSpec`` field must survive enqueue to ``GetJob``.
- A setting: its ``Settings`` field, its ``WFJOBS_*`` variable in ``from_env``,
  and the docs naming that variable.
- A telemetry hook: its no-op in ``telemetry/hooks.py`` and its OpenTelemetry
  implementation in ``telemetry/instruments.py``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
from datetime import timedelta

from google.protobuf import duration_pb2, timestamp_pb2

from coordinator import settings as settings_module
from coordinator.api import convert
from coordinator.engine.enqueue import record_of_new
from coordinator.settings import Settings
from coordinator.telemetry.hooks import EngineTelemetry
from coordinator.telemetry.instruments import OtelEngineTelemetry
from wfj_testing import REPO
from worker_sdk import JobRequest, JobView, RetryPolicy, Uniqueness, WorkflowRef
from workflowjobs.v1 import job_pb2 as jpb

# Enqueue-time rules, not stored with the job (docs/uniqueness.md,
# docs/scheduler-ticks.md: a tick becomes the job's idempotency key).
NOT_ON_THE_JOB = {"uniqueness", "schedule_tick"}
# JobSpec fields the SDK sets outside JobRequest (SchedulerClient.enqueue_tick).
NOT_IN_JOB_REQUEST = {"schedule_tick"}
# Job fields JobView does not carry (the job's own settings, not its state).
NOT_IN_JOB_VIEW = {
    "execution_timeout",
    "heartbeat_timeout",
    "retry_policy",
    "traceparent",
    "tracestate",
    "trace_links",
}

# Every workflow reference set.
WORKFLOW = {
    "definition_id": "d",
    "definition_version": 3,
    "instance_id": "i",
    "activity_id": "a",
    "activity_node_id": "n",
    "bookmark_id": "b",
    "correlation_id": "c",
}


def _full_spec() -> jpb.JobSpec:
    return jpb.JobSpec(
        job_type="t",
        tenant_id="acme",
        workflow=jpb.WorkflowRef(**WORKFLOW),
        payload=jpb.Payload(data=b"x", content_type="application/json"),
        category=jpb.JOB_CATEGORY_INTEGRATION,
        priority=5,
        due_time=timestamp_pb2.Timestamp(seconds=2_000_000_000),
        retry_policy=jpb.RetryPolicy(
            max_attempts=4, initial_backoff=duration_pb2.Duration(seconds=2)
        ),
        execution_timeout=duration_pb2.Duration(seconds=60),
        heartbeat_timeout=duration_pb2.Duration(seconds=30),
        idempotency_key="k",
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        tracestate="s=1",
        concurrency_key="ck",
        parent_job_id="0123456789abcdef",
        ordering_key="ok",
        uniqueness=jpb.Uniqueness(key="u"),
        schedule_tick=jpb.ScheduleTick(schedule_id="s"),
        group_id="0190b6e2-5c1a-7d3e-8f00-123456789abc",
    )


def _set_fields(message: object) -> set[str]:
    return {f.name for f, _ in message.ListFields()}  # type: ignore[attr-defined]


def test_every_job_spec_field_reaches_the_stored_job_and_get_job() -> None:
    spec = _full_spec()
    # A field added to JobSpec fails here until this spec sets it (and the
    # assertions below show it is stored and answered).
    assert _set_fields(spec) == set(jpb.JobSpec.DESCRIPTOR.fields_by_name)
    assert _set_fields(spec.workflow) == set(jpb.WorkflowRef.DESCRIPTOR.fields_by_name)
    job = dataclasses.replace(convert.new_job_from_spec(spec), id="j1")
    answered = convert.job_to_proto(record_of_new(job))
    for name in jpb.JobSpec.DESCRIPTOR.fields_by_name:
        if name in NOT_ON_THE_JOB:
            continue
        assert getattr(answered, name) == getattr(spec, name), name
    assert set(jpb.JobSpec.DESCRIPTOR.fields_by_name) - NOT_ON_THE_JOB <= set(
        jpb.Job.DESCRIPTOR.fields_by_name
    )


def test_the_sdk_job_request_sets_every_job_spec_field() -> None:
    values = {
        "job_type": "t",
        "payload": {"a": 1},
        "tenant_id": "acme",
        "workflow": WorkflowRef(**WORKFLOW),  # type: ignore[arg-type]
        "category": "integration",
        "priority": 5,
        "delay": timedelta(seconds=5),
        "retry_policy": RetryPolicy(max_attempts=4),
        "execution_timeout": timedelta(seconds=60),
        "heartbeat_timeout": timedelta(seconds=30),
        "idempotency_key": "k",
        "concurrency_key": "ck",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "s=1",
        "parent_job_id": "0123456789abcdef",
        "ordering_key": "ok",
        "uniqueness": Uniqueness.unique_while("u"),
        "group_id": "0190b6e2-5c1a-7d3e-8f00-123456789abc",
    }
    # The request's fields that have no JobSpec field of their own.
    folded = {"due", "max_attempts", "content_type"}
    assert set(values) | folded == {f.name for f in dataclasses.fields(JobRequest)}
    spec = JobRequest(**values).to_proto()  # type: ignore[arg-type]
    assert _set_fields(spec) == set(jpb.JobSpec.DESCRIPTOR.fields_by_name) - NOT_IN_JOB_REQUEST
    assert _set_fields(spec.workflow) == set(jpb.WorkflowRef.DESCRIPTOR.fields_by_name)


def test_job_view_carries_every_job_field_but_the_listed_ones() -> None:
    carried = {f.name for f in dataclasses.fields(JobView)}
    assert set(jpb.Job.DESCRIPTOR.fields_by_name) - carried == NOT_IN_JOB_VIEW


def _from_env_keywords() -> set[str]:
    source = textwrap.dedent(inspect.getsource(Settings.from_env))
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    built = next(c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "cls")
    return {k.arg for k in built.keywords if k.arg}


def test_every_setting_is_read_from_its_environment_variable() -> None:
    assert _from_env_keywords() == {f.name for f in dataclasses.fields(Settings)}


def test_every_environment_variable_of_the_settings_is_documented() -> None:
    variables = set(re.findall(r"WFJOBS_[A-Z_]+", inspect.getsource(settings_module)))
    docs = (REPO / "README.md").read_text() + "".join(
        p.read_text() for p in sorted((REPO / "docs").glob("*.md"))
    )
    assert variables and sorted(v for v in variables if v not in docs) == []


def test_every_telemetry_hook_has_its_opentelemetry_implementation() -> None:
    hooks = {n for n, v in vars(EngineTelemetry).items() if callable(v) and not n.startswith("_")}
    implemented = {n for n in hooks if n in vars(OtelEngineTelemetry)}
    assert hooks and hooks == implemented
