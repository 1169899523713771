"""Batched outcome reporting through ``WorkerService.ReportOutcomes``.

Handlers finish one at a time, but the coordinator's store is fastest when it
records outcomes in batches, so finished jobs queue here and a flusher sends
them: at once when ``batch_size`` are pending, otherwise after at most
``linger`` seconds. Several reports may be in flight at once.

On a transport failure the batch is re-sent with capped exponential backoff.
Re-sending is safe because the coordinator's writes are guarded by the lease
token: an outcome that was in fact recorded answers ``FAILED_PRECONDITION`` the
second time. A batch that fails with ``INTERNAL`` or ``UNKNOWN`` (a server
error that one outcome may cause) is split in halves, each sent on its own and
split again if it fails again, so a bad outcome ends up alone and its
neighbours get through. A batch rejected as a whole with a non-retryable code
is re-sent one outcome at a time. Nothing is retried forever: an outcome still
unreported ``give_up_after`` seconds after its first send is abandoned with an
ERROR log line naming the job (``gave up reporting the outcome of job(s) ...``);
its lease expires and the coordinator retries the job. :meth:`OutcomeReporter.flush`
with a timeout gives up the same way at shutdown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence

import grpc

from workflowjobs.v1 import worker_service_pb2, worker_service_pb2_grpc

from ._backoff import RETRYABLE_CODES, Backoff, BackoffConfig

__all__ = ["OutcomeReporter", "ReporterConfig"]

# Server errors that one outcome of a batch may cause: split the batch.
_SPLIT_CODES = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})


@dataclasses.dataclass(frozen=True, slots=True)
class ReporterConfig:
    """Tuning of the outcome reporter."""

    batch_size: int = 100
    """Send as soon as this many outcomes are pending; also the largest report."""
    linger: float = 0.002
    """Longest a lone outcome waits for companions, in seconds."""
    max_in_flight: int = 4
    """ReportOutcomes calls in flight at once."""
    rpc_timeout: float = 15.0
    """Deadline of one ReportOutcomes call, in seconds."""
    initial_backoff: float = 0.05
    """First delay before re-sending after a transport failure, in seconds."""
    max_backoff: float = 5.0
    """Cap on the re-send delay, in seconds."""
    give_up_after: float = 300.0
    """Longest an outcome is re-sent after its first attempt, in seconds; then it is
    abandoned with an error log line (its lease expires, the job is retried)."""


class OutcomeReporter:
    """Queues job outcomes and reports them in batches.

    Args:
        stub: WorkerService stub on the worker's channel.
        metadata: Metadata sent with every call.
        config: Tuning; defaults are fine.
        logger: Where lost leases and rejected outcomes are logged.
    """

    def __init__(
        self,
        stub: worker_service_pb2_grpc.WorkerServiceStub,
        *,
        metadata: Sequence[tuple[str, str]] = (),
        config: ReporterConfig | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self._stub = stub
        self._metadata = tuple(metadata)
        self._config = config or ReporterConfig()
        self._logger = logger or logging.getLogger("worker_sdk.outcomes")
        self._pending: list[worker_service_pb2.JobOutcome] = []
        self._in_flight: dict[int, list[worker_service_pb2.JobOutcome]] = {}
        self._wakeup = asyncio.Event()
        self._full = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._give_up = asyncio.Event()
        self._slots = asyncio.Semaphore(self._config.max_in_flight)
        self._task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self.reports_sent = 0
        """ReportOutcomes calls answered so far."""

    def start(self) -> None:
        """Start the flusher (call from the event loop)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="worker-sdk-outcome-flusher")

    def submit(self, outcome: worker_service_pb2.JobOutcome) -> None:
        """Queue one outcome for reporting. Never blocks."""
        self._pending.append(outcome)
        self._idle.clear()
        self._wakeup.set()
        if len(self._pending) >= self._config.batch_size:
            self._full.set()

    def unreported(self) -> list[worker_service_pb2.LeaseRef]:
        """Leases whose outcome is queued or in flight (they still need heartbeats)."""
        refs = [
            worker_service_pb2.LeaseRef(job_id=o.job_id, lease_token=o.lease_token)
            for o in self._pending
        ]
        for batch in self._in_flight.values():
            refs.extend(
                worker_service_pb2.LeaseRef(job_id=o.job_id, lease_token=o.lease_token)
                for o in batch
            )
        return refs

    @property
    def backlog(self) -> int:
        """Outcomes queued or in flight."""
        return len(self._pending) + sum(len(b) for b in self._in_flight.values())

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued outcome has been answered.

        Args:
            timeout: Seconds to wait; on expiry, re-sending stops and every
                outcome not yet recorded is logged as an error.

        Returns:
            True when everything was reported.
        """
        self._full.set()
        self._wakeup.set()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            self._give_up.set()
            lost = [ref.job_id for ref in self.unreported()]
            self._logger.error(
                "gave up reporting %d outcome(s) at shutdown; their leases will expire and "
                "the coordinator will retry them: %s",
                len(lost),
                ", ".join(lost),
            )
            return False

    async def close(self) -> None:
        """Stop the flusher and abandon sends still retrying."""
        self._give_up.set()
        tasks = [t for t in (self._task, *self._sends) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None

    async def _run(self) -> None:
        config = self._config
        while True:
            await self._wakeup.wait()
            if not self._pending:
                self._wakeup.clear()
                self._update_idle()
                continue
            if len(self._pending) < config.batch_size and not self._full.is_set():
                try:
                    await asyncio.wait_for(self._full.wait(), config.linger)
                except TimeoutError:
                    pass
            await self._slots.acquire()
            batch = self._pending[: config.batch_size]
            del self._pending[: config.batch_size]
            if len(self._pending) < config.batch_size:
                self._full.clear()
            if not self._pending:
                self._wakeup.clear()
            self._in_flight[id(batch)] = batch
            task = asyncio.create_task(self._send_batch(batch), name="worker-sdk-report")
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)

    def _update_idle(self) -> None:
        if not self._pending and not self._in_flight:
            self._idle.set()

    async def _send_batch(self, batch: list[worker_service_pb2.JobOutcome]) -> None:
        try:
            await self._send(batch)
        finally:
            self._in_flight.pop(id(batch), None)
            self._slots.release()
            self._update_idle()

    async def _send(
        self, batch: list[worker_service_pb2.JobOutcome], first_sent: float | None = None
    ) -> None:
        loop = asyncio.get_running_loop()
        if first_sent is None:
            first_sent = loop.time()
        backoff = Backoff(
            BackoffConfig(
                initial=self._config.initial_backoff, maximum=self._config.max_backoff, jitter=0.5
            )
        )
        request = worker_service_pb2.ReportOutcomesRequest(outcomes=batch)
        while True:
            try:
                response = await self._stub.ReportOutcomes(
                    request, timeout=self._config.rpc_timeout, metadata=self._metadata
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() in _SPLIT_CODES and len(batch) > 1:
                    self._logger.warning(
                        "reporting %d outcome(s) failed (%s: %s); sending them in two halves",
                        len(batch),
                        exc.code().name,
                        exc.details(),
                    )
                    await self._split(batch, first_sent)
                    return
                if exc.code() in RETRYABLE_CODES and not self._give_up.is_set():
                    delay = backoff.next_delay()
                    waited = loop.time() - first_sent
                    if waited + delay > self._config.give_up_after:
                        self._logger.error(
                            "gave up reporting the outcome of job(s) %s after %.1fs of "
                            "failures (last: %s: %s); their leases will expire and the "
                            "coordinator will retry them",
                            ", ".join(o.job_id for o in batch),
                            waited,
                            exc.code().name,
                            exc.details(),
                        )
                        return
                    self._logger.warning(
                        "reporting %d outcome(s) failed (%s: %s); retrying in %.2fs",
                        len(batch),
                        exc.code().name,
                        exc.details(),
                        delay,
                    )
                    if await self._wait_or_give_up(delay):
                        return
                    continue
                if len(batch) > 1 and exc.code() not in RETRYABLE_CODES:
                    for outcome in batch:
                        await self._send([outcome], first_sent)
                    return
                self._logger.error(
                    "coordinator rejected outcome(s) for job(s) %s: %s: %s",
                    ", ".join(o.job_id for o in batch),
                    exc.code().name,
                    exc.details(),
                )
                return
            self.reports_sent += 1
            self._handle_results(batch, response)
            return

    async def _split(self, batch: list[worker_service_pb2.JobOutcome], first_sent: float) -> None:
        """Send both halves of ``batch`` at once; each leaves the in-flight set when done."""
        middle = len(batch) // 2
        halves = [batch[:middle], batch[middle:]]
        self._in_flight.pop(id(batch), None)
        for half in halves:
            self._in_flight[id(half)] = half

        async def send(half: list[worker_service_pb2.JobOutcome]) -> None:
            try:
                await self._send(half, first_sent)
            finally:
                self._in_flight.pop(id(half), None)

        await asyncio.gather(*(send(half) for half in halves))

    async def _wait_or_give_up(self, delay: float) -> bool:
        try:
            await asyncio.wait_for(self._give_up.wait(), delay)
        except TimeoutError:
            return False
        return True

    def _handle_results(
        self,
        batch: list[worker_service_pb2.JobOutcome],
        response: worker_service_pb2.ReportOutcomesResponse,
    ) -> None:
        if len(response.results) != len(batch):
            self._logger.warning(
                "coordinator answered %d result(s) for %d outcome(s)",
                len(response.results),
                len(batch),
            )
        for outcome, result in zip(batch, response.results, strict=False):
            if result.accepted:
                continue
            if result.error_code == grpc.StatusCode.FAILED_PRECONDITION.name:
                self._logger.warning(
                    "outcome of job %s not recorded, lease lost: %s",
                    outcome.job_id,
                    result.error_message,
                    extra={"job_id": outcome.job_id},
                )
            else:
                self._logger.error(
                    "outcome of job %s rejected: %s: %s",
                    outcome.job_id,
                    result.error_code,
                    result.error_message,
                    extra={"job_id": outcome.job_id},
                )
