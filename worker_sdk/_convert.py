"""Conversion between the protobuf contract and the SDK's Python values.

Every translation between ``workflowjobs.v1`` messages and SDK types lives here:
timestamps and durations, the workflow reference, retry policies, job specs for
enqueueing and the read-only :class:`JobView`.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, overload

from google.protobuf import duration_pb2, timestamp_pb2

from workflowjobs.contract import FINAL_STATUSES, LATEST_YEAR
from workflowjobs.v1 import job_pb2

from ._backoff import backoff_delay
from ._codec import decode_payload, encode_payload

_T = TypeVar("_T")

__all__ = [
    "JobAttemptView",
    "JobCategory",
    "JobRequest",
    "JobStatus",
    "JobView",
    "RetryPolicy",
    "WorkflowRef",
]


def to_timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    """Convert a datetime (naive means UTC) to a protobuf Timestamp."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value.astimezone(UTC))
    return ts


def from_timestamp(value: timestamp_pb2.Timestamp) -> datetime | None:
    """Convert a protobuf Timestamp to an aware UTC datetime; unset gives None."""
    if value.seconds == 0 and value.nanos == 0:
        return None
    return value.ToDatetime(tzinfo=UTC)


def seconds_to_timedelta(seconds: float, field: str = "duration") -> timedelta:
    """A number of seconds as a ``timedelta``.

    Raises:
        ValueError: ``seconds`` is NaN, infinite or beyond what a ``timedelta``
            holds (about 2.7 million years); the message names ``field``.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValueError(f"{field} must be a number of seconds or a timedelta, not {seconds!r}")
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise ValueError(f"{field} must be a finite number of seconds, not {seconds!r}")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"{field} of {seconds:g} seconds is too long") from None


def to_duration(value: timedelta | float, field: str = "duration") -> duration_pb2.Duration:
    """Convert a timedelta or a number of seconds to a protobuf Duration.

    Raises:
        ValueError: ``value`` is not a finite number of seconds (``seconds_to_timedelta``).
    """
    if not isinstance(value, timedelta):
        value = seconds_to_timedelta(value, field)
    duration = duration_pb2.Duration()
    duration.FromTimedelta(value)
    return duration


def from_duration(value: duration_pb2.Duration) -> timedelta | None:
    """Convert a protobuf Duration to a timedelta; zero gives None."""
    if value.seconds == 0 and value.nanos == 0:
        return None
    return value.ToTimedelta()


class JobStatus(enum.StrEnum):
    """Lifecycle of a job. Paused jobs stay ``PENDING``."""

    UNSPECIFIED = "UNSPECIFIED"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAULTED = "FAULTED"
    CANCELLED = "CANCELLED"

    @classmethod
    def from_proto(cls, value: int) -> JobStatus:
        """Map a ``workflowjobs.v1.JobStatus`` number to the enum."""
        name = job_pb2.JobStatus.Name(value) if value in job_pb2.JobStatus.values() else ""
        return cls(name.removeprefix("JOB_STATUS_") or "UNSPECIFIED")

    def to_proto(self) -> int:
        """Map to the ``workflowjobs.v1.JobStatus`` number."""
        return job_pb2.JobStatus.Value(f"JOB_STATUS_{self.value}")

    @property
    def is_terminal(self) -> bool:
        """True for ``COMPLETED``, ``FAULTED`` and ``CANCELLED``."""
        return self.to_proto() in FINAL_STATUSES


class JobCategory(enum.StrEnum):
    """Classification of a job, used for monitoring and throttling."""

    UNSPECIFIED = "UNSPECIFIED"
    CONTINUATION = "CONTINUATION"
    ACTIVITY_WORK = "ACTIVITY_WORK"
    INTEGRATION = "INTEGRATION"
    MAINTENANCE = "MAINTENANCE"
    CUSTOM = "CUSTOM"

    @classmethod
    def from_proto(cls, value: int) -> JobCategory:
        """Map a ``workflowjobs.v1.JobCategory`` number to the enum."""
        name = job_pb2.JobCategory.Name(value) if value in job_pb2.JobCategory.values() else ""
        return cls(name.removeprefix("JOB_CATEGORY_") or "UNSPECIFIED")

    def to_proto(self) -> int:
        """Map to the ``workflowjobs.v1.JobCategory`` number."""
        return job_pb2.JobCategory.Value(f"JOB_CATEGORY_{self.value}")


def category_to_proto(value: JobCategory | str | int | None) -> int:
    """Accept a :class:`JobCategory`, its name (any case) or the proto number."""
    if value is None:
        return job_pb2.JOB_CATEGORY_UNSPECIFIED
    if isinstance(value, int):
        return value
    return JobCategory(str(value).upper().removeprefix("JOB_CATEGORY_")).to_proto()


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowRef:
    """The workflow runtime context a job carries. Every field is optional.

    Attributes:
        definition_id: Workflow definition id.
        definition_version: Workflow definition version.
        instance_id: Workflow instance id.
        activity_id: Activity id inside the definition.
        activity_node_id: Activity node id inside the instance.
        bookmark_id: Bookmark the job resumes.
        correlation_id: Correlation id shared by related work.
    """

    definition_id: str = ""
    definition_version: int = 0
    instance_id: str = ""
    activity_id: str = ""
    activity_node_id: str = ""
    bookmark_id: str = ""
    correlation_id: str = ""

    def to_proto(self) -> job_pb2.WorkflowRef:
        """Build the ``workflowjobs.v1.WorkflowRef`` message."""
        return job_pb2.WorkflowRef(**dataclasses.asdict(self))

    @classmethod
    def from_proto(cls, ref: job_pb2.WorkflowRef) -> WorkflowRef:
        """Read a ``workflowjobs.v1.WorkflowRef`` message."""
        return cls(**{f.name: getattr(ref, f.name) for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry behaviour of a job. Unset fields fall back to the job type's default.

    Attributes:
        max_attempts: Attempts before the job is faulted (0 = default).
        initial_backoff: Delay before the second attempt.
        backoff_multiplier: Growth factor of the delay per attempt.
        max_backoff: Cap on the delay.
        jitter: Fraction (0..1) of each delay that is randomised.
        non_retryable_error_kinds: Error kinds that fault the job at once.
    """

    max_attempts: int = 0
    initial_backoff: timedelta | None = None
    backoff_multiplier: float = 0.0
    max_backoff: timedelta | None = None
    jitter: float = 0.0
    non_retryable_error_kinds: tuple[str, ...] = ()

    def to_proto(self) -> job_pb2.RetryPolicy:
        """Build the ``workflowjobs.v1.RetryPolicy`` message."""
        policy = job_pb2.RetryPolicy(
            max_attempts=self.max_attempts,
            backoff_multiplier=self.backoff_multiplier,
            jitter=self.jitter,
            non_retryable_error_kinds=list(self.non_retryable_error_kinds),
        )
        if self.initial_backoff is not None:
            policy.initial_backoff.CopyFrom(to_duration(self.initial_backoff))
        if self.max_backoff is not None:
            policy.max_backoff.CopyFrom(to_duration(self.max_backoff))
        return policy

    @classmethod
    def from_proto(cls, policy: job_pb2.RetryPolicy) -> RetryPolicy:
        """Read a ``workflowjobs.v1.RetryPolicy`` message."""
        return cls(
            max_attempts=policy.max_attempts,
            initial_backoff=from_duration(policy.initial_backoff),
            backoff_multiplier=policy.backoff_multiplier,
            max_backoff=from_duration(policy.max_backoff),
            jitter=policy.jitter,
            non_retryable_error_kinds=tuple(policy.non_retryable_error_kinds),
        )

    def backoff(self, attempt: int) -> timedelta | None:
        """The delay after failed attempt number ``attempt`` (1-based), without jitter.

        Returns:
            None when the policy sets no initial backoff.
        """
        seconds = self.delay_seconds(attempt, u=0.0)
        return None if seconds is None else timedelta(seconds=seconds)

    def delay_seconds(self, attempt: int, *, u: float | None = None) -> float | None:
        """The delay after failed attempt number ``attempt`` (1-based), with jitter.

        The formula is the one in the ``RetryPolicy`` comment of ``job.proto``
        (jitter only shortens the delay). An unset multiplier is 2, an unset
        ``max_backoff`` caps nothing.

        Args:
            attempt: The attempt that failed.
            u: The uniform draw in [0, 1) applied to the jitter; random when None.

        Returns:
            Seconds, or None when the policy sets no initial backoff.
        """
        if self.initial_backoff is None:
            return None
        return backoff_delay(
            attempt,
            initial=self.initial_backoff.total_seconds(),
            multiplier=self.backoff_multiplier or 2.0,
            maximum=self.max_backoff.total_seconds() if self.max_backoff else math.inf,
            jitter=self.jitter,
            u=u,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Uniqueness:
    """At most one job per tenant and ``key``, by one rule (docs/uniqueness.md).

    Build it with :meth:`unique_while`, :meth:`for_period` or :meth:`debounce`.

    Attributes:
        key: The uniqueness key, per tenant.
        statuses: Unique while: the statuses in which the key's job blocks
            another (empty: ``PENDING`` and ``RUNNING``).
        period: Unique for a period: one job per period from the admitted
            job's enqueue, whatever its state.
        delay: Debounce: the job becomes due this long after the latest enqueue.
        max_wait: Debounce: never later than this long after the first
            enqueue of the job (None: no maximum).
    """

    key: str
    statuses: tuple[JobStatus, ...] = ()
    period: timedelta | float | None = None
    delay: timedelta | float | None = None
    max_wait: timedelta | float | None = None

    @classmethod
    def unique_while(cls, key: str, *statuses: JobStatus) -> Uniqueness:
        """A second enqueue returns the key's job while it is in ``statuses``
        (default ``PENDING``, ``RUNNING``)."""
        return cls(key, statuses=tuple(statuses))

    @classmethod
    def for_period(cls, key: str, period: timedelta | float) -> Uniqueness:
        """The key admits one job per ``period`` (seconds or timedelta)."""
        return cls(key, period=period)

    @classmethod
    def debounce(
        cls, key: str, delay: timedelta | float, max_wait: timedelta | float | None = None
    ) -> Uniqueness:
        """Enqueues while the key's job is pending and not yet due replace its
        payload and put it off to ``delay`` after the latest, at most
        ``max_wait`` after the first."""
        return cls(key, delay=delay, max_wait=max_wait)

    def to_proto(self) -> job_pb2.Uniqueness:
        """Build the ``workflowjobs.v1.Uniqueness`` message."""
        message = job_pb2.Uniqueness(key=self.key)
        if self.delay is not None:
            message.debounce.delay.CopyFrom(to_duration(self.delay, "uniqueness delay"))
            if self.max_wait is not None:
                message.debounce.max_wait.CopyFrom(
                    to_duration(self.max_wait, "uniqueness max_wait")
                )
        elif self.period is not None:
            message.period.CopyFrom(to_duration(self.period, "uniqueness period"))
        else:
            message.unique_while.statuses.extend(s.to_proto() for s in self.statuses)  # type: ignore[misc]
        return message


@dataclasses.dataclass(frozen=True, slots=True)
class JobRequest:
    """Everything needed to enqueue one job; used by ``enqueue_batch``.

    Attributes:
        job_type: The handler's job type. Required.
        payload: The job's input: ``bytes``, a protobuf message, a dataclass, a
            pydantic model or a JSON-compatible value.
        tenant_id: Owning tenant.
        workflow: Workflow context of the job.
        category: Job category.
        priority: Higher runs first within the tenant's share.
        due: When the job becomes eligible (a naive datetime is UTC).
        delay: Alternative to ``due``: eligible after this long.
        max_attempts: Shortcut for ``retry_policy.max_attempts``.
        retry_policy: Per-job retry policy.
        execution_timeout: Longest a single attempt may run.
        heartbeat_timeout: Longest a lease may go without a heartbeat.
        idempotency_key: Enqueue dedupe key within the tenant.
        concurrency_key: Key limiting concurrency across jobs sharing it.
        content_type: Content type to record with raw ``bytes`` payloads.
        traceparent: W3C traceparent of the enqueuer.
        tracestate: W3C tracestate of the enqueuer.
        parent_job_id: The job whose handler enqueues this one (set by
            ``ctx.enqueue``; see :meth:`JobContext.enqueue_async`).
        ordering_key: Jobs of the same tenant and key run one at a time, in
            enqueue order.
        uniqueness: At most one job per tenant and uniqueness key
            (:class:`Uniqueness`: unique while, for a period, or debounce).
        group_id: Join this open job group as a member (see
            :meth:`SchedulerClient.create_group`).
    """

    job_type: str
    payload: Any = None
    tenant_id: str = "default"
    workflow: WorkflowRef | job_pb2.WorkflowRef | None = None
    category: JobCategory | str | int | None = None
    priority: int = 0
    due: datetime | None = None
    delay: timedelta | float | None = None
    max_attempts: int | None = None
    retry_policy: RetryPolicy | job_pb2.RetryPolicy | None = None
    execution_timeout: timedelta | float | None = None
    heartbeat_timeout: timedelta | float | None = None
    idempotency_key: str | None = None
    concurrency_key: str | None = None
    content_type: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    parent_job_id: str | None = None
    ordering_key: str | None = None
    uniqueness: Uniqueness | None = None
    group_id: str | None = None

    def to_proto(self) -> job_pb2.JobSpec:
        """Build the ``workflowjobs.v1.JobSpec`` message, encoding the payload.

        Raises:
            ValueError: Both ``due`` and ``delay`` are set, ``job_type`` is empty,
                or a delay or timeout is not a finite number of seconds (or
                ``delay`` reaches past the year 9999).
        """
        if not self.job_type:
            raise ValueError("job_type must not be empty")
        spec = job_pb2.JobSpec(
            job_type=self.job_type,
            tenant_id=self.tenant_id,
            category=category_to_proto(self.category),  # type: ignore[arg-type]
            priority=self.priority,
            idempotency_key=self.idempotency_key or "",
            concurrency_key=self.concurrency_key or "",
            traceparent=self.traceparent or "",
            tracestate=self.tracestate or "",
            parent_job_id=self.parent_job_id or "",
            ordering_key=self.ordering_key or "",
            group_id=self.group_id or "",
        )
        if self.payload is not None:
            spec.payload.CopyFrom(encode_payload(self.payload, self.content_type))
        if isinstance(self.workflow, WorkflowRef):
            spec.workflow.CopyFrom(self.workflow.to_proto())
        elif self.workflow is not None:
            spec.workflow.CopyFrom(self.workflow)
        if self.due is not None and self.delay is not None:
            raise ValueError("give either 'due' or 'delay', not both")
        if self.due is not None:
            spec.due_time.CopyFrom(to_timestamp(self.due))
        elif self.delay is not None:
            delay = self.delay
            if not isinstance(delay, timedelta):
                delay = seconds_to_timedelta(delay, "delay")
            try:
                due = datetime.now(UTC) + delay
            except OverflowError:
                raise ValueError(
                    f"a delay of {delay.total_seconds():g} seconds reaches past the year {LATEST_YEAR}"
                ) from None
            spec.due_time.CopyFrom(to_timestamp(due))
        if isinstance(self.retry_policy, RetryPolicy):
            spec.retry_policy.CopyFrom(self.retry_policy.to_proto())
        elif self.retry_policy is not None:
            spec.retry_policy.CopyFrom(self.retry_policy)
        if self.max_attempts is not None:
            spec.retry_policy.max_attempts = self.max_attempts
        if self.execution_timeout is not None:
            spec.execution_timeout.CopyFrom(
                to_duration(self.execution_timeout, "execution_timeout")
            )
        if self.heartbeat_timeout is not None:
            spec.heartbeat_timeout.CopyFrom(
                to_duration(self.heartbeat_timeout, "heartbeat_timeout")
            )
        if self.uniqueness is not None:
            spec.uniqueness.CopyFrom(self.uniqueness.to_proto())
        return spec


def job_specs(jobs: Sequence[JobRequest | job_pb2.JobSpec]) -> list[job_pb2.JobSpec]:
    """Convert a mix of :class:`JobRequest` and ``JobSpec`` into ``JobSpec`` messages."""
    return [job if isinstance(job, job_pb2.JobSpec) else job.to_proto() for job in jobs]


@dataclasses.dataclass(frozen=True, slots=True)
class JobAttemptView:
    """One execution attempt in a job's history.

    Attributes:
        number: Attempt number (1-based).
        worker_id: Worker that ran it.
        start_time: When it started.
        end_time: When it ended (None while running).
        outcome: Outcome name, e.g. ``"COMPLETED"``, ``"FAILED"``, ``"LEASE_EXPIRED"``.
        error: Error text of a failed attempt.
        error_kind: Error kind of a failed attempt.
        traceback: Where it failed, as the worker reported it (its last 16 KiB);
            empty when none was reported.
    """

    number: int
    worker_id: str
    start_time: datetime | None
    end_time: datetime | None
    outcome: str
    error: str
    error_kind: str
    traceback: str = ""

    @classmethod
    def from_proto(cls, attempt: job_pb2.JobAttempt) -> JobAttemptView:
        """Read a ``workflowjobs.v1.JobAttempt`` message."""
        outcome = job_pb2.AttemptOutcome.Name(attempt.outcome).removeprefix("ATTEMPT_OUTCOME_")
        return cls(
            number=attempt.number,
            worker_id=attempt.worker_id,
            start_time=from_timestamp(attempt.start_time),
            end_time=from_timestamp(attempt.end_time),
            outcome=outcome,
            error=attempt.error,
            error_kind=attempt.error_kind,
            traceback=attempt.traceback,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class JobView:
    """A read-only snapshot of a job, as returned by the scheduler and admin clients.

    Attributes:
        id: Job id (time-ordered).
        job_type: Job type.
        tenant_id: Owning tenant.
        status: Lifecycle status.
        attempt: Attempts started so far (the running one included).
        max_attempts: Attempts allowed (released attempts do not count).
        priority: Priority within the tenant's share.
        category: Job category.
        workflow: Workflow context.
        payload: Payload bytes.
        payload_content_type: Content type of ``payload``.
        result: Result bytes of a completed job (empty otherwise).
        result_content_type: Content type of ``result``.
        last_error: Why the job is in its current state (latest failure, cancel
            or release reason); empty once it completed or an operator retried it.
        create_time: When the job was enqueued.
        due_time: When the job is (or was) eligible.
        finish_time: When the job reached a terminal status.
        lease_owner: Worker holding the lease while running.
        lease_expire_time: When the current lease expires.
        cancel_requested: A cancel was requested while running.
        idempotency_key: Enqueue dedupe key.
        concurrency_key: Concurrency key.
        replay_of: Id of the job this one replays.
        parent_job_id: Id of the job whose handler enqueued this one (empty: none).
        ordering_key: The job's ordering key (empty: none).
        cancel_reason: The reason an operator gave for cancelling it (empty: none).
        attempts: Attempt history, when it was asked for.
        deduplicated: True when ``enqueue`` returned an existing job.
        debounced: True when ``enqueue`` debounced: the key's pending job took
            its payload and a later due time.
        group_id: The job group it is a member of (empty: none).
        raw: The underlying ``workflowjobs.v1.Job`` message.
        released_attempts: Attempts a worker handed back; they do not count
            against ``max_attempts``.
    """

    id: str
    job_type: str
    tenant_id: str
    status: JobStatus
    attempt: int
    max_attempts: int
    priority: int
    category: JobCategory
    workflow: WorkflowRef
    payload: bytes
    payload_content_type: str
    result: bytes
    result_content_type: str
    last_error: str
    create_time: datetime | None
    due_time: datetime | None
    finish_time: datetime | None
    lease_owner: str
    lease_expire_time: datetime | None
    cancel_requested: bool
    idempotency_key: str
    concurrency_key: str
    replay_of: str
    attempts: tuple[JobAttemptView, ...]
    raw: job_pb2.Job = dataclasses.field(repr=False, compare=False)
    deduplicated: bool = False
    released_attempts: int = 0
    parent_job_id: str = ""
    ordering_key: str = ""
    cancel_reason: str = ""
    debounced: bool = False
    group_id: str = ""

    @property
    def is_terminal(self) -> bool:
        """True once the job is ``COMPLETED``, ``FAULTED`` or ``CANCELLED``."""
        return self.status.is_terminal

    @overload
    def result_value(self, type_hint: type[_T]) -> _T: ...
    @overload
    def result_value(self, type_hint: Any = Any) -> Any: ...
    def result_value(self, type_hint: Any = Any) -> Any:
        """Decode the job's result with the payload codec.

        Args:
            type_hint: Expected type (dataclass, pydantic model, protobuf
                class, ``bytes``…); ``Any`` gives the natural decoding.

        Returns:
            The decoded result, ``None`` when the job has none.
        """
        return decode_payload(self.result, self.result_content_type, type_hint)

    @overload
    def payload_value(self, type_hint: type[_T]) -> _T: ...
    @overload
    def payload_value(self, type_hint: Any = Any) -> Any: ...
    def payload_value(self, type_hint: Any = Any) -> Any:
        """Decode the job's payload with the payload codec (see :meth:`result_value`)."""
        return decode_payload(self.payload, self.payload_content_type, type_hint)

    @classmethod
    def from_proto(
        cls, job: job_pb2.Job, *, deduplicated: bool = False, debounced: bool = False
    ) -> JobView:
        """Read a ``workflowjobs.v1.Job`` message."""
        return cls(
            id=job.id,
            job_type=job.job_type,
            tenant_id=job.tenant_id,
            status=JobStatus.from_proto(job.status),
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            priority=job.priority,
            category=JobCategory.from_proto(job.category),
            workflow=WorkflowRef.from_proto(job.workflow),
            payload=job.payload.data,
            payload_content_type=job.payload.content_type,
            result=job.result.data,
            result_content_type=job.result.content_type,
            last_error=job.last_error,
            create_time=from_timestamp(job.create_time),
            due_time=from_timestamp(job.due_time),
            finish_time=from_timestamp(job.finish_time),
            lease_owner=job.lease_owner,
            lease_expire_time=from_timestamp(job.lease_expire_time),
            cancel_requested=job.cancel_requested,
            idempotency_key=job.idempotency_key,
            concurrency_key=job.concurrency_key,
            replay_of=job.replay_of,
            attempts=tuple(JobAttemptView.from_proto(a) for a in job.attempts),
            raw=job,
            deduplicated=deduplicated,
            released_attempts=job.released_attempts,
            parent_job_id=job.parent_job_id,
            ordering_key=job.ordering_key,
            cancel_reason=job.cancel_reason,
            debounced=debounced,
            group_id=job.group_id,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class GroupView:
    """A job group (see :meth:`SchedulerClient.create_group`).

    Attributes:
        id: Group id.
        tenant_id: Owning tenant.
        status: ``"OPEN"`` (members may join), ``"CLOSED"`` (its completion
            follows the last member's end) or ``"COMPLETED"``.
        total: Members so far.
        pending: Members not started.
        running: Members running.
        completed: Members that completed.
        faulted: Members that faulted.
        cancelled: Members cancelled.
        completion_job_id: The completion job, once the group completed.
        create_time: When the group was created.
        close_time: When it was closed.
        complete_time: When its completion job was enqueued.
    """

    id: str
    tenant_id: str
    status: str
    total: int
    pending: int
    running: int
    completed: int
    faulted: int
    cancelled: int
    completion_job_id: str
    create_time: datetime | None
    close_time: datetime | None
    complete_time: datetime | None

    @classmethod
    def from_proto(cls, group: job_pb2.JobGroup) -> GroupView:
        """Read a ``workflowjobs.v1.JobGroup`` message."""
        return cls(
            id=group.id,
            tenant_id=group.tenant_id,
            status=job_pb2.JobGroupStatus.Name(group.status).removeprefix("JOB_GROUP_STATUS_"),
            total=group.total,
            pending=group.pending,
            running=group.running,
            completed=group.completed,
            faulted=group.faulted,
            cancelled=group.cancelled,
            completion_job_id=group.completion_job_id,
            create_time=from_timestamp(group.create_time),
            close_time=from_timestamp(group.close_time),
            complete_time=from_timestamp(group.complete_time),
        )
