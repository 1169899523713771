from workflowjobs.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EnqueueRequest(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.JobSpec
    def __init__(self, job: _Optional[_Union[_job_pb2.JobSpec, _Mapping]] = ...) -> None: ...

class EnqueueResponse(_message.Message):
    __slots__ = ("job", "deduplicated")
    JOB_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    deduplicated: bool
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., deduplicated: _Optional[bool] = ...) -> None: ...

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
