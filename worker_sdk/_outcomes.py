"""Batched outcome reporting, on the job stream or through ``ReportOutcomes``.

Handlers finish one at a time, but the coordinator's store is fastest when it
records outcomes in batches, so finished jobs queue here and a flusher sends
them: at once when ``batch_size`` are pending, otherwise after at most
``linger`` seconds. Several reports may be in flight at once.

While the worker's ``AcquireJobs`` stream is open and its coordinator takes
outcomes on it (``WorkerAccepted.outcomes_on_stream``), a batch goes as one
``OutcomeBatch`` message carrying the credit the finished jobs free, and its
answers come back on the stream (:class:`StreamLink`). Otherwise (an older
coordinator, or the stream's request side closed at shutdown) it goes as a
``ReportOutcomes`` call. Both answer per outcome.

On a transport failure (the call fails, or the stream ends before the batch
is answered) the batch is re-sent with capped exponential backoff, and so are
the outcomes answered with a transient code (e.g. ``UNAVAILABLE``: the store
could not be reached).
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
import contextlib
import dataclasses
import itertools
import logging
from collections.abc import Callable, Sequence

import grpc

from workflowjobs.v1 import worker_service_pb2, worker_service_pb2_grpc

from ._backoff import RETRYABLE_CODES, Backoff, BackoffConfig

__all__ = ["OutcomeReporter", "ReporterConfig", "StreamLink"]

# Server errors that one outcome of a batch may cause: split the batch.
_SPLIT_CODES = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})
_RETRYABLE_NAMES = frozenset(code.name for code in RETRYABLE_CODES)
# Not recorded for a reason of the job's state (a lost lease, a job set aside).
_NOT_RECORDED = grpc.StatusCode.FAILED_PRECONDITION.name


class _ReportFailed(Exception):
    """A batch got no answers: the call failed, or the stream ended first.

    ``unary`` says the batch must not go on a job stream again: the stream it
    was on ended refusing a message it carried.
    """

    def __init__(self, code: grpc.StatusCode, details: str, *, unary: bool = False) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.unary = unary


class StreamLink:
    """One open job stream that takes outcomes (see the module's docstring).

    Args:
        send: Queues a request on the stream.
        take_credit: The credit to grant with the next batch (the worker's free
            slots, counted as granted by the call).
    """

    def __init__(
        self,
        send: Callable[[worker_service_pb2.AcquireJobsRequest], None],
        take_credit: Callable[[], int],
    ) -> None:
        self._send = send
        self._take_credit = take_credit
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Sequence[worker_service_pb2.OutcomeResult]]] = {}
        self.sending = True
        """False once the stream's request side is closed: new batches take ``ReportOutcomes``."""

    def send(
        self, batch: list[worker_service_pb2.JobOutcome]
    ) -> asyncio.Future[Sequence[worker_service_pb2.OutcomeResult]]:
        """Send ``batch`` with the free credit; the future resolves to its answers."""
        batch_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._waiting[batch_id] = future
        request = worker_service_pb2.AcquireJobsRequest()
        message = request.outcomes
        message.batch_id = batch_id
        message.outcomes.extend(batch)
        credits = self._take_credit()
        if credits > 0:
            message.credits = credits
        self._send(request)
        return future

    def answered(self, answers: worker_service_pb2.OutcomeAnswers) -> None:
        """The coordinator answered one batch (called by the stream's reader)."""
        future = self._waiting.pop(answers.batch_id, None)
        if future is not None and not future.done():
            future.set_result(answers.results)

    def ended(self, reason: str, code: grpc.StatusCode | None = None) -> None:
        """The stream ended: batches not answered yet are sent again.

        When the coordinator ended it refusing a message (``INVALID_ARGUMENT``),
        one of those batches may be what it refused: they are sent again with
        ``ReportOutcomes``, which answers each outcome on its own, instead of
        ending the next stream too.
        """
        self.sending = False
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(
                    _ReportFailed(
                        grpc.StatusCode.UNAVAILABLE,
                        f"the job stream ended before the outcomes were answered ({reason})",
                        unary=code == grpc.StatusCode.INVALID_ARGUMENT,
                    )
                )


@dataclasses.dataclass(frozen=True, slots=True)
class ReporterConfig:
    """Tuning of the outcome reporter."""

    batch_size: int = 100
    """Send as soon as this many outcomes are pending; also the largest report."""
    linger: float = 0.002
    """Longest a lone outcome waits for companions, in seconds."""
    max_in_flight: int = 4
    """Reports (stream batches or ReportOutcomes calls) in flight at once."""
    rpc_timeout: float = 15.0
    """Deadline of one ReportOutcomes call, or of the answer to a stream batch, in seconds."""
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
        self._link: StreamLink | None = None
        self.reports_sent = 0
        """Reports (stream batches or ReportOutcomes calls) answered so far."""

    def use_stream(self, link: StreamLink | None) -> None:
        """Send new batches on ``link`` (None: through ``ReportOutcomes``)."""
        self._link = link

    @property
    def carries_credit(self) -> bool:
        """True when the next batch goes on the stream and will carry the free credit."""
        link = self._link
        return link is not None and link.sending and bool(self._pending)

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
            async with asyncio.timeout(timeout):
                await self._idle.wait()
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
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(config.linger):
                        await self._full.wait()
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

    async def _report(
        self, batch: list[worker_service_pb2.JobOutcome], *, unary: bool = False
    ) -> Sequence[worker_service_pb2.OutcomeResult]:
        """One report of ``batch`` (on the job stream unless ``unary``): its answers,
        in order; ``_ReportFailed`` without them."""
        link = self._link
        if link is not None and link.sending and not unary:
            future = link.send(batch)
            try:
                async with asyncio.timeout(self._config.rpc_timeout):
                    answers = await future
            except TimeoutError:
                raise _ReportFailed(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"no answer on the job stream within {self._config.rpc_timeout:g}s",
                ) from None
            return answers
        request = worker_service_pb2.ReportOutcomesRequest(outcomes=batch)
        try:
            response = await self._stub.ReportOutcomes(
                request, timeout=self._config.rpc_timeout, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as exc:
            raise _ReportFailed(exc.code(), exc.details() or "") from exc
        results: Sequence[worker_service_pb2.OutcomeResult] = response.results
        return results

    async def _send(
        self,
        batch: list[worker_service_pb2.JobOutcome],
        first_sent: float | None = None,
        unary: bool = False,
    ) -> None:
        loop = asyncio.get_running_loop()
        if first_sent is None:
            first_sent = loop.time()
        backoff = Backoff(
            BackoffConfig(
                initial=self._config.initial_backoff, maximum=self._config.max_backoff, jitter=0.5
            )
        )
        while True:
            try:
                results = await self._report(batch, unary=unary)
            except _ReportFailed as exc:
                unary = unary or exc.unary
                if exc.code in _SPLIT_CODES and len(batch) > 1:
                    self._logger.warning(
                        "reporting %d outcome(s) failed (%s: %s); sending them in two halves",
                        len(batch),
                        exc.code.name,
                        exc.details,
                    )
                    await self._split(batch, first_sent, unary)
                    return
                if exc.code in RETRYABLE_CODES and not self._give_up.is_set():
                    if await self._retry_later(
                        batch, first_sent, backoff, exc.code.name, exc.details
                    ):
                        return
                    continue
                if len(batch) > 1 and exc.code not in RETRYABLE_CODES:
                    for outcome in batch:
                        await self._send([outcome], first_sent, unary)
                    return
                self._logger.error(
                    "coordinator rejected outcome(s) for job(s) %s: %s: %s",
                    ", ".join(o.job_id for o in batch),
                    exc.code.name,
                    exc.details,
                )
                return
            self.reports_sent += 1
            again, last = self._handle_results(batch, results)
            if not again or last is None:
                return
            # Answered with a transient code: only those outcomes are sent again
            # (in place: the list is the one registered as in flight).
            batch[:] = again
            if self._give_up.is_set() or await self._retry_later(
                batch, first_sent, backoff, last.error_code, last.error_message
            ):
                return

    async def _retry_later(
        self,
        batch: list[worker_service_pb2.JobOutcome],
        first_sent: float,
        backoff: Backoff,
        code: str,
        details: str,
    ) -> bool:
        """Wait before re-sending ``batch``; True when it is given up instead."""
        delay = backoff.next_delay()
        waited = asyncio.get_running_loop().time() - first_sent
        if waited + delay > self._config.give_up_after:
            self._logger.error(
                "gave up reporting the outcome of job(s) %s after %.1fs of "
                "failures (last: %s: %s); their leases will expire and the "
                "coordinator will retry them",
                ", ".join(o.job_id for o in batch),
                waited,
                code,
                details,
            )
            return True
        self._logger.warning(
            "reporting %d outcome(s) failed (%s: %s); retrying in %.2fs",
            len(batch),
            code,
            details,
            delay,
        )
        return await self._wait_or_give_up(delay)

    async def _split(
        self, batch: list[worker_service_pb2.JobOutcome], first_sent: float, unary: bool
    ) -> None:
        """Send both halves of ``batch`` at once; each leaves the in-flight set when done."""
        middle = len(batch) // 2
        halves = [batch[:middle], batch[middle:]]
        self._in_flight.pop(id(batch), None)
        for half in halves:
            self._in_flight[id(half)] = half

        async def send(half: list[worker_service_pb2.JobOutcome]) -> None:
            try:
                await self._send(half, first_sent, unary)
            finally:
                self._in_flight.pop(id(half), None)

        await asyncio.gather(*(send(half) for half in halves))

    async def _wait_or_give_up(self, delay: float) -> bool:
        try:
            async with asyncio.timeout(delay):
                await self._give_up.wait()
        except TimeoutError:
            return False
        return True

    def _handle_results(
        self,
        batch: list[worker_service_pb2.JobOutcome],
        results: Sequence[worker_service_pb2.OutcomeResult],
    ) -> tuple[list[worker_service_pb2.JobOutcome], worker_service_pb2.OutcomeResult | None]:
        """Log what was not recorded; return the outcomes to send again (transient
        answers) and the last such answer."""
        if len(results) != len(batch):
            self._logger.warning(
                "coordinator answered %d result(s) for %d outcome(s)",
                len(results),
                len(batch),
            )
        again: list[worker_service_pb2.JobOutcome] = []
        last = None
        for outcome, result in zip(batch, results, strict=False):
            if result.accepted:
                if result.note:
                    # Recorded, with something changed (a push-back shortened).
                    self._logger.warning(
                        "outcome of job %s recorded: %s",
                        outcome.job_id,
                        result.note,
                        extra={"job_id": outcome.job_id},
                    )
                continue
            code = result.error_code
            if code in _RETRYABLE_NAMES:
                again.append(outcome)
                last = result
            elif code == _NOT_RECORDED:
                # The coordinator says why (a lost lease, a job set aside): log that.
                self._logger.warning(
                    "outcome of job %s not recorded: %s: %s",
                    outcome.job_id,
                    code,
                    result.error_message,
                    extra={"job_id": outcome.job_id},
                )
            else:
                self._logger.error(
                    "outcome of job %s rejected: %s: %s",
                    outcome.job_id,
                    code,
                    result.error_message,
                    extra={"job_id": outcome.job_id},
                )
        return again, last
