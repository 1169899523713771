import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from workflowjobs.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_EVENT_KIND_UNSPECIFIED: _ClassVar[JobEventKind]
    JOB_EVENT_KIND_ENQUEUED: _ClassVar[JobEventKind]
    JOB_EVENT_KIND_STARTED: _ClassVar[JobEventKind]
    JOB_EVENT_KIND_ATTEMPT_FAILED: _ClassVar[JobEventKind]
    JOB_EVENT_KIND_RETRY_SCHEDULED: _ClassVar[JobEventKind]
    JOB_EVENT_KIND_COMPLETED: _ClassVar[JobEventKind]
    JOB_EVENT_KIND_FAULTED: _ClassVar[JobEventKind]
    JOB_EVENT_KIND_CANCELLED: _ClassVar[JobEventKind]
    JOB_EVENT_KIND_RELEASED: _ClassVar[JobEventKind]
    JOB_EVENT_KIND_RESCHEDULED: _ClassVar[JobEventKind]
JOB_EVENT_KIND_UNSPECIFIED: JobEventKind
JOB_EVENT_KIND_ENQUEUED: JobEventKind
JOB_EVENT_KIND_STARTED: JobEventKind
JOB_EVENT_KIND_ATTEMPT_FAILED: JobEventKind
JOB_EVENT_KIND_RETRY_SCHEDULED: JobEventKind
JOB_EVENT_KIND_COMPLETED: JobEventKind
JOB_EVENT_KIND_FAULTED: JobEventKind
JOB_EVENT_KIND_CANCELLED: JobEventKind
JOB_EVENT_KIND_RELEASED: JobEventKind
JOB_EVENT_KIND_RESCHEDULED: JobEventKind

class CreateGroupRequest(_message.Message):
    __slots__ = ("tenant_id", "completion", "members", "close", "idempotency_key")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    completion: _job_pb2.JobSpec
    members: _containers.RepeatedCompositeFieldContainer[_job_pb2.JobSpec]
    close: bool
    idempotency_key: str
    def __init__(self, tenant_id: _Optional[str] = ..., completion: _Optional[_Union[_job_pb2.JobSpec, _Mapping]] = ..., members: _Optional[_Iterable[_Union[_job_pb2.JobSpec, _Mapping]]] = ..., close: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CreateGroupResponse(_message.Message):
    __slots__ = ("group", "members", "deduplicated")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    group: _job_pb2.JobGroup
    members: _containers.RepeatedCompositeFieldContainer[EnqueueResult]
    deduplicated: bool
    def __init__(self, group: _Optional[_Union[_job_pb2.JobGroup, _Mapping]] = ..., members: _Optional[_Iterable[_Union[EnqueueResult, _Mapping]]] = ..., deduplicated: _Optional[bool] = ...) -> None: ...

class CloseGroupRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class CloseGroupResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: _job_pb2.JobGroup
    def __init__(self, group: _Optional[_Union[_job_pb2.JobGroup, _Mapping]] = ...) -> None: ...

class GetGroupRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class GetGroupResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: _job_pb2.JobGroup
    def __init__(self, group: _Optional[_Union[_job_pb2.JobGroup, _Mapping]] = ...) -> None: ...

class JobEventFilter(_message.Message):
    __slots__ = ("tenant_id", "definition_id", "instance_id", "correlation_id", "job_type", "kinds", "job_id", "group_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    definition_id: str
    instance_id: str
    correlation_id: str
    job_type: str
    kinds: _containers.RepeatedScalarFieldContainer[JobEventKind]
    job_id: str
    group_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., definition_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., correlation_id: _Optional[str] = ..., job_type: _Optional[str] = ..., kinds: _Optional[_Iterable[_Union[JobEventKind, str]]] = ..., job_id: _Optional[str] = ..., group_id: _Optional[str] = ...) -> None: ...

class WatchJobEventsRequest(_message.Message):
    __slots__ = ("filter", "after", "from_oldest")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    FROM_OLDEST_FIELD_NUMBER: _ClassVar[int]
    filter: JobEventFilter
    after: str
    from_oldest: bool
    def __init__(self, filter: _Optional[_Union[JobEventFilter, _Mapping]] = ..., after: _Optional[str] = ..., from_oldest: _Optional[bool] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("cursor", "kind", "time", "job_id", "tenant_id", "job_type", "workflow", "status", "attempt", "due_time", "error", "error_kind", "result", "group_id")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    kind: JobEventKind
    time: _timestamp_pb2.Timestamp
    job_id: str
    tenant_id: str
    job_type: str
    workflow: _job_pb2.WorkflowRef
    status: _job_pb2.JobStatus
    attempt: int
    due_time: _timestamp_pb2.Timestamp
    error: str
    error_kind: str
    result: _job_pb2.Payload
    group_id: str
    def __init__(self, cursor: _Optional[str] = ..., kind: _Optional[_Union[JobEventKind, str]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., job_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., job_type: _Optional[str] = ..., workflow: _Optional[_Union[_job_pb2.WorkflowRef, _Mapping]] = ..., status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., attempt: _Optional[int] = ..., due_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ..., error_kind: _Optional[str] = ..., result: _Optional[_Union[_job_pb2.Payload, _Mapping]] = ..., group_id: _Optional[str] = ...) -> None: ...

class WatchJobEventsResponse(_message.Message):
    __slots__ = ("events", "cursor")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[JobEvent]
    cursor: str
    def __init__(self, events: _Optional[_Iterable[_Union[JobEvent, _Mapping]]] = ..., cursor: _Optional[str] = ...) -> None: ...

class EnqueueRequest(_message.Message):
    __slots__ = ("job", "inline")
    JOB_FIELD_NUMBER: _ClassVar[int]
    INLINE_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.JobSpec
    inline: InlineExecution
    def __init__(self, job: _Optional[_Union[_job_pb2.JobSpec, _Mapping]] = ..., inline: _Optional[_Union[InlineExecution, _Mapping]] = ...) -> None: ...

class InlineExecution(_message.Message):
    __slots__ = ("worker_id", "enqueue_if_paused")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    ENQUEUE_IF_PAUSED_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    enqueue_if_paused: bool
    def __init__(self, worker_id: _Optional[str] = ..., enqueue_if_paused: _Optional[bool] = ...) -> None: ...

class EnqueueResponse(_message.Message):
    __slots__ = ("job", "deduplicated", "lease_token", "lease_expire_time", "debounced", "skipped")
    JOB_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    deduplicated: bool
    lease_token: str
    lease_expire_time: _timestamp_pb2.Timestamp
    debounced: bool
    skipped: bool
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., deduplicated: _Optional[bool] = ..., lease_token: _Optional[str] = ..., lease_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., debounced: _Optional[bool] = ..., skipped: _Optional[bool] = ...) -> None: ...

class EnqueueBatchRequest(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.JobSpec]
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.JobSpec, _Mapping]]] = ...) -> None: ...

class EnqueueResult(_message.Message):
    __slots__ = ("job_id", "deduplicated", "status", "debounced")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    deduplicated: bool
    status: _job_pb2.JobStatus
    debounced: bool
    def __init__(self, job_id: _Optional[str] = ..., deduplicated: _Optional[bool] = ..., status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., debounced: _Optional[bool] = ...) -> None: ...

class EnqueueBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[EnqueueResult]
    def __init__(self, results: _Optional[_Iterable[_Union[EnqueueResult, _Mapping]]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id", "include_attempts")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    include_attempts: bool
    def __init__(self, job_id: _Optional[str] = ..., include_attempts: _Optional[bool] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class WaitForJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class WaitForJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...
