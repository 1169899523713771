import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from workflowjobs.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

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
    __slots__ = ("job", "deduplicated", "lease_token", "lease_expire_time")
    JOB_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    deduplicated: bool
    lease_token: str
    lease_expire_time: _timestamp_pb2.Timestamp
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., deduplicated: _Optional[bool] = ..., lease_token: _Optional[str] = ..., lease_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class EnqueueBatchRequest(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.JobSpec]
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.JobSpec, _Mapping]]] = ...) -> None: ...

class EnqueueResult(_message.Message):
    __slots__ = ("job_id", "deduplicated", "status")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    deduplicated: bool
    status: _job_pb2.JobStatus
    def __init__(self, job_id: _Optional[str] = ..., deduplicated: _Optional[bool] = ..., status: _Optional[_Union[_job_pb2.JobStatus, str]] = ...) -> None: ...

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
