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

class LeaseState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEASE_STATE_UNSPECIFIED: _ClassVar[LeaseState]
    LEASE_STATE_EXTENDED: _ClassVar[LeaseState]
    LEASE_STATE_LOST: _ClassVar[LeaseState]
    LEASE_STATE_CANCEL_REQUESTED: _ClassVar[LeaseState]
LEASE_STATE_UNSPECIFIED: LeaseState
LEASE_STATE_EXTENDED: LeaseState
LEASE_STATE_LOST: LeaseState
LEASE_STATE_CANCEL_REQUESTED: LeaseState

class WorkerHello(_message.Message):
    __slots__ = ("worker_id", "job_types", "slots", "hostname", "pid", "sdk_version", "max_batch_size", "max_receive_message_bytes")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    SDK_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_RECEIVE_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    job_types: _containers.RepeatedScalarFieldContainer[str]
    slots: int
    hostname: str
    pid: int
    sdk_version: str
    max_batch_size: int
    max_receive_message_bytes: int
    def __init__(self, worker_id: _Optional[str] = ..., job_types: _Optional[_Iterable[str]] = ..., slots: _Optional[int] = ..., hostname: _Optional[str] = ..., pid: _Optional[int] = ..., sdk_version: _Optional[str] = ..., max_batch_size: _Optional[int] = ..., max_receive_message_bytes: _Optional[int] = ...) -> None: ...

class CreditGrant(_message.Message):
    __slots__ = ("credits",)
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    credits: int
    def __init__(self, credits: _Optional[int] = ...) -> None: ...

class OutcomeBatch(_message.Message):
    __slots__ = ("batch_id", "outcomes", "credits")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    outcomes: _containers.RepeatedCompositeFieldContainer[JobOutcome]
    credits: int
    def __init__(self, batch_id: _Optional[int] = ..., outcomes: _Optional[_Iterable[_Union[JobOutcome, _Mapping]]] = ..., credits: _Optional[int] = ...) -> None: ...

class AcquireJobsRequest(_message.Message):
    __slots__ = ("hello", "credit", "outcomes")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    hello: WorkerHello
    credit: CreditGrant
    outcomes: OutcomeBatch
    def __init__(self, hello: _Optional[_Union[WorkerHello, _Mapping]] = ..., credit: _Optional[_Union[CreditGrant, _Mapping]] = ..., outcomes: _Optional[_Union[OutcomeBatch, _Mapping]] = ...) -> None: ...

class LeasedJob(_message.Message):
    __slots__ = ("job", "lease_token", "lease_expire_time")
    JOB_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    lease_token: str
    lease_expire_time: _timestamp_pb2.Timestamp
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., lease_token: _Optional[str] = ..., lease_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class JobBatch(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[LeasedJob]
    def __init__(self, jobs: _Optional[_Iterable[_Union[LeasedJob, _Mapping]]] = ...) -> None: ...

class WorkerAccepted(_message.Message):
    __slots__ = ("coordinator_id", "heartbeat_interval_ms", "outcomes_on_stream")
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_ON_STREAM_FIELD_NUMBER: _ClassVar[int]
    coordinator_id: str
    heartbeat_interval_ms: int
    outcomes_on_stream: bool
    def __init__(self, coordinator_id: _Optional[str] = ..., heartbeat_interval_ms: _Optional[int] = ..., outcomes_on_stream: _Optional[bool] = ...) -> None: ...

class DrainRequested(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class OutcomeAnswers(_message.Message):
    __slots__ = ("batch_id", "results")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    results: _containers.RepeatedCompositeFieldContainer[OutcomeResult]
    def __init__(self, batch_id: _Optional[int] = ..., results: _Optional[_Iterable[_Union[OutcomeResult, _Mapping]]] = ...) -> None: ...

class AcquireJobsResponse(_message.Message):
    __slots__ = ("accepted", "jobs", "drain", "outcomes")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    accepted: WorkerAccepted
    jobs: JobBatch
    drain: DrainRequested
    outcomes: OutcomeAnswers
    def __init__(self, accepted: _Optional[_Union[WorkerAccepted, _Mapping]] = ..., jobs: _Optional[_Union[JobBatch, _Mapping]] = ..., drain: _Optional[_Union[DrainRequested, _Mapping]] = ..., outcomes: _Optional[_Union[OutcomeAnswers, _Mapping]] = ...) -> None: ...

class LeaseRef(_message.Message):
    __slots__ = ("job_id", "lease_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("worker_id", "leases")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    leases: _containers.RepeatedCompositeFieldContainer[LeaseRef]
    def __init__(self, worker_id: _Optional[str] = ..., leases: _Optional[_Iterable[_Union[LeaseRef, _Mapping]]] = ...) -> None: ...

class LeaseStatus(_message.Message):
    __slots__ = ("job_id", "state", "lease_expire_time")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    state: LeaseState
    lease_expire_time: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., state: _Optional[_Union[LeaseState, str]] = ..., lease_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("leases",)
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[LeaseStatus]
    def __init__(self, leases: _Optional[_Iterable[_Union[LeaseStatus, _Mapping]]] = ...) -> None: ...

class CompleteJobRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "result")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    result: _job_pb2.Payload
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., result: _Optional[_Union[_job_pb2.Payload, _Mapping]] = ...) -> None: ...

class CompleteJobResponse(_message.Message):
    __slots__ = ("already_recorded",)
    ALREADY_RECORDED_FIELD_NUMBER: _ClassVar[int]
    already_recorded: bool
    def __init__(self, already_recorded: _Optional[bool] = ...) -> None: ...

class FailJobRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "error", "error_kind", "non_retryable", "retry_time", "traceback")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    RETRY_TIME_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    error: str
    error_kind: str
    non_retryable: bool
    retry_time: _timestamp_pb2.Timestamp
    traceback: str
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., error: _Optional[str] = ..., error_kind: _Optional[str] = ..., non_retryable: _Optional[bool] = ..., retry_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., traceback: _Optional[str] = ...) -> None: ...

class FailJobResponse(_message.Message):
    __slots__ = ("status", "next_attempt_time", "already_recorded")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RECORDED_FIELD_NUMBER: _ClassVar[int]
    status: _job_pb2.JobStatus
    next_attempt_time: _timestamp_pb2.Timestamp
    already_recorded: bool
    def __init__(self, status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., next_attempt_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., already_recorded: _Optional[bool] = ...) -> None: ...

class Completion(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: _job_pb2.Payload
    def __init__(self, result: _Optional[_Union[_job_pb2.Payload, _Mapping]] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("error", "error_kind", "non_retryable", "retry_time", "traceback")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    RETRY_TIME_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    error: str
    error_kind: str
    non_retryable: bool
    retry_time: _timestamp_pb2.Timestamp
    traceback: str
    def __init__(self, error: _Optional[str] = ..., error_kind: _Optional[str] = ..., non_retryable: _Optional[bool] = ..., retry_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., traceback: _Optional[str] = ...) -> None: ...

class Release(_message.Message):
    __slots__ = ("reason", "payload")
    REASON_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    reason: str
    payload: _job_pb2.Payload
    def __init__(self, reason: _Optional[str] = ..., payload: _Optional[_Union[_job_pb2.Payload, _Mapping]] = ...) -> None: ...

class PushBack(_message.Message):
    __slots__ = ("retry_after",)
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    retry_after: _duration_pb2.Duration
    def __init__(self, retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class JobOutcome(_message.Message):
    __slots__ = ("job_id", "lease_token", "completed", "failed", "released", "push_back")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    PUSH_BACK_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    completed: Completion
    failed: Failure
    released: Release
    push_back: PushBack
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., completed: _Optional[_Union[Completion, _Mapping]] = ..., failed: _Optional[_Union[Failure, _Mapping]] = ..., released: _Optional[_Union[Release, _Mapping]] = ..., push_back: _Optional[_Union[PushBack, _Mapping]] = ...) -> None: ...

class OutcomeResult(_message.Message):
    __slots__ = ("job_id", "accepted", "error_code", "error_message", "status", "already_recorded", "note")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RECORDED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    accepted: bool
    error_code: str
    error_message: str
    status: _job_pb2.JobStatus
    already_recorded: bool
    note: str
    def __init__(self, job_id: _Optional[str] = ..., accepted: _Optional[bool] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ..., status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., already_recorded: _Optional[bool] = ..., note: _Optional[str] = ...) -> None: ...

class ReportOutcomesRequest(_message.Message):
    __slots__ = ("outcomes",)
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[JobOutcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[JobOutcome, _Mapping]]] = ...) -> None: ...

class ReportOutcomesResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[OutcomeResult]
    def __init__(self, results: _Optional[_Iterable[_Union[OutcomeResult, _Mapping]]] = ...) -> None: ...
