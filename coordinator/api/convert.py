"""Protobuf <-> domain conversion, in one place.

Malformed wire values (unknown enums, negative durations, bad timestamps)
are rejected here with INVALID_ARGUMENT before anything reaches the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf import duration_pb2, timestamp_pb2

from coordinator.engine.explain import WaitReason
from coordinator.errors import InvalidArgument
from coordinator.model import (
    AttemptRow,
    ConcurrencyLimit,
    JobFilter,
    JobRow,
    JobStatus,
    LimitKind,
    NewJob,
    PauseKind,
    PauseScope,
    RetryPolicy,
)
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import worker_service_pb2 as wpb

_CATEGORIES = set(jpb.JobCategory.values())
_STATUSES = {s.value for s in JobStatus}
_MAX_TIME_US = 253402300799 * 1_000_000  # year 9999


def ts_to_us(ts: timestamp_pb2.Timestamp, field: str) -> int:
    us = ts.seconds * 1_000_000 + ts.nanos // 1000
    if ts.seconds < 0 or us > _MAX_TIME_US or not 0 <= ts.nanos < 1_000_000_000:
        raise InvalidArgument(f"{field} is not a valid timestamp")
    return us


def us_to_ts(us: int | None) -> timestamp_pb2.Timestamp | None:
    if us is None:
        return None
    return timestamp_pb2.Timestamp(seconds=us // 1_000_000, nanos=(us % 1_000_000) * 1000)


def duration_ms(d: duration_pb2.Duration, field: str) -> int:
    if d.seconds < 0 or d.nanos < 0:
        raise InvalidArgument(f"{field} must not be negative")
    if d.seconds > 366 * 86400:
        raise InvalidArgument(f"{field} is longer than a year")
    return d.seconds * 1000 + d.nanos // 1_000_000


def ms_to_duration(ms: int | None) -> duration_pb2.Duration | None:
    if ms is None:
        return None
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def retry_policy_from_proto(p: jpb.RetryPolicy) -> RetryPolicy:
    if p.max_attempts < 0:
        raise InvalidArgument("retry_policy.max_attempts must not be negative")
    if p.backoff_multiplier < 0 or (p.backoff_multiplier and p.backoff_multiplier < 1):
        raise InvalidArgument("retry_policy.backoff_multiplier must be >= 1")
    if not 0 <= p.jitter <= 1:
        raise InvalidArgument("retry_policy.jitter must be between 0 and 1")
    return RetryPolicy(
        max_attempts=p.max_attempts or None,
        initial_backoff_ms=(
            duration_ms(p.initial_backoff, "retry_policy.initial_backoff")
            if p.HasField("initial_backoff")
            else None
        ),
        backoff_multiplier=p.backoff_multiplier or None,
        max_backoff_ms=(
            duration_ms(p.max_backoff, "retry_policy.max_backoff")
            if p.HasField("max_backoff")
            else None
        ),
        jitter=p.jitter if p.jitter else None,
        non_retryable_error_kinds=tuple(p.non_retryable_error_kinds),
    )


def retry_policy_to_proto(text: str | None) -> jpb.RetryPolicy:
    p = RetryPolicy.from_json(text)
    return jpb.RetryPolicy(
        max_attempts=p.max_attempts or 0,
        initial_backoff=ms_to_duration(p.initial_backoff_ms),
        backoff_multiplier=p.backoff_multiplier or 0.0,
        max_backoff=ms_to_duration(p.max_backoff_ms),
        jitter=p.jitter or 0.0,
        non_retryable_error_kinds=list(p.non_retryable_error_kinds),
    )


def new_job_from_spec(spec: jpb.JobSpec, default_max_attempts: int) -> NewJob:
    """A job spec from the wire as a domain job (id and times filled by the engine)."""
    if spec.category not in _CATEGORIES:
        raise InvalidArgument(f"category {spec.category} is not a known JobCategory")
    policy = retry_policy_from_proto(spec.retry_policy)
    wf = spec.workflow
    return NewJob(
        id="",
        job_type=spec.job_type,
        tenant_id=spec.tenant_id,
        definition_id=wf.definition_id,
        definition_version=wf.definition_version,
        instance_id=wf.instance_id,
        activity_id=wf.activity_id,
        activity_node_id=wf.activity_node_id,
        bookmark_id=wf.bookmark_id,
        correlation_id=wf.correlation_id,
        payload=spec.payload.data,
        content_type=spec.payload.content_type,
        category=spec.category,
        priority=spec.priority,
        due_at=ts_to_us(spec.due_time, "due_time") if spec.HasField("due_time") else 0,
        max_attempts=policy.max_attempts or default_max_attempts,
        retry_policy=policy.to_json(),
        execution_timeout_ms=(
            duration_ms(spec.execution_timeout, "execution_timeout")
            if spec.HasField("execution_timeout")
            else None
        ),
        heartbeat_timeout_ms=(
            duration_ms(spec.heartbeat_timeout, "heartbeat_timeout") or None
            if spec.HasField("heartbeat_timeout")
            else None
        ),
        idempotency_key=spec.idempotency_key or None,
        traceparent=spec.traceparent,
        tracestate=spec.tracestate,
        concurrency_key=spec.concurrency_key or None,
    )


def job_to_proto(row: JobRow, attempts: Sequence[AttemptRow] = ()) -> jpb.Job:
    return jpb.Job(
        id=row.id,
        job_type=row.job_type,
        tenant_id=row.tenant_id,
        workflow=jpb.WorkflowRef(
            definition_id=row.definition_id,
            definition_version=row.definition_version,
            instance_id=row.instance_id,
            activity_id=row.activity_id,
            activity_node_id=row.activity_node_id,
            bookmark_id=row.bookmark_id,
            correlation_id=row.correlation_id,
        ),
        payload=jpb.Payload(data=row.payload, content_type=row.content_type),
        category=row.category,  # type: ignore[arg-type]
        priority=row.priority,
        status=row.status,  # type: ignore[arg-type]
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        retry_policy=retry_policy_to_proto(row.retry_policy) if row.retry_policy else None,
        execution_timeout=ms_to_duration(row.execution_timeout_ms),
        heartbeat_timeout=ms_to_duration(row.heartbeat_timeout_ms),
        create_time=us_to_ts(row.created_at),
        due_time=us_to_ts(row.due_at),
        finish_time=us_to_ts(row.finished_at),
        lease_owner=row.lease_owner or "",
        lease_expire_time=us_to_ts(row.lease_expires_at),
        last_error=row.last_error or "",
        result=(
            jpb.Payload(data=row.result, content_type=row.result_content_type or "")
            if row.result is not None
            else None
        ),
        idempotency_key=row.idempotency_key or "",
        traceparent=row.traceparent,
        tracestate=row.tracestate,
        concurrency_key=row.concurrency_key or "",
        cancel_requested=bool(row.cancel_requested),
        replay_of=row.replay_of or "",
        attempts=[attempt_to_proto(a) for a in attempts],
    )


def attempt_to_proto(a: AttemptRow) -> jpb.JobAttempt:
    return jpb.JobAttempt(
        number=a.number,
        worker_id=a.worker_id or "",
        start_time=us_to_ts(a.started_at),
        end_time=us_to_ts(a.ended_at),
        outcome=a.outcome,  # type: ignore[arg-type]
        error=a.error or "",
        error_kind=a.error_kind or "",
    )


def leased_job(row: JobRow, token: str) -> wpb.LeasedJob:
    return wpb.LeasedJob(
        job=job_to_proto(row), lease_token=token, lease_expire_time=us_to_ts(row.lease_expires_at)
    )


def filter_from_proto(f: apb.JobFilter) -> JobFilter:
    for s in f.statuses:
        if s not in _STATUSES:
            raise InvalidArgument(f"status {s} is not a known JobStatus")
    if f.category and f.category not in _CATEGORIES:
        raise InvalidArgument(f"category {f.category} is not a known JobCategory")
    return JobFilter(
        statuses=tuple(f.statuses),
        tenant_id=f.tenant_id,
        job_type=f.job_type,
        definition_id=f.definition_id,
        instance_id=f.instance_id,
        correlation_id=f.correlation_id,
        category=f.category,
        created_after=ts_to_us(f.created_after, "created_after")
        if f.HasField("created_after")
        else None,
        created_before=(
            ts_to_us(f.created_before, "created_before") if f.HasField("created_before") else None
        ),
        due_after=ts_to_us(f.due_after, "due_after") if f.HasField("due_after") else None,
        due_before=ts_to_us(f.due_before, "due_before") if f.HasField("due_before") else None,
    )


def scope_from_proto(s: apb.PauseScope) -> PauseScope:
    try:
        kind = PauseKind(s.kind)
    except ValueError:
        raise InvalidArgument(
            "scope.kind must be TENANT, DEFINITION, INSTANCE or JOB_TYPE"
        ) from None
    return PauseScope(kind=kind, tenant_id=s.tenant_id, value=s.value)


def pause_to_proto(r: Any) -> apb.PauseRecord:
    return apb.PauseRecord(
        id=r.id,
        scope=apb.PauseScope(kind=r.kind, tenant_id=r.tenant_id, value=r.value),
        actor=r.actor,
        reason=r.reason,
        create_time=us_to_ts(r.created_at),
        expire_time=us_to_ts(r.expires_at),
        lift_time=us_to_ts(r.lifted_at),
        lifted_by=r.lifted_by or "",
    )


def limit_from_proto(limit: apb.ConcurrencyLimit) -> ConcurrencyLimit:
    try:
        kind = LimitKind(limit.kind)
    except ValueError:
        raise InvalidArgument(
            "limit.kind must be TENANT, JOB_TYPE, DEFINITION or CONCURRENCY_KEY"
        ) from None
    return ConcurrencyLimit(kind, limit.value, limit.max_running)


def limit_to_proto(limit: ConcurrencyLimit, running: int) -> apb.ConcurrencyLimit:
    return apb.ConcurrencyLimit(
        kind=int(limit.kind),  # type: ignore[arg-type]
        value=limit.value,
        max_running=limit.max_running,
        running=running,
    )


def wait_reason_to_proto(reason: WaitReason) -> apb.WaitReason:
    return apb.WaitReason(
        kind=apb.WaitReason.Kind.Value(f"KIND_{reason.kind}"),
        message=reason.message,
        until=us_to_ts(reason.until),
        pause_id=reason.pause_id,
        count=reason.count,
        limit=reason.limit,
    )


def worker_to_proto(w: Any) -> apb.WorkerInfo:
    """A ``coordinator.engine.operations.WorkerView`` on the wire."""
    return apb.WorkerInfo(
        worker_id=w.worker_id,
        hostname=w.hostname,
        pid=w.pid,
        sdk_version=w.sdk_version,
        job_types=list(w.job_types),
        slots=w.slots,
        in_flight_job_ids=list(w.in_flight),
        connect_time=us_to_ts(w.connected_at or None),
        last_heartbeat_time=us_to_ts(w.last_heartbeat_at or None),
        coordinator_id=w.coordinator_id,
        credits=w.credits,
        draining=w.draining,
    )
