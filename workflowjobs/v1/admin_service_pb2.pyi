import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from workflowjobs.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobListOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_LIST_ORDER_UNSPECIFIED: _ClassVar[JobListOrder]
    JOB_LIST_ORDER_OLDEST_FIRST: _ClassVar[JobListOrder]
    JOB_LIST_ORDER_NEWEST_FIRST: _ClassVar[JobListOrder]

class UniqueKeyRule(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNIQUE_KEY_RULE_UNSPECIFIED: _ClassVar[UniqueKeyRule]
    UNIQUE_KEY_RULE_WHILE: _ClassVar[UniqueKeyRule]
    UNIQUE_KEY_RULE_PERIOD: _ClassVar[UniqueKeyRule]
    UNIQUE_KEY_RULE_DEBOUNCE: _ClassVar[UniqueKeyRule]

class PauseScopeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PAUSE_SCOPE_KIND_UNSPECIFIED: _ClassVar[PauseScopeKind]
    PAUSE_SCOPE_KIND_TENANT: _ClassVar[PauseScopeKind]
    PAUSE_SCOPE_KIND_DEFINITION: _ClassVar[PauseScopeKind]
    PAUSE_SCOPE_KIND_INSTANCE: _ClassVar[PauseScopeKind]
    PAUSE_SCOPE_KIND_JOB_TYPE: _ClassVar[PauseScopeKind]
    PAUSE_SCOPE_KIND_CATEGORY: _ClassVar[PauseScopeKind]

class LimitScopeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LIMIT_SCOPE_KIND_UNSPECIFIED: _ClassVar[LimitScopeKind]
    LIMIT_SCOPE_KIND_TENANT: _ClassVar[LimitScopeKind]
    LIMIT_SCOPE_KIND_JOB_TYPE: _ClassVar[LimitScopeKind]
    LIMIT_SCOPE_KIND_DEFINITION: _ClassVar[LimitScopeKind]
    LIMIT_SCOPE_KIND_CONCURRENCY_KEY: _ClassVar[LimitScopeKind]
    LIMIT_SCOPE_KIND_CATEGORY: _ClassVar[LimitScopeKind]

class OrderingFailure(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ORDERING_FAILURE_UNSPECIFIED: _ClassVar[OrderingFailure]
    ORDERING_FAILURE_BLOCK: _ClassVar[OrderingFailure]
    ORDERING_FAILURE_SKIP: _ClassVar[OrderingFailure]
JOB_LIST_ORDER_UNSPECIFIED: JobListOrder
JOB_LIST_ORDER_OLDEST_FIRST: JobListOrder
JOB_LIST_ORDER_NEWEST_FIRST: JobListOrder
UNIQUE_KEY_RULE_UNSPECIFIED: UniqueKeyRule
UNIQUE_KEY_RULE_WHILE: UniqueKeyRule
UNIQUE_KEY_RULE_PERIOD: UniqueKeyRule
UNIQUE_KEY_RULE_DEBOUNCE: UniqueKeyRule
PAUSE_SCOPE_KIND_UNSPECIFIED: PauseScopeKind
PAUSE_SCOPE_KIND_TENANT: PauseScopeKind
PAUSE_SCOPE_KIND_DEFINITION: PauseScopeKind
PAUSE_SCOPE_KIND_INSTANCE: PauseScopeKind
PAUSE_SCOPE_KIND_JOB_TYPE: PauseScopeKind
PAUSE_SCOPE_KIND_CATEGORY: PauseScopeKind
LIMIT_SCOPE_KIND_UNSPECIFIED: LimitScopeKind
LIMIT_SCOPE_KIND_TENANT: LimitScopeKind
LIMIT_SCOPE_KIND_JOB_TYPE: LimitScopeKind
LIMIT_SCOPE_KIND_DEFINITION: LimitScopeKind
LIMIT_SCOPE_KIND_CONCURRENCY_KEY: LimitScopeKind
LIMIT_SCOPE_KIND_CATEGORY: LimitScopeKind
ORDERING_FAILURE_UNSPECIFIED: OrderingFailure
ORDERING_FAILURE_BLOCK: OrderingFailure
ORDERING_FAILURE_SKIP: OrderingFailure

class AdminServiceGetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class AdminServiceGetJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class JobFilter(_message.Message):
    __slots__ = ("statuses", "tenant_id", "job_type", "definition_id", "instance_id", "correlation_id", "category", "created_after", "created_before", "due_after", "due_before", "parent_job_id", "job_types", "group_id", "failed_after")
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    DUE_AFTER_FIELD_NUMBER: _ClassVar[int]
    DUE_BEFORE_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    FAILED_AFTER_FIELD_NUMBER: _ClassVar[int]
    statuses: _containers.RepeatedScalarFieldContainer[_job_pb2.JobStatus]
    tenant_id: str
    job_type: str
    definition_id: str
    instance_id: str
    correlation_id: str
    category: _job_pb2.JobCategory
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    due_after: _timestamp_pb2.Timestamp
    due_before: _timestamp_pb2.Timestamp
    parent_job_id: str
    job_types: _containers.RepeatedScalarFieldContainer[str]
    group_id: str
    failed_after: _timestamp_pb2.Timestamp
    def __init__(self, statuses: _Optional[_Iterable[_Union[_job_pb2.JobStatus, str]]] = ..., tenant_id: _Optional[str] = ..., job_type: _Optional[str] = ..., definition_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., correlation_id: _Optional[str] = ..., category: _Optional[_Union[_job_pb2.JobCategory, str]] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., due_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., due_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., parent_job_id: _Optional[str] = ..., job_types: _Optional[_Iterable[str]] = ..., group_id: _Optional[str] = ..., failed_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("filter", "page_size", "page_token", "order", "include_total", "last_page")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TOTAL_FIELD_NUMBER: _ClassVar[int]
    LAST_PAGE_FIELD_NUMBER: _ClassVar[int]
    filter: JobFilter
    page_size: int
    page_token: str
    order: JobListOrder
    include_total: bool
    last_page: bool
    def __init__(self, filter: _Optional[_Union[JobFilter, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order: _Optional[_Union[JobListOrder, str]] = ..., include_total: _Optional[bool] = ..., last_page: _Optional[bool] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token", "total_count", "prev_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    PREV_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    next_page_token: str
    total_count: int
    prev_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ..., prev_page_token: _Optional[str] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = ("tenant_id", "window", "category", "windows")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    window: _duration_pb2.Duration
    category: _job_pb2.JobCategory
    windows: _containers.RepeatedCompositeFieldContainer[_duration_pb2.Duration]
    def __init__(self, tenant_id: _Optional[str] = ..., window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., category: _Optional[_Union[_job_pb2.JobCategory, str]] = ..., windows: _Optional[_Iterable[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]]] = ...) -> None: ...

class WindowCounts(_message.Message):
    __slots__ = ("window", "completions", "failures", "retries")
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    window: _duration_pb2.Duration
    completions: int
    failures: int
    retries: int
    def __init__(self, window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., completions: _Optional[int] = ..., failures: _Optional[int] = ..., retries: _Optional[int] = ...) -> None: ...

class StatusCount(_message.Message):
    __slots__ = ("tenant_id", "job_type", "status", "count", "scheduled")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    job_type: str
    status: _job_pb2.JobStatus
    count: int
    scheduled: int
    def __init__(self, tenant_id: _Optional[str] = ..., job_type: _Optional[str] = ..., status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., count: _Optional[int] = ..., scheduled: _Optional[int] = ...) -> None: ...

class GetStatsResponse(_message.Message):
    __slots__ = ("counts", "pending", "running", "completed", "faulted", "cancelled", "oldest_pending_age", "retries_in_window", "failures_in_window", "completions_in_window", "dead_letter", "draining", "connected_workers", "held", "scheduled", "windows", "backlog", "backlog_by_type", "read_time")
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAULTED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    OLDEST_PENDING_AGE_FIELD_NUMBER: _ClassVar[int]
    RETRIES_IN_WINDOW_FIELD_NUMBER: _ClassVar[int]
    FAILURES_IN_WINDOW_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_IN_WINDOW_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_WORKERS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    BACKLOG_FIELD_NUMBER: _ClassVar[int]
    BACKLOG_BY_TYPE_FIELD_NUMBER: _ClassVar[int]
    READ_TIME_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.RepeatedCompositeFieldContainer[StatusCount]
    pending: int
    running: int
    completed: int
    faulted: int
    cancelled: int
    oldest_pending_age: _duration_pb2.Duration
    retries_in_window: int
    failures_in_window: int
    completions_in_window: int
    dead_letter: int
    draining: bool
    connected_workers: int
    held: int
    scheduled: int
    windows: _containers.RepeatedCompositeFieldContainer[WindowCounts]
    backlog: Backlog
    backlog_by_type: _containers.RepeatedCompositeFieldContainer[Backlog]
    read_time: _timestamp_pb2.Timestamp
    def __init__(self, counts: _Optional[_Iterable[_Union[StatusCount, _Mapping]]] = ..., pending: _Optional[int] = ..., running: _Optional[int] = ..., completed: _Optional[int] = ..., faulted: _Optional[int] = ..., cancelled: _Optional[int] = ..., oldest_pending_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retries_in_window: _Optional[int] = ..., failures_in_window: _Optional[int] = ..., completions_in_window: _Optional[int] = ..., dead_letter: _Optional[int] = ..., draining: _Optional[bool] = ..., connected_workers: _Optional[int] = ..., held: _Optional[int] = ..., scheduled: _Optional[int] = ..., windows: _Optional[_Iterable[_Union[WindowCounts, _Mapping]]] = ..., backlog: _Optional[_Union[Backlog, _Mapping]] = ..., backlog_by_type: _Optional[_Iterable[_Union[Backlog, _Mapping]]] = ..., read_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Backlog(_message.Message):
    __slots__ = ("tenant_id", "job_type", "ready", "scheduled", "held_paused", "held_limit", "held_rate", "held_ordering", "held_no_worker", "held_drained", "running")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    HELD_PAUSED_FIELD_NUMBER: _ClassVar[int]
    HELD_LIMIT_FIELD_NUMBER: _ClassVar[int]
    HELD_RATE_FIELD_NUMBER: _ClassVar[int]
    HELD_ORDERING_FIELD_NUMBER: _ClassVar[int]
    HELD_NO_WORKER_FIELD_NUMBER: _ClassVar[int]
    HELD_DRAINED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    job_type: str
    ready: int
    scheduled: int
    held_paused: int
    held_limit: int
    held_rate: int
    held_ordering: int
    held_no_worker: int
    held_drained: int
    running: int
    def __init__(self, tenant_id: _Optional[str] = ..., job_type: _Optional[str] = ..., ready: _Optional[int] = ..., scheduled: _Optional[int] = ..., held_paused: _Optional[int] = ..., held_limit: _Optional[int] = ..., held_rate: _Optional[int] = ..., held_ordering: _Optional[int] = ..., held_no_worker: _Optional[int] = ..., held_drained: _Optional[int] = ..., running: _Optional[int] = ...) -> None: ...

class WaitReason(_message.Message):
    __slots__ = ("kind", "message", "until", "pause_id", "count", "limit")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[WaitReason.Kind]
        KIND_NOT_DUE: _ClassVar[WaitReason.Kind]
        KIND_PAUSED: _ClassVar[WaitReason.Kind]
        KIND_TENANT_DISABLED: _ClassVar[WaitReason.Kind]
        KIND_CONCURRENCY_LIMIT: _ClassVar[WaitReason.Kind]
        KIND_NO_WORKER: _ClassVar[WaitReason.Kind]
        KIND_QUEUED_BEHIND: _ClassVar[WaitReason.Kind]
        KIND_LEASED: _ClassVar[WaitReason.Kind]
        KIND_DRAINING: _ClassVar[WaitReason.Kind]
        KIND_NOT_PENDING: _ClassVar[WaitReason.Kind]
        KIND_RATE_LIMIT: _ClassVar[WaitReason.Kind]
        KIND_ORDERING: _ClassVar[WaitReason.Kind]
        KIND_FAIR_SHARE: _ClassVar[WaitReason.Kind]
        KIND_DEBOUNCED: _ClassVar[WaitReason.Kind]
    KIND_UNSPECIFIED: WaitReason.Kind
    KIND_NOT_DUE: WaitReason.Kind
    KIND_PAUSED: WaitReason.Kind
    KIND_TENANT_DISABLED: WaitReason.Kind
    KIND_CONCURRENCY_LIMIT: WaitReason.Kind
    KIND_NO_WORKER: WaitReason.Kind
    KIND_QUEUED_BEHIND: WaitReason.Kind
    KIND_LEASED: WaitReason.Kind
    KIND_DRAINING: WaitReason.Kind
    KIND_NOT_PENDING: WaitReason.Kind
    KIND_RATE_LIMIT: WaitReason.Kind
    KIND_ORDERING: WaitReason.Kind
    KIND_FAIR_SHARE: WaitReason.Kind
    KIND_DEBOUNCED: WaitReason.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    PAUSE_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    kind: WaitReason.Kind
    message: str
    until: _timestamp_pb2.Timestamp
    pause_id: str
    count: int
    limit: int
    def __init__(self, kind: _Optional[_Union[WaitReason.Kind, str]] = ..., message: _Optional[str] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pause_id: _Optional[str] = ..., count: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ExplainJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ExplainJobResponse(_message.Message):
    __slots__ = ("job", "reasons", "last_failure", "unique_key")
    JOB_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_KEY_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    reasons: _containers.RepeatedCompositeFieldContainer[WaitReason]
    last_failure: _job_pb2.JobAttempt
    unique_key: JobUniqueKey
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., reasons: _Optional[_Iterable[_Union[WaitReason, _Mapping]]] = ..., last_failure: _Optional[_Union[_job_pb2.JobAttempt, _Mapping]] = ..., unique_key: _Optional[_Union[JobUniqueKey, _Mapping]] = ...) -> None: ...

class JobUniqueKey(_message.Message):
    __slots__ = ("key", "rule", "admit_time", "window_end_time", "debounced", "last_debounce_time", "max_due_time")
    KEY_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    ADMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_TIME_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCED_FIELD_NUMBER: _ClassVar[int]
    LAST_DEBOUNCE_TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_DUE_TIME_FIELD_NUMBER: _ClassVar[int]
    key: str
    rule: UniqueKeyRule
    admit_time: _timestamp_pb2.Timestamp
    window_end_time: _timestamp_pb2.Timestamp
    debounced: int
    last_debounce_time: _timestamp_pb2.Timestamp
    max_due_time: _timestamp_pb2.Timestamp
    def __init__(self, key: _Optional[str] = ..., rule: _Optional[_Union[UniqueKeyRule, str]] = ..., admit_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., window_end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., debounced: _Optional[int] = ..., last_debounce_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_due_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RetryJobRequest(_message.Message):
    __slots__ = ("job_id", "keep_attempts")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    KEEP_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    keep_attempts: bool
    def __init__(self, job_id: _Optional[str] = ..., keep_attempts: _Optional[bool] = ...) -> None: ...

class RetryJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class RunJobNowRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class RunJobNowResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class PurgeJobsRequest(_message.Message):
    __slots__ = ("filter", "dry_run")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    filter: JobFilter
    dry_run: bool
    def __init__(self, filter: _Optional[_Union[JobFilter, _Mapping]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class PurgeJobsResponse(_message.Message):
    __slots__ = ("matched", "deleted", "kept")
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    matched: int
    deleted: int
    kept: int
    def __init__(self, matched: _Optional[int] = ..., deleted: _Optional[int] = ..., kept: _Optional[int] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ("tenant_id", "statuses", "page_size", "page_token")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    statuses: _containers.RepeatedScalarFieldContainer[_job_pb2.JobGroupStatus]
    page_size: int
    page_token: str
    def __init__(self, tenant_id: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[_job_pb2.JobGroupStatus, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups", "next_page_token")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[_job_pb2.JobGroup]
    next_page_token: str
    def __init__(self, groups: _Optional[_Iterable[_Union[_job_pb2.JobGroup, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AdminServiceGetGroupRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class AdminServiceGetGroupResponse(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: _job_pb2.JobGroup
    def __init__(self, group: _Optional[_Union[_job_pb2.JobGroup, _Mapping]] = ...) -> None: ...

class CancelGroupRequest(_message.Message):
    __slots__ = ("group_id", "reason")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    reason: str
    def __init__(self, group_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelGroupResponse(_message.Message):
    __slots__ = ("group", "cancelled_job_ids")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    group: _job_pb2.JobGroup
    cancelled_job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group: _Optional[_Union[_job_pb2.JobGroup, _Mapping]] = ..., cancelled_job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class UnlockJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class UnlockJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class ReplayJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class ReplayJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class BulkRetryJobsRequest(_message.Message):
    __slots__ = ("filter", "dry_run", "keep_attempts")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    KEEP_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    filter: JobFilter
    dry_run: bool
    keep_attempts: bool
    def __init__(self, filter: _Optional[_Union[JobFilter, _Mapping]] = ..., dry_run: _Optional[bool] = ..., keep_attempts: _Optional[bool] = ...) -> None: ...

class BulkRetryJobsResponse(_message.Message):
    __slots__ = ("matched", "changed")
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    matched: int
    changed: int
    def __init__(self, matched: _Optional[int] = ..., changed: _Optional[int] = ...) -> None: ...

class BulkCancelJobsRequest(_message.Message):
    __slots__ = ("filter", "dry_run", "reason")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    filter: JobFilter
    dry_run: bool
    reason: str
    def __init__(self, filter: _Optional[_Union[JobFilter, _Mapping]] = ..., dry_run: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class BulkCancelJobsResponse(_message.Message):
    __slots__ = ("matched", "changed")
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    matched: int
    changed: int
    def __init__(self, matched: _Optional[int] = ..., changed: _Optional[int] = ...) -> None: ...

class PauseScope(_message.Message):
    __slots__ = ("kind", "tenant_id", "value")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    kind: PauseScopeKind
    tenant_id: str
    value: str
    def __init__(self, kind: _Optional[_Union[PauseScopeKind, str]] = ..., tenant_id: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class PauseRecord(_message.Message):
    __slots__ = ("id", "scope", "actor", "reason", "create_time", "expire_time", "lift_time", "lifted_by")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LIFT_TIME_FIELD_NUMBER: _ClassVar[int]
    LIFTED_BY_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: PauseScope
    actor: str
    reason: str
    create_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    lift_time: _timestamp_pb2.Timestamp
    lifted_by: str
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[_Union[PauseScope, _Mapping]] = ..., actor: _Optional[str] = ..., reason: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lift_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lifted_by: _Optional[str] = ...) -> None: ...

class PauseRequest(_message.Message):
    __slots__ = ("scope", "actor", "reason", "expire_time")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    scope: PauseScope
    actor: str
    reason: str
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, scope: _Optional[_Union[PauseScope, _Mapping]] = ..., actor: _Optional[str] = ..., reason: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PauseResponse(_message.Message):
    __slots__ = ("pause",)
    PAUSE_FIELD_NUMBER: _ClassVar[int]
    pause: PauseRecord
    def __init__(self, pause: _Optional[_Union[PauseRecord, _Mapping]] = ...) -> None: ...

class UnpauseRequest(_message.Message):
    __slots__ = ("scope", "actor")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    scope: PauseScope
    actor: str
    def __init__(self, scope: _Optional[_Union[PauseScope, _Mapping]] = ..., actor: _Optional[str] = ...) -> None: ...

class UnpauseResponse(_message.Message):
    __slots__ = ("lifted",)
    LIFTED_FIELD_NUMBER: _ClassVar[int]
    lifted: _containers.RepeatedCompositeFieldContainer[PauseRecord]
    def __init__(self, lifted: _Optional[_Iterable[_Union[PauseRecord, _Mapping]]] = ...) -> None: ...

class ListPausesRequest(_message.Message):
    __slots__ = ("include_lifted", "tenant_id", "page_size", "page_token")
    INCLUDE_LIFTED_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    include_lifted: bool
    tenant_id: str
    page_size: int
    page_token: str
    def __init__(self, include_lifted: _Optional[bool] = ..., tenant_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPausesResponse(_message.Message):
    __slots__ = ("pauses", "next_page_token")
    PAUSES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    pauses: _containers.RepeatedCompositeFieldContainer[PauseRecord]
    next_page_token: str
    def __init__(self, pauses: _Optional[_Iterable[_Union[PauseRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SetTenantWeightRequest(_message.Message):
    __slots__ = ("tenant_id", "weight")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    weight: int
    def __init__(self, tenant_id: _Optional[str] = ..., weight: _Optional[int] = ...) -> None: ...

class SetTenantWeightResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTenantWeightsRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class TenantWeight(_message.Message):
    __slots__ = ("tenant_id", "weight")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    weight: int
    def __init__(self, tenant_id: _Optional[str] = ..., weight: _Optional[int] = ...) -> None: ...

class ListTenantWeightsResponse(_message.Message):
    __slots__ = ("weights", "default_weight")
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    weights: _containers.RepeatedCompositeFieldContainer[TenantWeight]
    default_weight: int
    def __init__(self, weights: _Optional[_Iterable[_Union[TenantWeight, _Mapping]]] = ..., default_weight: _Optional[int] = ...) -> None: ...

class SetCategoryWeightRequest(_message.Message):
    __slots__ = ("tenant_id", "category", "weight")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    category: _job_pb2.JobCategory
    weight: int
    def __init__(self, tenant_id: _Optional[str] = ..., category: _Optional[_Union[_job_pb2.JobCategory, str]] = ..., weight: _Optional[int] = ...) -> None: ...

class SetCategoryWeightResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListCategoryWeightsRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class CategoryWeight(_message.Message):
    __slots__ = ("tenant_id", "category", "weight")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    category: _job_pb2.JobCategory
    weight: int
    def __init__(self, tenant_id: _Optional[str] = ..., category: _Optional[_Union[_job_pb2.JobCategory, str]] = ..., weight: _Optional[int] = ...) -> None: ...

class ListCategoryWeightsResponse(_message.Message):
    __slots__ = ("weights",)
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    weights: _containers.RepeatedCompositeFieldContainer[CategoryWeight]
    def __init__(self, weights: _Optional[_Iterable[_Union[CategoryWeight, _Mapping]]] = ...) -> None: ...

class RemoveCategoryWeightRequest(_message.Message):
    __slots__ = ("tenant_id", "category")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    category: _job_pb2.JobCategory
    def __init__(self, tenant_id: _Optional[str] = ..., category: _Optional[_Union[_job_pb2.JobCategory, str]] = ...) -> None: ...

class RemoveCategoryWeightResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: _Optional[bool] = ...) -> None: ...

class ConcurrencyLimit(_message.Message):
    __slots__ = ("kind", "value", "max_running", "running")
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    kind: LimitScopeKind
    value: str
    max_running: int
    running: int
    def __init__(self, kind: _Optional[_Union[LimitScopeKind, str]] = ..., value: _Optional[str] = ..., max_running: _Optional[int] = ..., running: _Optional[int] = ...) -> None: ...

class SetConcurrencyLimitRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: ConcurrencyLimit
    def __init__(self, limit: _Optional[_Union[ConcurrencyLimit, _Mapping]] = ...) -> None: ...

class SetConcurrencyLimitResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListConcurrencyLimitsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListConcurrencyLimitsResponse(_message.Message):
    __slots__ = ("limits",)
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[ConcurrencyLimit]
    def __init__(self, limits: _Optional[_Iterable[_Union[ConcurrencyLimit, _Mapping]]] = ...) -> None: ...

class RateLimit(_message.Message):
    __slots__ = ("kind", "value", "starts", "period", "burst", "throttled_until", "slow_level")
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    STARTS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    THROTTLED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    SLOW_LEVEL_FIELD_NUMBER: _ClassVar[int]
    kind: LimitScopeKind
    value: str
    starts: int
    period: _duration_pb2.Duration
    burst: int
    throttled_until: _timestamp_pb2.Timestamp
    slow_level: int
    def __init__(self, kind: _Optional[_Union[LimitScopeKind, str]] = ..., value: _Optional[str] = ..., starts: _Optional[int] = ..., period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., burst: _Optional[int] = ..., throttled_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., slow_level: _Optional[int] = ...) -> None: ...

class SetRateLimitRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: RateLimit
    def __init__(self, limit: _Optional[_Union[RateLimit, _Mapping]] = ...) -> None: ...

class SetRateLimitResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRateLimitsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRateLimitsResponse(_message.Message):
    __slots__ = ("limits",)
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[RateLimit]
    def __init__(self, limits: _Optional[_Iterable[_Union[RateLimit, _Mapping]]] = ...) -> None: ...

class RemoveRateLimitRequest(_message.Message):
    __slots__ = ("kind", "value")
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    kind: LimitScopeKind
    value: str
    def __init__(self, kind: _Optional[_Union[LimitScopeKind, str]] = ..., value: _Optional[str] = ...) -> None: ...

class RemoveRateLimitResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: _Optional[bool] = ...) -> None: ...

class DrainRequest(_message.Message):
    __slots__ = ("cluster", "worker_id")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster: bool
    worker_id: str
    def __init__(self, cluster: _Optional[bool] = ..., worker_id: _Optional[str] = ...) -> None: ...

class DrainResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UndrainRequest(_message.Message):
    __slots__ = ("cluster", "worker_id")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster: bool
    worker_id: str
    def __init__(self, cluster: _Optional[bool] = ..., worker_id: _Optional[str] = ...) -> None: ...

class UndrainResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("worker_id", "hostname", "pid", "sdk_version", "job_types", "slots", "in_flight_job_ids", "connect_time", "last_heartbeat_time", "coordinator_id", "credits", "draining", "stale")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    SDK_VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    CONNECT_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    hostname: str
    pid: int
    sdk_version: str
    job_types: _containers.RepeatedScalarFieldContainer[str]
    slots: int
    in_flight_job_ids: _containers.RepeatedScalarFieldContainer[str]
    connect_time: _timestamp_pb2.Timestamp
    last_heartbeat_time: _timestamp_pb2.Timestamp
    coordinator_id: str
    credits: int
    draining: bool
    stale: bool
    def __init__(self, worker_id: _Optional[str] = ..., hostname: _Optional[str] = ..., pid: _Optional[int] = ..., sdk_version: _Optional[str] = ..., job_types: _Optional[_Iterable[str]] = ..., slots: _Optional[int] = ..., in_flight_job_ids: _Optional[_Iterable[str]] = ..., connect_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_heartbeat_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., coordinator_id: _Optional[str] = ..., credits: _Optional[int] = ..., draining: _Optional[bool] = ..., stale: _Optional[bool] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...

class JobTypeDefaults(_message.Message):
    __slots__ = ("job_type", "retry_policy", "execution_timeout", "heartbeat_timeout", "ordering_failure")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ORDERING_FAILURE_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    retry_policy: _job_pb2.RetryPolicy
    execution_timeout: _duration_pb2.Duration
    heartbeat_timeout: _duration_pb2.Duration
    ordering_failure: OrderingFailure
    def __init__(self, job_type: _Optional[str] = ..., retry_policy: _Optional[_Union[_job_pb2.RetryPolicy, _Mapping]] = ..., execution_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., ordering_failure: _Optional[_Union[OrderingFailure, str]] = ...) -> None: ...

class SetJobTypeDefaultsRequest(_message.Message):
    __slots__ = ("defaults",)
    DEFAULTS_FIELD_NUMBER: _ClassVar[int]
    defaults: JobTypeDefaults
    def __init__(self, defaults: _Optional[_Union[JobTypeDefaults, _Mapping]] = ...) -> None: ...

class SetJobTypeDefaultsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListJobTypeDefaultsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListJobTypeDefaultsResponse(_message.Message):
    __slots__ = ("defaults",)
    DEFAULTS_FIELD_NUMBER: _ClassVar[int]
    defaults: _containers.RepeatedCompositeFieldContainer[JobTypeDefaults]
    def __init__(self, defaults: _Optional[_Iterable[_Union[JobTypeDefaults, _Mapping]]] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("authenticated", "name", "roles", "tenants", "job_types")
    AUTHENTICATED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    authenticated: bool
    name: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    tenants: _containers.RepeatedScalarFieldContainer[str]
    job_types: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, authenticated: _Optional[bool] = ..., name: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., tenants: _Optional[_Iterable[str]] = ..., job_types: _Optional[_Iterable[str]] = ...) -> None: ...
