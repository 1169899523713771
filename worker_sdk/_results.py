"""Waiting for a job's outcome: enqueue, wait, and get the value or the job's error.

``WaitForJob`` answers when the job reaches ``COMPLETED``, ``FAULTED`` or
``CANCELLED`` (the coordinator wakes the call when the outcome is recorded; it
does not poll on the caller's behalf). :func:`job_outcome` turns that terminal
job into the handler's return value, decoded to the type the caller asks for,
or raises :class:`JobFailedError`. :func:`enqueue_and_wait` and
:func:`aenqueue_and_wait` put the three steps together for the
:class:`~worker_sdk.SchedulerClient` and the
:class:`~worker_sdk.AsyncSchedulerClient`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, overload

from ._convert import JobStatus, JobView

if TYPE_CHECKING:
    from ._scheduler import AsyncSchedulerClient, SchedulerClient

__all__ = ["JobFailedError", "aenqueue_and_wait", "enqueue_and_wait", "job_outcome"]


class JobFailedError(Exception):
    """The job ended ``FAULTED`` or ``CANCELLED`` instead of completing.

    Args:
        job: The job in its terminal status.

    Attributes:
        job: The job, with ``last_error`` and (when asked for) its attempts.
        job_id: The job's id.
        status: ``FAULTED`` or ``CANCELLED``.
        error: The last attempt's error text.
    """

    def __init__(self, job: JobView) -> None:
        self.job = job
        self.job_id = job.id
        self.status = job.status
        self.error = job.last_error
        detail = f": {job.last_error}" if job.last_error else ""
        super().__init__(f"job {job.id} ({job.job_type}) ended {job.status.value}{detail}")


T = TypeVar("T")


@overload
def job_outcome(job: JobView, result_type: type[T]) -> T: ...
@overload
def job_outcome(job: JobView, result_type: Any = Any) -> Any: ...
def job_outcome(job: JobView, result_type: Any = Any) -> Any:
    """The result of a finished job, or its error.

    Args:
        job: A job in a terminal status (from ``wait_for_job``).
        result_type: Type to decode the result into (dataclass, pydantic model,
            protobuf class, ``bytes``…); ``Any`` gives the natural decoding.

    Returns:
        The decoded result of a ``COMPLETED`` job (None when it has none).

    Raises:
        JobFailedError: The job is ``FAULTED`` or ``CANCELLED``.
        ValueError: The job has not finished.
    """
    if job.status == JobStatus.COMPLETED:
        return job.result_value(result_type)
    if job.status.is_terminal:
        raise JobFailedError(job)
    raise ValueError(f"job {job.id} is {job.status.value}, not finished")


@overload
def enqueue_and_wait(
    client: SchedulerClient,
    job_type: str,
    payload: Any = None,
    *,
    timeout: float | None = None,
    result_type: type[T],
    **options: Any,
) -> T: ...
@overload
def enqueue_and_wait(
    client: SchedulerClient,
    job_type: str,
    payload: Any = None,
    *,
    timeout: float | None = None,
    **options: Any,
) -> Any: ...
def enqueue_and_wait(
    client: SchedulerClient,
    job_type: str,
    payload: Any = None,
    *,
    timeout: float | None = None,
    result_type: Any = Any,
    **options: Any,
) -> Any:
    """Enqueue a job, wait for its outcome and return its result.

    The job runs on distributed workers like any other; only the caller waits.
    When the wait times out the job carries on, and the caller can wait again
    with ``client.wait_for_job(job_id)`` (the id is on the error).

    Args:
        client: The scheduler client to use.
        job_type: Job type.
        payload: The job's input (see :meth:`SchedulerClient.enqueue`).
        timeout: Seconds to wait for the outcome; None waits as long as it takes.
        result_type: Type to decode the result into.
        **options: Any other :meth:`SchedulerClient.enqueue` argument
            (``tenant_id``, ``workflow``, ``idempotency_key``, …).

    Returns:
        The decoded result.

    Raises:
        JobFailedError: The job ended ``FAULTED`` or ``CANCELLED``.
        DeadlineExceededError: ``timeout`` passed first; its ``job_id``
            attribute names the job.
        WorkflowJobsError: The enqueue was refused.
    """
    job = client.enqueue(job_type, payload, **options)
    try:
        done = client.wait_for_job(job.id, timeout=timeout)
    except TimeoutError as exc:
        exc.job_id = job.id  # type: ignore[attr-defined]
        raise
    return job_outcome(done, result_type)


@overload
async def aenqueue_and_wait(
    client: AsyncSchedulerClient,
    job_type: str,
    payload: Any = None,
    *,
    timeout: float | None = None,
    result_type: type[T],
    **options: Any,
) -> T: ...
@overload
async def aenqueue_and_wait(
    client: AsyncSchedulerClient,
    job_type: str,
    payload: Any = None,
    *,
    timeout: float | None = None,
    **options: Any,
) -> Any: ...
async def aenqueue_and_wait(
    client: AsyncSchedulerClient,
    job_type: str,
    payload: Any = None,
    *,
    timeout: float | None = None,
    result_type: Any = Any,
    **options: Any,
) -> Any:
    """Enqueue a job, wait for its outcome and return its result (asyncio).

    See :func:`enqueue_and_wait`.
    """
    job = await client.enqueue(job_type, payload, **options)
    try:
        done = await client.wait_for_job(job.id, timeout=timeout)
    except TimeoutError as exc:
        exc.job_id = job.id  # type: ignore[attr-defined]
        raise
    return job_outcome(done, result_type)
