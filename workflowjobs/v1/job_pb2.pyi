import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATUS_UNSPECIFIED: _ClassVar[JobStatus]
    JOB_STATUS_PENDING: _ClassVar[JobStatus]
    JOB_STATUS_RUNNING: _ClassVar[JobStatus]
    JOB_STATUS_COMPLETED: _ClassVar[JobStatus]
    JOB_STATUS_FAULTED: _ClassVar[JobStatus]
    JOB_STATUS_CANCELLED: _ClassVar[JobStatus]

class JobCategory(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_CATEGORY_UNSPECIFIED: _ClassVar[JobCategory]
    JOB_CATEGORY_CONTINUATION: _ClassVar[JobCategory]
    JOB_CATEGORY_ACTIVITY_WORK: _ClassVar[JobCategory]
    JOB_CATEGORY_INTEGRATION: _ClassVar[JobCategory]
    JOB_CATEGORY_MAINTENANCE: _ClassVar[JobCategory]
    JOB_CATEGORY_CUSTOM: _ClassVar[JobCategory]

class AttemptOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ATTEMPT_OUTCOME_UNSPECIFIED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_COMPLETED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_FAILED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_LEASE_EXPIRED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_CANCELLED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_RELEASED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_UNLOCKED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_TIMED_OUT: _ClassVar[AttemptOutcome]

class MisfirePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MISFIRE_POLICY_UNSPECIFIED: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_FIRE_ONCE_LATE: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_SKIP: _ClassVar[MisfirePolicy]

class JobGroupStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_GROUP_STATUS_UNSPECIFIED: _ClassVar[JobGroupStatus]
    JOB_GROUP_STATUS_OPEN: _ClassVar[JobGroupStatus]
    JOB_GROUP_STATUS_CLOSED: _ClassVar[JobGroupStatus]
    JOB_GROUP_STATUS_COMPLETED: _ClassVar[JobGroupStatus]
JOB_STATUS_UNSPECIFIED: JobStatus
JOB_STATUS_PENDING: JobStatus
JOB_STATUS_RUNNING: JobStatus
JOB_STATUS_COMPLETED: JobStatus
JOB_STATUS_FAULTED: JobStatus
JOB_STATUS_CANCELLED: JobStatus
JOB_CATEGORY_UNSPECIFIED: JobCategory
JOB_CATEGORY_CONTINUATION: JobCategory
JOB_CATEGORY_ACTIVITY_WORK: JobCategory
JOB_CATEGORY_INTEGRATION: JobCategory
JOB_CATEGORY_MAINTENANCE: JobCategory
JOB_CATEGORY_CUSTOM: JobCategory
ATTEMPT_OUTCOME_UNSPECIFIED: AttemptOutcome
ATTEMPT_OUTCOME_COMPLETED: AttemptOutcome
ATTEMPT_OUTCOME_FAILED: AttemptOutcome
ATTEMPT_OUTCOME_LEASE_EXPIRED: AttemptOutcome
ATTEMPT_OUTCOME_CANCELLED: AttemptOutcome
ATTEMPT_OUTCOME_RELEASED: AttemptOutcome
ATTEMPT_OUTCOME_UNLOCKED: AttemptOutcome
ATTEMPT_OUTCOME_TIMED_OUT: AttemptOutcome
MISFIRE_POLICY_UNSPECIFIED: MisfirePolicy
MISFIRE_POLICY_FIRE_ONCE_LATE: MisfirePolicy
MISFIRE_POLICY_SKIP: MisfirePolicy
JOB_GROUP_STATUS_UNSPECIFIED: JobGroupStatus
JOB_GROUP_STATUS_OPEN: JobGroupStatus
JOB_GROUP_STATUS_CLOSED: JobGroupStatus
JOB_GROUP_STATUS_COMPLETED: JobGroupStatus

class WorkflowRef(_message.Message):
    __slots__ = ("definition_id", "definition_version", "instance_id", "activity_id", "activity_node_id", "bookmark_id", "correlation_id")
    DEFINITION_ID_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_VERSION_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    BOOKMARK_ID_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    definition_id: str
    definition_version: int
    instance_id: str
    activity_id: str
    activity_node_id: str
    bookmark_id: str
    correlation_id: str
    def __init__(self, definition_id: _Optional[str] = ..., definition_version: _Optional[int] = ..., instance_id: _Optional[str] = ..., activity_id: _Optional[str] = ..., activity_node_id: _Optional[str] = ..., bookmark_id: _Optional[str] = ..., correlation_id: _Optional[str] = ...) -> None: ...

class Payload(_message.Message):
    __slots__ = ("data", "content_type")
    DATA_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    content_type: str
    def __init__(self, data: _Optional[bytes] = ..., content_type: _Optional[str] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "initial_backoff", "backoff_multiplier", "max_backoff", "jitter", "non_retryable_error_kinds")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    INITIAL_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    MAX_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_ERROR_KINDS_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    initial_backoff: _duration_pb2.Duration
    backoff_multiplier: float
    max_backoff: _duration_pb2.Duration
    jitter: float
    non_retryable_error_kinds: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, max_attempts: _Optional[int] = ..., initial_backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_multiplier: _Optional[float] = ..., max_backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., jitter: _Optional[float] = ..., non_retryable_error_kinds: _Optional[_Iterable[str]] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("job_type", "tenant_id", "workflow", "payload", "category", "priority", "due_time", "retry_policy", "execution_timeout", "heartbeat_timeout", "idempotency_key", "traceparent", "tracestate", "concurrency_key", "parent_job_id", "ordering_key", "uniqueness", "schedule_tick", "group_id")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    UNIQUENESS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_TICK_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    tenant_id: str
    workflow: WorkflowRef
    payload: Payload
    category: JobCategory
    priority: int
    due_time: _timestamp_pb2.Timestamp
    retry_policy: RetryPolicy
    execution_timeout: _duration_pb2.Duration
    heartbeat_timeout: _duration_pb2.Duration
    idempotency_key: str
    traceparent: str
    tracestate: str
    concurrency_key: str
    parent_job_id: str
    ordering_key: str
    uniqueness: Uniqueness
    schedule_tick: ScheduleTick
    group_id: str
    def __init__(self, job_type: _Optional[str] = ..., tenant_id: _Optional[str] = ..., workflow: _Optional[_Union[WorkflowRef, _Mapping]] = ..., payload: _Optional[_Union[Payload, _Mapping]] = ..., category: _Optional[_Union[JobCategory, str]] = ..., priority: _Optional[int] = ..., due_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., retry_policy: _Optional[_Union[RetryPolicy, _Mapping]] = ..., execution_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ..., concurrency_key: _Optional[str] = ..., parent_job_id: _Optional[str] = ..., ordering_key: _Optional[str] = ..., uniqueness: _Optional[_Union[Uniqueness, _Mapping]] = ..., schedule_tick: _Optional[_Union[ScheduleTick, _Mapping]] = ..., group_id: _Optional[str] = ...) -> None: ...

class ScheduleTick(_message.Message):
    __slots__ = ("schedule_id", "nominal_time", "misfire_policy", "misfire_grace")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_TIME_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_POLICY_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_GRACE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    nominal_time: _timestamp_pb2.Timestamp
    misfire_policy: MisfirePolicy
    misfire_grace: _duration_pb2.Duration
    def __init__(self, schedule_id: _Optional[str] = ..., nominal_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., misfire_policy: _Optional[_Union[MisfirePolicy, str]] = ..., misfire_grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Uniqueness(_message.Message):
    __slots__ = ("key", "unique_while", "period", "debounce")
    KEY_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_WHILE_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCE_FIELD_NUMBER: _ClassVar[int]
    key: str
    unique_while: UniqueWhile
    period: _duration_pb2.Duration
    debounce: Debounce
    def __init__(self, key: _Optional[str] = ..., unique_while: _Optional[_Union[UniqueWhile, _Mapping]] = ..., period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., debounce: _Optional[_Union[Debounce, _Mapping]] = ...) -> None: ...

class UniqueWhile(_message.Message):
    __slots__ = ("statuses",)
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    statuses: _containers.RepeatedScalarFieldContainer[JobStatus]
    def __init__(self, statuses: _Optional[_Iterable[_Union[JobStatus, str]]] = ...) -> None: ...

class Debounce(_message.Message):
    __slots__ = ("delay", "max_wait")
    DELAY_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_FIELD_NUMBER: _ClassVar[int]
    delay: _duration_pb2.Duration
    max_wait: _duration_pb2.Duration
    def __init__(self, delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class JobAttempt(_message.Message):
    __slots__ = ("number", "worker_id", "start_time", "end_time", "outcome", "error", "error_kind", "traceback")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    number: int
    worker_id: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    outcome: AttemptOutcome
    error: str
    error_kind: str
    traceback: str
    def __init__(self, number: _Optional[int] = ..., worker_id: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[_Union[AttemptOutcome, str]] = ..., error: _Optional[str] = ..., error_kind: _Optional[str] = ..., traceback: _Optional[str] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("id", "job_type", "tenant_id", "workflow", "payload", "category", "priority", "status", "attempt", "max_attempts", "retry_policy", "execution_timeout", "heartbeat_timeout", "create_time", "due_time", "finish_time", "lease_owner", "lease_expire_time", "last_error", "result", "idempotency_key", "traceparent", "tracestate", "concurrency_key", "cancel_requested", "replay_of", "attempts", "released_attempts", "parent_job_id", "ordering_key", "cancel_reason", "group_id", "trace_links")
    ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISH_TIME_FIELD_NUMBER: _ClassVar[int]
    LEASE_OWNER_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    REPLAY_OF_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RELEASED_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_LINKS_FIELD_NUMBER: _ClassVar[int]
    id: str
    job_type: str
    tenant_id: str
    workflow: WorkflowRef
    payload: Payload
    category: JobCategory
    priority: int
    status: JobStatus
    attempt: int
    max_attempts: int
    retry_policy: RetryPolicy
    execution_timeout: _duration_pb2.Duration
    heartbeat_timeout: _duration_pb2.Duration
    create_time: _timestamp_pb2.Timestamp
    due_time: _timestamp_pb2.Timestamp
    finish_time: _timestamp_pb2.Timestamp
    lease_owner: str
    lease_expire_time: _timestamp_pb2.Timestamp
    last_error: str
    result: Payload
    idempotency_key: str
    traceparent: str
    tracestate: str
    concurrency_key: str
    cancel_requested: bool
    replay_of: str
    attempts: _containers.RepeatedCompositeFieldContainer[JobAttempt]
    released_attempts: int
    parent_job_id: str
    ordering_key: str
    cancel_reason: str
    group_id: str
    trace_links: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., job_type: _Optional[str] = ..., tenant_id: _Optional[str] = ..., workflow: _Optional[_Union[WorkflowRef, _Mapping]] = ..., payload: _Optional[_Union[Payload, _Mapping]] = ..., category: _Optional[_Union[JobCategory, str]] = ..., priority: _Optional[int] = ..., status: _Optional[_Union[JobStatus, str]] = ..., attempt: _Optional[int] = ..., max_attempts: _Optional[int] = ..., retry_policy: _Optional[_Union[RetryPolicy, _Mapping]] = ..., execution_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., due_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finish_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lease_owner: _Optional[str] = ..., lease_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., result: _Optional[_Union[Payload, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ..., concurrency_key: _Optional[str] = ..., cancel_requested: _Optional[bool] = ..., replay_of: _Optional[str] = ..., attempts: _Optional[_Iterable[_Union[JobAttempt, _Mapping]]] = ..., released_attempts: _Optional[int] = ..., parent_job_id: _Optional[str] = ..., ordering_key: _Optional[str] = ..., cancel_reason: _Optional[str] = ..., group_id: _Optional[str] = ..., trace_links: _Optional[_Iterable[str]] = ...) -> None: ...

class JobGroup(_message.Message):
    __slots__ = ("id", "tenant_id", "status", "total", "pending", "running", "completed", "faulted", "cancelled", "completion_job_id", "create_time", "close_time", "complete_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAULTED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CLOSE_TIME_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    tenant_id: str
    status: JobGroupStatus
    total: int
    pending: int
    running: int
    completed: int
    faulted: int
    cancelled: int
    completion_job_id: str
    create_time: _timestamp_pb2.Timestamp
    close_time: _timestamp_pb2.Timestamp
    complete_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., status: _Optional[_Union[JobGroupStatus, str]] = ..., total: _Optional[int] = ..., pending: _Optional[int] = ..., running: _Optional[int] = ..., completed: _Optional[int] = ..., faulted: _Optional[int] = ..., cancelled: _Optional[int] = ..., completion_job_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., close_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., complete_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
