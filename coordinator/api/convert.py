"""Protobuf <-> domain conversion, in one place.

Malformed wire values (unknown enums, negative durations, bad timestamps)
are rejected here with INVALID_ARGUMENT before anything reaches the engine.

Enum fields are set from the domain's numbers (its IntEnums equal the proto
enums). protoc's ``.pyi`` types an enum argument as the enum's own class, which
no int is, though protobuf takes any int there: those lines carry
``# type: ignore[arg-type]`` naming that stub.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from coordinator.api.errors import status_for
from coordinator.engine import OutcomeResult
from coordinator.engine.explain import WaitReason
from coordinator.engine.validation import check_length, keep_head, keep_tail
from coordinator.errors import InvalidArgument
from coordinator.model import (
    DEFAULT_MISFIRE_GRACE_US,
    LIVE_STATUSES,
    AttemptRow,
    Completion,
    ConcurrencyLimit,
    EventFilter,
    Failure,
    GroupRow,
    JobEvent,
    JobEventKind,
    JobFilter,
    JobRow,
    JobStatus,
    JobTypeDefaults,
    LimitKind,
    MisfirePolicy,
    NewJob,
    OrderingFailure,
    PauseKind,
    PauseRecord,
    PauseScope,
    RateLimit,
    Release,
    RetryPolicy,
    ScalingFigures,
    ScheduleTick,
    UniqueKeyRow,
    Uniqueness,
    UniqueRule,
)
from workflowjobs.contract import (
    LATEST_TIME_US,
    LONGEST_SPAN_DAYS,
    LONGEST_SPAN_S,
    MAX_STRING_LENGTH,
    MAX_TRACEBACK_BYTES,
)
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import worker_service_pb2 as wpb

_CATEGORIES = set(jpb.JobCategory.values())
_STATUSES = frozenset(int(s) for s in JobStatus)


def backlog_to_proto(b: ScalingFigures) -> apb.Backlog:
    """A tenant's job type's backlog (or the sum of several) as GetStats answers it."""
    return apb.Backlog(
        tenant_id=b.tenant_id,
        job_type=b.job_type,
        ready=b.ready,
        scheduled=b.scheduled,
        held_paused=b.paused,
        held_limit=b.limit,
        held_rate=b.rate,
        held_ordering=b.ordering,
        held_no_worker=b.no_worker,
        held_drained=b.drained,
        running=b.running,
    )


def ts_to_us(ts: timestamp_pb2.Timestamp, field: str) -> int:
    us = ts.seconds * 1_000_000 + ts.nanos // 1000
    if ts.seconds < 0 or us > LATEST_TIME_US or not 0 <= ts.nanos < 1_000_000_000:
        raise InvalidArgument(f"{field} is not a valid timestamp")
    return us


def us_to_ts(us: int | None) -> timestamp_pb2.Timestamp | None:
    if us is None:
        return None
    return timestamp_pb2.Timestamp(seconds=us // 1_000_000, nanos=(us % 1_000_000) * 1000)


def duration_ms(d: duration_pb2.Duration, field: str) -> int:
    if d.seconds < 0 or d.nanos < 0:
        raise InvalidArgument(f"{field} must not be negative")
    if d.nanos >= 1_000_000_000:
        raise InvalidArgument(f"{field} is not a valid duration (nanos must be below 10^9)")
    if d.seconds > LONGEST_SPAN_S:
        raise InvalidArgument(f"{field} is longer than {LONGEST_SPAN_DAYS} days")
    return d.seconds * 1000 + d.nanos // 1_000_000


def ms_to_duration(ms: int | None) -> duration_pb2.Duration | None:
    if ms is None:
        return None
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def retry_policy_from_proto(p: jpb.RetryPolicy, field: str = "retry_policy") -> RetryPolicy:
    """The wire policy as a domain policy; zero fields mean "unset".

    Bounds (finite, in range) are the engine's rule (``engine/validation.py``),
    checked for every policy it stores.
    """
    return RetryPolicy(
        max_attempts=p.max_attempts or None,
        initial_backoff_ms=(
            duration_ms(p.initial_backoff, f"{field}.initial_backoff")
            if p.HasField("initial_backoff")
            else None
        ),
        backoff_multiplier=p.backoff_multiplier or None,
        max_backoff_ms=(
            duration_ms(p.max_backoff, f"{field}.max_backoff")
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


def new_job_from_spec(spec: jpb.JobSpec) -> NewJob:
    """A job spec from the wire as a domain job (id and times filled by the engine).

    Unset messages (retry policy, workflow refs, durations) are not read
    field by field: most specs leave them out, and each read costs.
    """
    if spec.category not in _CATEGORIES:
        raise InvalidArgument(f"category {spec.category} is not a known JobCategory")
    payload = spec.payload
    job = NewJob(
        "",
        spec.job_type,
        spec.tenant_id,
        payload=payload.data,
        content_type=payload.content_type,
        category=spec.category,
        priority=spec.priority,
        # 0: not set here; the engine applies the job type's default, else its own.
        max_attempts=0,
        idempotency_key=spec.idempotency_key or None,
        traceparent=spec.traceparent,
        tracestate=spec.tracestate,
        concurrency_key=spec.concurrency_key or None,
        parent_job_id=spec.parent_job_id or None,
        ordering_key=spec.ordering_key or None,
        group_id=spec.group_id or None,
    )
    if spec.HasField("retry_policy"):
        policy = retry_policy_from_proto(spec.retry_policy)
        job.max_attempts = policy.max_attempts or 0
        job.retry_policy = policy.to_json()
    if spec.HasField("workflow"):
        wf = spec.workflow
        job.definition_id = wf.definition_id
        job.definition_version = wf.definition_version
        job.instance_id = wf.instance_id
        job.activity_id = wf.activity_id
        job.activity_node_id = wf.activity_node_id
        job.bookmark_id = wf.bookmark_id
        job.correlation_id = wf.correlation_id
    if spec.HasField("due_time"):
        job.due_at = ts_to_us(spec.due_time, "due_time")
    if spec.HasField("execution_timeout"):
        job.execution_timeout_ms = duration_ms(spec.execution_timeout, "execution_timeout")
    if spec.HasField("heartbeat_timeout"):
        job.heartbeat_timeout_ms = duration_ms(spec.heartbeat_timeout, "heartbeat_timeout") or None
    return job


def uniqueness_from_spec(spec: jpb.JobSpec) -> Uniqueness | None:
    """The uniqueness rule of a job spec, or None (read only when the spec has one)."""
    if not spec.HasField("uniqueness"):
        return None
    u = spec.uniqueness
    which = u.WhichOneof("rule")
    if which == "unique_while":
        statuses = tuple(JobStatus(s) for s in u.unique_while.statuses if s in _STATUSES)
        if len(statuses) != len(u.unique_while.statuses):
            raise InvalidArgument(
                "uniqueness.unique_while.statuses: every status must be a known JobStatus"
            )
        return Uniqueness(u.key, UniqueRule.WHILE, statuses or LIVE_STATUSES)
    if which == "period":
        period = duration_ms(u.period, "uniqueness.period") * 1000
        return Uniqueness(u.key, UniqueRule.PERIOD, period_us=period)
    if which == "debounce":
        delay = duration_ms(u.debounce.delay, "uniqueness.debounce.delay") * 1000
        max_wait = duration_ms(u.debounce.max_wait, "uniqueness.debounce.max_wait") * 1000
        return Uniqueness(u.key, UniqueRule.DEBOUNCE, delay_us=delay, max_wait_us=max_wait)
    raise InvalidArgument(
        "uniqueness names no rule: set unique_while, period or debounce (docs/uniqueness.md)"
    )


def schedule_tick_from_spec(spec: jpb.JobSpec) -> ScheduleTick | None:
    """The scheduler tick of a job spec, or None (read only when the spec has one)."""
    if not spec.HasField("schedule_tick"):
        return None
    t = spec.schedule_tick
    if t.misfire_policy not in _MISFIRE_POLICIES:
        raise InvalidArgument(
            f"schedule_tick.misfire_policy {t.misfire_policy} is not a known MisfirePolicy"
        )
    nominal = (
        ts_to_us(t.nominal_time, "schedule_tick.nominal_time") if t.HasField("nominal_time") else 0
    )
    grace = (
        duration_ms(t.misfire_grace, "schedule_tick.misfire_grace") * 1000
        if t.HasField("misfire_grace")
        else DEFAULT_MISFIRE_GRACE_US
    )
    policy = MisfirePolicy(t.misfire_policy or MisfirePolicy.FIRE_ONCE_LATE)
    return ScheduleTick(t.schedule_id, nominal, policy, grace)


_MISFIRE_POLICIES = frozenset(jpb.MisfirePolicy.values())


def _set_ts(ts: timestamp_pb2.Timestamp, us: int) -> None:
    ts.seconds = us // 1_000_000
    ts.nanos = (us % 1_000_000) * 1000


def _set_duration_ms(d: duration_pb2.Duration, ms: int) -> None:
    d.seconds = ms // 1000
    d.nanos = (ms % 1000) * 1_000_000


def _set_workflow(message: Any, src: JobRow | JobEvent) -> None:
    """Set ``message.workflow`` from the workflow fields of ``src``, only those set
    (and the message not at all when none is)."""
    if not (
        src.definition_id
        or src.instance_id
        or src.activity_id
        or src.activity_node_id
        or src.bookmark_id
        or src.correlation_id
        or src.definition_version
    ):
        return
    wf = message.workflow
    if src.definition_id:
        wf.definition_id = src.definition_id
    if src.definition_version:
        wf.definition_version = src.definition_version
    if src.instance_id:
        wf.instance_id = src.instance_id
    if src.activity_id:
        wf.activity_id = src.activity_id
    if src.activity_node_id:
        wf.activity_node_id = src.activity_node_id
    if src.bookmark_id:
        wf.bookmark_id = src.bookmark_id
    if src.correlation_id:
        wf.correlation_id = src.correlation_id


def fill_job(job: jpb.Job, row: JobRow, attempts: Sequence[AttemptRow] = ()) -> jpb.Job:
    """Copy a stored job into ``job``.

    Assigns fields one by one and skips empty ones: several times faster
    than building the message from keyword arguments, and this runs for
    every job handed to a worker.
    """
    job.id = row.id
    job.job_type = row.job_type
    job.tenant_id = row.tenant_id
    _set_workflow(job, row)
    payload = job.payload
    payload.data = row.payload
    payload.content_type = row.content_type
    if row.category:
        job.category = row.category  # type: ignore[assignment]  # protoc .pyi: an enum is its class
    if row.priority:
        job.priority = row.priority
    job.status = row.status  # type: ignore[assignment]  # protoc .pyi: an enum is its class
    job.attempt = row.attempt
    job.max_attempts = row.max_attempts
    if row.released_attempts:
        job.released_attempts = row.released_attempts
    if row.retry_policy:
        job.retry_policy.CopyFrom(retry_policy_to_proto(row.retry_policy))
    if row.execution_timeout_ms is not None:
        _set_duration_ms(job.execution_timeout, row.execution_timeout_ms)
    if row.heartbeat_timeout_ms is not None:
        _set_duration_ms(job.heartbeat_timeout, row.heartbeat_timeout_ms)
    _set_ts(job.create_time, row.created_at)
    _set_ts(job.due_time, row.due_at)
    if row.finished_at is not None:
        _set_ts(job.finish_time, row.finished_at)
    if row.lease_owner:
        job.lease_owner = row.lease_owner
    if row.lease_expires_at is not None:
        _set_ts(job.lease_expire_time, row.lease_expires_at)
    if row.last_error:
        job.last_error = row.last_error
    if row.result is not None:
        job.result.data = row.result
        job.result.content_type = row.result_content_type or ""
    if row.idempotency_key:
        job.idempotency_key = row.idempotency_key
    if row.traceparent:
        job.traceparent = row.traceparent
    if row.tracestate:
        job.tracestate = row.tracestate
    if row.concurrency_key:
        job.concurrency_key = row.concurrency_key
    if row.cancel_requested:
        job.cancel_requested = True
    if row.cancel_reason:
        job.cancel_reason = row.cancel_reason
    if row.replay_of:
        job.replay_of = row.replay_of
    if row.parent_job_id:
        job.parent_job_id = row.parent_job_id
    if row.ordering_key:
        job.ordering_key = row.ordering_key
    if row.group_id:
        job.group_id = row.group_id
    if row.trace_links:
        job.trace_links.extend(json.loads(row.trace_links))
    if attempts:
        job.attempts.extend(attempt_to_proto(a) for a in attempts)
    return job


def job_to_proto(row: JobRow, attempts: Sequence[AttemptRow] = ()) -> jpb.Job:
    return fill_job(jpb.Job(), row, attempts)


def group_to_proto(row: GroupRow) -> jpb.JobGroup:
    counts = row.counts
    return jpb.JobGroup(
        id=row.id,
        tenant_id=row.tenant_id,
        status=int(row.status),  # type: ignore[arg-type]  # protoc .pyi: an enum is its class
        total=row.total,
        pending=counts.get(int(JobStatus.PENDING), 0),
        running=counts.get(int(JobStatus.RUNNING), 0),
        completed=counts.get(int(JobStatus.COMPLETED), 0),
        faulted=counts.get(int(JobStatus.FAULTED), 0),
        cancelled=counts.get(int(JobStatus.CANCELLED), 0),
        completion_job_id=row.completion_job_id or "",
        create_time=us_to_ts(row.created_at),
        close_time=us_to_ts(row.closed_at),
        complete_time=us_to_ts(row.completed_at),
    )


def attempt_to_proto(a: AttemptRow) -> jpb.JobAttempt:
    return jpb.JobAttempt(
        number=a.number,
        worker_id=a.worker_id or "",
        start_time=us_to_ts(a.started_at),
        end_time=us_to_ts(a.ended_at),
        outcome=a.outcome,  # type: ignore[arg-type]  # protoc .pyi: an enum is its class
        error=a.error or "",
        error_kind=a.error_kind or "",
        traceback=a.traceback or "",
    )


def add_leased_job(batch: wpb.JobBatch, row: JobRow, token: str) -> None:
    """Append a leased job to a batch message in place."""
    leased = batch.jobs.add()
    leased.lease_token = token
    if row.lease_expires_at is not None:
        _set_ts(leased.lease_expire_time, row.lease_expires_at)
    fill_job(leased.job, row)


def failure_from_proto(
    job_id: str, token: str, f: wpb.FailJobRequest | wpb.Failure, limit: int = MAX_STRING_LENGTH
) -> Failure:
    retry_at = ts_to_us(f.retry_time, "retry_time") if f.HasField("retry_time") else None
    check_length(token, "lease_token", limit)
    check_length(f.error_kind, "error_kind", limit)
    return Failure(
        job_id,
        token,
        keep_head(f.error),
        f.error_kind,
        f.non_retryable,
        retry_at,
        traceback=keep_tail(f.traceback, MAX_TRACEBACK_BYTES),
    )


def outcome_from_proto(
    o: wpb.JobOutcome, limit: int = MAX_STRING_LENGTH
) -> Completion | Failure | Release:
    """The outcome a worker reported; its ids and names hold at most ``limit``
    characters, its free text is cut (``keep_head``), never refused."""
    check_length(o.job_id, "job_id", limit)
    check_length(o.lease_token, "lease_token", limit)
    outcome = _outcome_kind_from_proto(o, limit)
    if o.HasField("push_back"):
        # Any length: the engine holds a long one at its ceiling and says so.
        d = o.push_back.retry_after
        if d.seconds < 0 or d.nanos < 0 or d.nanos >= 1_000_000_000:
            raise InvalidArgument(
                f"push_back.retry_after of job {o.job_id} is not a valid duration"
            )
        outcome = dataclasses.replace(outcome, push_back_us=d.seconds * 1_000_000 + d.nanos // 1000)
    return outcome


def _outcome_kind_from_proto(o: wpb.JobOutcome, limit: int) -> Completion | Failure | Release:
    kind = o.WhichOneof("outcome")
    if kind == "completed":
        result = o.completed.result
        check_length(result.content_type, "completed.result.content_type", limit)
        return Completion(o.job_id, o.lease_token, result.data, result.content_type)
    if kind == "failed":
        return failure_from_proto(o.job_id, o.lease_token, o.failed, limit)
    if kind == "released":
        released = o.released
        reason = keep_head(released.reason)
        if released.HasField("payload"):
            payload = released.payload
            check_length(payload.content_type, "released.payload.content_type", limit)
            return Release(o.job_id, o.lease_token, reason, payload.data, payload.content_type)
        return Release(o.job_id, o.lease_token, reason)
    raise InvalidArgument(f"outcome for job {o.job_id} has no kind set")


def outcomes_from_proto(
    outcomes: Sequence[wpb.JobOutcome], limit: int = MAX_STRING_LENGTH
) -> list[Completion | Failure | Release | OutcomeResult]:
    """Each outcome, or the refusal of one that is malformed (its neighbours go on)."""
    converted: list[Completion | Failure | Release | OutcomeResult] = []
    for o in outcomes:
        try:
            converted.append(outcome_from_proto(o, limit))
        except InvalidArgument as e:
            converted.append(OutcomeResult(o.job_id, False, error=e))
    return converted


def fill_outcome_results(into: Any, results: Sequence[OutcomeResult]) -> None:
    """Append ``wpb.OutcomeResult`` messages for ``results`` to the repeated field ``into``."""
    for r in results:
        message = into.add()
        message.job_id = r.job_id
        if r.status is not None:
            message.status = int(r.status)
        if r.accepted:
            message.accepted = True
            if r.already_recorded:
                message.already_recorded = True
            if r.note:
                message.note = r.note
            continue
        code = status_for(r.error) if r.error is not None else None
        message.error_code = (code or grpc.StatusCode.INTERNAL).name
        message.error_message = str(r.error) if r.error is not None else ""


def answers_message(batch_id: int, results: Sequence[OutcomeResult]) -> wpb.AcquireJobsResponse:
    """The stream message answering one ``OutcomeBatch``."""
    message = wpb.AcquireJobsResponse()
    answers = message.outcomes
    answers.batch_id = batch_id
    fill_outcome_results(answers.results, results)
    return message


# Job types one JobFilter may list.
MAX_FILTER_JOB_TYPES = 100


def filter_from_proto(f: apb.JobFilter) -> JobFilter:
    for s in f.statuses:
        if s not in _STATUSES:
            raise InvalidArgument(f"status {s} is not a known JobStatus")
    if f.category and f.category not in _CATEGORIES:
        raise InvalidArgument(f"category {f.category} is not a known JobCategory")
    if len(f.job_types) > MAX_FILTER_JOB_TYPES:
        raise InvalidArgument(
            f"filter.job_types names {len(f.job_types)} job types; at most "
            f"{MAX_FILTER_JOB_TYPES} are allowed"
        )
    if any(not t for t in f.job_types):
        raise InvalidArgument("filter.job_types has an empty job type; name each type")
    return JobFilter(
        statuses=tuple(f.statuses),
        tenant_id=f.tenant_id,
        job_type=f.job_type,
        definition_id=f.definition_id,
        instance_id=f.instance_id,
        correlation_id=f.correlation_id,
        category=f.category,
        job_types=tuple(dict.fromkeys(f.job_types)),
        created_after=ts_to_us(f.created_after, "created_after")
        if f.HasField("created_after")
        else None,
        created_before=(
            ts_to_us(f.created_before, "created_before") if f.HasField("created_before") else None
        ),
        due_after=ts_to_us(f.due_after, "due_after") if f.HasField("due_after") else None,
        due_before=ts_to_us(f.due_before, "due_before") if f.HasField("due_before") else None,
        failed_after=(
            ts_to_us(f.failed_after, "failed_after") if f.HasField("failed_after") else None
        ),
        parent_job_id=f.parent_job_id,
        group_id=f.group_id,
    )


def newest_first(order: int) -> bool:
    """A ListJobs order: True for newest first; INVALID_ARGUMENT for an unknown one."""
    if order not in apb.JobListOrder.values():
        raise InvalidArgument(f"order {order} is not a known JobListOrder")
    return order == apb.JOB_LIST_ORDER_NEWEST_FIRST


def category_from_proto(value: int, field: str = "category") -> int:
    """A JobCategory number from a request (0: any), or INVALID_ARGUMENT."""
    if value not in _CATEGORIES:
        raise InvalidArgument(f"{field} {value} is not a known JobCategory")
    return int(value)


def _one_of(kinds: type[PauseKind] | type[LimitKind]) -> str:
    """The members of a scope kind enum, for a message ("TENANT, ... or CATEGORY")."""
    *most, last = (k.name for k in kinds)
    return f"{', '.join(most)} or {last}"


def scope_from_proto(s: apb.PauseScope) -> PauseScope:
    try:
        kind = PauseKind(s.kind)
    except ValueError:
        raise InvalidArgument(f"scope.kind must be {_one_of(PauseKind)}") from None
    return PauseScope(kind=kind, tenant_id=s.tenant_id, value=s.value)


def pause_to_proto(r: PauseRecord) -> apb.PauseRecord:
    return apb.PauseRecord(
        id=r.id,
        scope=apb.PauseScope(kind=r.kind, tenant_id=r.tenant_id, value=r.value),  # type: ignore[arg-type]  # protoc .pyi: an enum is its class
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
        raise InvalidArgument(f"limit.kind must be {_one_of(LimitKind)}") from None
    return ConcurrencyLimit(kind, limit.value, limit.max_running)


def limit_to_proto(limit: ConcurrencyLimit, running: int) -> apb.ConcurrencyLimit:
    return apb.ConcurrencyLimit(
        kind=int(limit.kind),  # type: ignore[arg-type]  # protoc .pyi: an enum is its class
        value=limit.value,
        max_running=limit.max_running,
        running=running,
    )


def limit_kind_from_proto(kind: int, field: str = "limit.kind") -> LimitKind:
    try:
        return LimitKind(kind)
    except ValueError:
        raise InvalidArgument(f"{field} must be {_one_of(LimitKind)}") from None


def rate_limit_from_proto(limit: apb.RateLimit) -> RateLimit:
    return RateLimit(
        limit_kind_from_proto(limit.kind),
        limit.value,
        limit.starts,
        duration_ms(limit.period, "limit.period"),
        limit.burst,
    )


def rate_limit_to_proto(limit: RateLimit, until: int | None, slow_level: int) -> apb.RateLimit:
    return apb.RateLimit(
        kind=int(limit.kind),  # type: ignore[arg-type]  # protoc .pyi: an enum is its class
        value=limit.value,
        starts=limit.starts,
        period=ms_to_duration(limit.period_ms),
        burst=limit.burst,
        throttled_until=us_to_ts(until),
        slow_level=slow_level,
    )


def wait_reason_to_proto(reason: WaitReason) -> apb.WaitReason:
    return apb.WaitReason(
        kind=f"KIND_{reason.kind}",
        message=reason.message,
        until=us_to_ts(reason.until),
        pause_id=reason.pause_id,
        count=reason.count,
        limit=reason.limit,
    )


def unique_key_to_proto(key: UniqueKeyRow) -> apb.JobUniqueKey:
    return apb.JobUniqueKey(
        key=key.unique_key,
        rule=f"UNIQUE_KEY_RULE_{UniqueRule(key.rule).name}",
        admit_time=us_to_ts(key.admitted_at),
        window_end_time=us_to_ts(key.window_ends_at),
        debounced=key.debounced,
        last_debounce_time=us_to_ts(key.debounced_at),
        max_due_time=us_to_ts(key.max_due_at),
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
        last_heartbeat_time=us_to_ts(w.last_seen_at or None),
        coordinator_id=w.coordinator_id,
        credits=w.credits,
        draining=w.draining,
        stale=w.stale,
    )


def type_defaults_from_proto(d: apb.JobTypeDefaults) -> tuple[str, JobTypeDefaults]:
    return d.job_type, JobTypeDefaults(
        retry_policy=retry_policy_from_proto(d.retry_policy, "defaults.retry_policy"),
        execution_timeout_ms=(
            duration_ms(d.execution_timeout, "defaults.execution_timeout")
            if d.HasField("execution_timeout")
            else None
        ),
        heartbeat_timeout_ms=(
            duration_ms(d.heartbeat_timeout, "defaults.heartbeat_timeout")
            if d.HasField("heartbeat_timeout")
            else None
        ),
        ordering_failure=_ordering_failure(d.ordering_failure),
    )


def _ordering_failure(value: int) -> OrderingFailure | None:
    if not value:
        return None
    try:
        return OrderingFailure(value)
    except ValueError:
        raise InvalidArgument(
            f"defaults.ordering_failure {value} is not an OrderingFailure (BLOCK or SKIP)"
        ) from None


def type_defaults_to_proto(job_type: str, d: JobTypeDefaults) -> apb.JobTypeDefaults:
    return apb.JobTypeDefaults(
        job_type=job_type,
        retry_policy=retry_policy_to_proto(d.retry_policy.to_json()),
        execution_timeout=ms_to_duration(d.execution_timeout_ms),
        heartbeat_timeout=ms_to_duration(d.heartbeat_timeout_ms),
        ordering_failure=int(d.ordering_failure or 0),  # type: ignore[arg-type]  # protoc .pyi: an enum is its class
    )


def event_filter_from_proto(f: spb.JobEventFilter) -> EventFilter:
    kinds = []
    for k in f.kinds:
        if k not in JOB_EVENT_KINDS:
            raise InvalidArgument(
                f"filter.kinds: {k} is not an event kind; use one of "
                + ", ".join(spb.JobEventKind.Name(v) for v in sorted(JOB_EVENT_KINDS))
            )
        kinds.append(JobEventKind(k))
    return EventFilter(
        tenant_id=f.tenant_id,
        definition_id=f.definition_id,
        instance_id=f.instance_id,
        correlation_id=f.correlation_id,
        job_type=f.job_type,
        kinds=tuple(kinds),
        job_id=f.job_id,
        group_id=f.group_id,
    )


JOB_EVENT_KINDS = frozenset(int(k) for k in JobEventKind)


def add_event(events: Any, e: JobEvent) -> None:
    """Append ``e`` to a repeated JobEvent field.

    Field by field, the workflow message only when the job has one, enums
    and the time assigned as they are: this runs for every event every
    watcher receives (3.0 against 3.9 µs an event before).
    """
    out = events.add()
    out.cursor = str(e.cursor)
    out.kind = e.kind
    created = e.created_at
    ts = out.time
    ts.seconds = created // 1_000_000
    ts.nanos = (created % 1_000_000) * 1000
    out.job_id = e.job_id
    out.tenant_id = e.tenant_id
    out.job_type = e.job_type
    _set_workflow(out, e)
    out.status = e.status
    out.attempt = e.attempt
    if e.due_at is not None and e.kind in _DUE_KINDS:
        _set_ts(out.due_time, e.due_at)
    if e.error:
        out.error = e.error
    if e.error_kind:
        out.error_kind = e.error_kind
    if e.result is not None:
        out.result.data = e.result
        out.result.content_type = e.result_content_type or ""
    if e.group_id:
        out.group_id = e.group_id


_DUE_KINDS = frozenset(
    (
        JobEventKind.ENQUEUED,
        JobEventKind.RETRY_SCHEDULED,
        JobEventKind.RELEASED,
        JobEventKind.RESCHEDULED,
    )
)
