"""The worker: pulls leased jobs over one stream and runs their handlers.

Design note
-----------
Flow control is by credit, and credits are slots: the worker grants the
coordinator one credit per free handler slot, the coordinator never pushes more
jobs than the credit outstanding, and every received job starts at once. There
is no local queue, so a job never waits on a worker that is busy.

Invariant, per connection: ``running + outstanding credit <= concurrency``. The
grant is recomputed from that invariant each time (``concurrency - running -
outstanding``), so it corrects itself after reconnects (outstanding credit
starts again at zero on a new stream) and if a coordinator over-delivers. Grants
are coalesced: sent at once when at least ``max(1, concurrency // 4)`` slots
are free, otherwise after about 2 ms of quiet; while the coordinator still
holds at least that much of the worker's credit, free slots wait until it
runs low or enough are free (each grant wakes an acquisition on the
coordinator, and more credit there changes nothing while it has plenty).
While outcomes travel on the stream, the credit that finished jobs free
rides on their batch of outcomes instead (a 10 ms timer grants it should that
batch be held up).

Tasks on the event loop:

* the stream loop: connect, ``WorkerHello``, grant credit, start pushed jobs;
  reconnect with capped, jittered exponential backoff when the stream breaks
  (running jobs carry on; they do not depend on the stream);
* the heartbeater (:mod:`worker_sdk._heartbeat`): renews every held lease and
  turns ``LOST`` / ``CANCEL_REQUESTED`` answers into the job's cancel signal;
* the outcome reporter (:mod:`worker_sdk._outcomes`): batches outcomes into
  ``OutcomeBatch`` messages on the stream, each carrying the credit its jobs
  free (``ReportOutcomes`` calls with a coordinator that does not take them,
  and once the stream's request side is closed);
* one task per running job; blocking handlers run in a thread pool, with the
  context variables (and so :func:`current_job`) copied in.

Connection states::

    (new) --arun--> connecting --accepted--> streaming --broken--> backoff --> connecting
                         |                       |
                         +------ stop -----------+--> draining --> stopped

Shutdown order (``shutdown()``, SIGTERM/SIGINT under ``run()``):

1. stop acquiring: no more credit, close the request side of the stream; set
   every running handler's ``ctx.stopping`` signal (``ctx.is_stopping()``);
2. wait for running handlers, up to ``shutdown_grace`` seconds (heartbeats go on);
3. set the cancel signal of handlers still running and cancel the tasks of async
   ones; each that stops within a second reports a ``Release`` (one that returns
   a value reports it: the work was done). Jobs pushed after step 1 are released
   at once;
4. a handler still running then (a blocking one in its thread, an async one
   that ignores cancellation) can still touch the outside world, so its lease is
   kept and heartbeated: under :meth:`Worker.run`, which owns the process, the
   jobs are handed back and the process exits right after the ``Release`` is
   flushed (``os._exit``: nothing of the handler runs on); under
   :meth:`Worker.arun` the worker waits, heartbeating, until each returns and
   reports what it returned;
5. flush queued outcomes;
6. stop the heartbeater and the stream, close the channel;
7. re-raise the first fatal error, if any.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc

from workflowjobs.v1 import job_pb2, worker_service_pb2, worker_service_pb2_grpc

from . import _stages, _tracing
from ._backoff import Backoff, BackoffConfig
from ._context import CancelReason, JobContext
from ._convert import RetryPolicy, from_timestamp
from ._errors import (
    error_from_rpc,
)
from ._execution import Attempt, Outcome, outcome_message, release, run_attempt
from ._handler import HandlerSpec
from ._heartbeat import Heartbeater
from ._logging import install_default_logging
from ._outcomes import OutcomeReporter, ReporterConfig, StreamLink
from ._scheduler import AsyncSchedulerClient
from ._transport import ChannelConfig
from ._version import __version__

__all__ = ["Worker", "channel_config_of", "handler_of"]

logger = logging.getLogger("worker_sdk.worker")

F = TypeVar("F", bound=Callable[..., Any])

_FATAL_STREAM_CODES = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)


class Worker:
    """Runs handlers for jobs pulled from a coordinator.

    A worker in a few lines::

        worker = Worker("coordinator:50051")

        @worker.handler("send_email")
        async def send_email(message: EmailMessage) -> dict:
            ...

        worker.run()

    Args:
        target: The coordinator's address: ``host:port`` or any gRPC target
            (``dns:///coordinators:50051``). None: ``WFJOBS_TARGET``, else the
            ``wfjobs`` profile, else 127.0.0.1:50051 (the settings ``wfjobs``
            reads: see :class:`~worker_sdk.ConnectionSettings`).
        concurrency: Handler slots: the most jobs running at once.
        worker_id: Stable id of this worker process; generated when None.
        job_types: Job types to ask for; defaults to every registered handler.
        max_batch_size: Most jobs the coordinator may push in one message.
        heartbeat_interval: Seconds between lease heartbeats; defaults to the
            coordinator's recommendation, else a third of the shortest lease.
        shutdown_grace: Seconds running handlers get to finish on shutdown
            before they are cancelled and their jobs handed back. A handler
            that cannot be stopped (a blocking one, or an async one ignoring
            cancellation) keeps its job leased while it runs: :meth:`run`
            then hands the job back and exits the process at once;
            :meth:`arun` waits for it (see the module's shutdown order).
        credentials: TLS/mTLS channel credentials; None: from ``WFJOBS_CA``
            (``WFJOBS_TLS``, ``WFJOBS_CERT``/``WFJOBS_KEY``) or the profile, else plaintext.
        token: Bearer token for the coordinator; None: ``WFJOBS_TOKEN``,
            ``WFJOBS_TOKEN_FILE`` or the profile.
        metadata: Extra metadata sent with every call.
        thread_pool_size: Threads for blocking handlers; defaults to ``concurrency``.
        cancel_grace: Seconds an async handler may keep running after a cancel
            request (its ``ctx.cancelled`` is set at once) before its task is
            cancelled.
        reconnect_initial_backoff: First delay before reconnecting, in seconds.
        reconnect_max_backoff: Cap on the reconnect delay, in seconds.
        channel_options: Extra gRPC channel options.
        outcome_flush_timeout: Seconds to keep trying to report outcomes at
            shutdown; defaults to ``shutdown_grace``.
        load_balancing: gRPC load-balancing policy over the addresses the
            target resolves to: ``round_robin`` spreads the worker's streams
            and calls over every coordinator behind one name (a headless
            Service); None: ``WFJOBS_LOAD_BALANCING``, the profile, else
            gRPC's ``pick_first`` (one coordinator).

    Raises:
        ValueError: A setting can never work, such as a target that is not
            ``host:port`` (``:47311x``): refused here rather than retried forever.
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        concurrency: int = 100,
        worker_id: str | None = None,
        job_types: Sequence[str] | None = None,
        max_batch_size: int = 100,
        heartbeat_interval: float | None = None,
        shutdown_grace: float = 30.0,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        thread_pool_size: int | None = None,
        cancel_grace: float = 5.0,
        reconnect_initial_backoff: float = 0.1,
        reconnect_max_backoff: float = 10.0,
        channel_options: Sequence[tuple[str, Any]] = (),
        outcome_flush_timeout: float | None = None,
        load_balancing: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be at least 1")
        self._channel_config = ChannelConfig(
            target,
            credentials=credentials,
            token=token,
            metadata=metadata,
            options=channel_options,
            load_balancing=load_balancing,
        )
        self._concurrency = concurrency
        self._worker_id = (
            worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        )
        self._job_types = list(job_types) if job_types is not None else None
        self._max_batch_size = max_batch_size
        self._heartbeat_interval = heartbeat_interval
        self._shutdown_grace = shutdown_grace
        self._thread_pool_size = thread_pool_size or concurrency
        self._cancel_grace = cancel_grace
        self._reconnect_initial_backoff = reconnect_initial_backoff
        self._reconnect_max_backoff = reconnect_max_backoff
        self._outcome_flush_timeout = (
            outcome_flush_timeout if outcome_flush_timeout is not None else max(shutdown_grace, 1.0)
        )
        # Grants are coalesced: each one wakes an acquisition on the coordinator,
        # and bigger grants mean bigger (cheaper per job) acquisitions.
        self._credit_threshold = max(1, concurrency // 4)
        self._handlers: dict[str, HandlerSpec] = {}

        self._state = "new"
        self._stop_requested = asyncio.Event()
        self._force_stop = asyncio.Event()
        self._stopped = asyncio.Event()
        self._fatal_error: BaseException | None = None
        self._running: dict[tuple[str, str], Attempt] = {}
        self._outstanding_credit = 0
        self._requests: asyncio.Queue[worker_service_pb2.AcquireJobsRequest | None] | None = None
        self._credit_timer: asyncio.TimerHandle | None = None
        self._coordinator_draining = False
        # Connection state, for logging its changes (see _on_disconnected).
        self._connected = False
        self._disconnected_at: float | None = None
        self._disconnected_reason = ""
        self._accepted_heartbeat_ms = 0
        self._coordinator_id = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._channel: grpc.aio.Channel | None = None
        self._children: AsyncSchedulerClient | None = None
        self._stub: worker_service_pb2_grpc.WorkerServiceStub | None = None
        self._reporter: OutcomeReporter | None = None
        self._link: StreamLink | None = None
        self._heartbeater: Heartbeater | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._background: list[asyncio.Task[None]] = []
        self._stream_call: Any = None
        # Set by run(): this worker owns the process and may end it (shutdown step 4).
        self._owns_process = False
        # Handlers that ignored cancellation were handed back: the process must exit.
        self._exit_now = False

    # -- registration -------------------------------------------------------------------------

    def handler(
        self,
        job_type: str,
        *,
        retry_policy: RetryPolicy | job_pb2.RetryPolicy | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated function as the handler of ``job_type``.

        The function may be ``async`` (run on the event loop) or plain (run in
        the thread pool). It takes at most one payload parameter, decoded by its
        annotation (dataclass, pydantic model, protobuf message, ``bytes``, or
        JSON for ``dict``/``Any``/none), and may take parameters annotated
        :class:`JobContext`. Its return value becomes the job's result.

        Args:
            job_type: The job type to serve.
            retry_policy: Applied by the worker to this handler's failures:
                error kinds listed as non-retryable and the last of
                ``max_attempts`` fault the job; the backoff sets the retry time.
                Jobs' own policies on the coordinator still apply.

        Returns:
            A decorator returning the function unchanged.
        """

        def decorator(func: F) -> F:
            self.register(job_type, func, retry_policy=retry_policy)
            return func

        return decorator

    def register(
        self,
        job_type: str,
        func: Callable[..., Any],
        *,
        retry_policy: RetryPolicy | job_pb2.RetryPolicy | None = None,
    ) -> None:
        """Register ``func`` as the handler of ``job_type`` (see :meth:`handler`).

        Raises:
            ValueError: A handler for ``job_type`` already exists.
            RuntimeError: The worker has started.
            TypeError: The function's signature cannot be served.
        """
        if self._state != "new":
            raise RuntimeError("handlers must be registered before the worker starts")
        if job_type in self._handlers:
            raise ValueError(f"a handler for job type {job_type!r} is already registered")
        self._handlers[job_type] = HandlerSpec.build(job_type, func, retry_policy=retry_policy)

    # -- introspection ------------------------------------------------------------------------

    @property
    def worker_id(self) -> str:
        """This worker's id, as sent to the coordinator."""
        return self._worker_id

    @property
    def job_types(self) -> list[str]:
        """The job types this worker asks for."""
        return list(self._job_types if self._job_types is not None else self._handlers)

    @property
    def in_flight(self) -> int:
        """Handlers running now."""
        return len(self._running)

    @property
    def is_running(self) -> bool:
        """True between start and the end of shutdown."""
        return self._state in ("running", "stopping")

    # -- lifecycle ----------------------------------------------------------------------------

    def run(self) -> None:
        """Run until SIGTERM/SIGINT (or :meth:`shutdown`), blocking the caller.

        A first signal drains gracefully (see the module's shutdown order); a
        second one skips the rest of the grace period.

        Raises:
            WorkflowJobsError: A fatal error, such as a rejected credential.
        """
        self._owns_process = True
        asyncio.run(self._run_with_signals())

    async def _run_with_signals(self) -> None:
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        try:
            await self.arun()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            if self._exit_now:
                # Handlers still run (in threads, or deaf to cancellation) after
                # their jobs were handed back: nothing of theirs may run on.
                logging.shutdown()
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(1 if self._fatal_error is not None else 0)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._stop_requested.is_set():
            logger.warning("%s again: skipping the rest of the shutdown grace", sig.name)
            self._force_stop.set()
            return
        logger.info("%s received: draining", sig.name)
        self._stop_requested.set()

    async def arun(self) -> None:
        """Run on the current event loop until :meth:`shutdown` is called.

        Returns right away if :meth:`shutdown` was called before start.

        Raises:
            RuntimeError: The worker already ran.
            ValueError: No handler is registered, or a requested job type has none.
            WorkflowJobsError: A fatal error, re-raised after shutdown.
        """
        if self._state == "stopped":
            return
        if self._state != "new":
            raise RuntimeError("a Worker runs once; create a new one")
        if not self._handlers:
            raise ValueError("register at least one handler before starting the worker")
        missing = [t for t in self.job_types if t not in self._handlers]
        if missing:
            raise ValueError(f"no handler registered for job type(s): {', '.join(missing)}")
        install_default_logging()
        self._state = "running"
        self._loop = asyncio.get_running_loop()
        self._channel = self._channel_config.aio_channel()
        self._stub = worker_service_pb2_grpc.WorkerServiceStub(self._channel)
        metadata = self._channel_config.metadata
        # Child jobs (ctx.enqueue) go over the worker's channel with its credential.
        self._children = AsyncSchedulerClient(
            self._channel_config.target, token="", metadata=metadata, channel=self._channel
        )
        self._reporter = OutcomeReporter(
            self._stub,
            metadata=metadata,
            config=ReporterConfig(batch_size=max(100, min(self._max_batch_size, 500))),
        )
        self._heartbeater = Heartbeater(
            self._stub,
            worker_id=self._worker_id,
            leases=self._held_leases,
            on_status=self._on_lease_status,
            interval=self._current_heartbeat_interval,
            metadata=metadata,
        )
        self._executor = ThreadPoolExecutor(
            max_workers=self._thread_pool_size, thread_name_prefix="worker-sdk-handler"
        )
        self._reporter.start()
        self._background = [
            self._supervise(self._heartbeater.run(), "heartbeater"),
            self._supervise(self._stream_loop(), "stream"),
        ]
        logger.info(
            "worker %s started (workflow-jobs %s): coordinator %s, job types %s, %d slot(s)",
            self._worker_id,
            __version__,
            self._channel_config.target,
            ", ".join(self.job_types),
            self._concurrency,
        )
        try:
            await self._stop_requested.wait()
        finally:
            await self._shutdown_sequence()
        if self._fatal_error is not None:
            raise self._fatal_error

    async def shutdown(self) -> None:
        """Drain and stop; returns when the worker has stopped.

        Idempotent: may be called twice, concurrently, or before the worker
        started (then :meth:`arun` returns at once). Do not await it from inside
        a handler of this worker: it waits for handlers to finish.
        """
        if self._state == "new":
            self._state = "stopped"
            self._stopped.set()
            return
        self._stop_requested.set()
        await self._stopped.wait()

    def _supervise(self, coro: Any, name: str) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(coro, name=f"worker-sdk-{name}")

        def done(t: asyncio.Task[None]) -> None:
            if t.cancelled():
                return
            exc = t.exception()
            if exc is not None:
                self._set_fatal(exc, f"{name} task failed")

        task.add_done_callback(done)
        return task

    def _set_fatal(self, exc: BaseException, what: str) -> None:
        if self._fatal_error is None:
            self._fatal_error = exc
            logger.error("%s: %s; stopping the worker", what, exc, exc_info=exc)
        self._stop_requested.set()

    async def _shutdown_sequence(self) -> None:
        self._state = "stopping"
        assert self._reporter is not None and self._executor is not None
        # 1. Stop acquiring, and tell running handlers (ctx.is_stopping()).
        self._close_request_side()
        for running in self._running.values():
            running.ctx._stop()
        # 2. Wait for running handlers, up to the grace period.
        tasks = [r.task for r in self._running.values() if r.task is not None]
        if tasks and not self._force_stop.is_set():
            logger.info(
                "waiting up to %.1fs for %d running job(s)", self._shutdown_grace, len(tasks)
            )
            all_done = asyncio.ensure_future(asyncio.wait(tasks))
            forced = asyncio.ensure_future(self._force_stop.wait())
            try:
                await asyncio.wait(
                    [all_done, forced],
                    timeout=self._shutdown_grace,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                all_done.cancel()
                forced.cancel()
        # 3. Hand back what is still running.
        await self._hand_back_running()
        # 4. Flush outcomes.
        await self._reporter.flush(self._outcome_flush_timeout)
        # 5. Stop background work and close the channel.
        for task in self._background:
            task.cancel()
        if self._stream_call is not None:
            self._stream_call.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._reporter.close()
        if self._channel is not None:
            await self._channel.close(None)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._state = "stopped"
        self._stopped.set()
        logger.info("worker %s stopped", self._worker_id)

    async def _hand_back_running(self) -> None:
        still_running = list(self._running.values())
        if not still_running:
            return
        logger.warning(
            "handing back %d job(s) still running after the shutdown grace", len(still_running)
        )
        for running in still_running:
            running.cancel_reason = CancelReason.WORKER_SHUTDOWN
            running.ctx._cancel(CancelReason.WORKER_SHUTDOWN)
            # A blocking handler's thread cannot be stopped: its task ends only
            # when the handler returns, and is left to do so.
            if running.task is not None and (running.handler is None or running.handler.is_async):
                running.task.cancel()
        tasks = [r.task for r in still_running if r.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        stuck = [r for r in still_running if r.key in self._running]
        if not stuck:
            return
        if self._owns_process:
            logger.warning(
                "%d handler(s) did not stop (a blocking handler, or one ignoring "
                "cancellation): handing their jobs back and exiting the process",
                len(stuck),
            )
            for running in stuck:
                self._release(running, "worker shutting down; handler did not stop")
            self._exit_now = True
            return
        logger.warning(
            "waiting for %d handler(s) that did not stop (a blocking handler, or one "
            "ignoring cancellation); their jobs stay leased, heartbeated, until they return",
            len(stuck),
        )
        await asyncio.wait([r.task for r in stuck if r.task is not None])

    # -- the stream ---------------------------------------------------------------------------

    def _hello(self) -> worker_service_pb2.AcquireJobsRequest:
        return worker_service_pb2.AcquireJobsRequest(
            hello=worker_service_pb2.WorkerHello(
                worker_id=self._worker_id,
                job_types=self.job_types,
                slots=self._concurrency,
                hostname=socket.gethostname(),
                pid=os.getpid(),
                sdk_version=__version__,
                max_batch_size=self._max_batch_size,
                max_receive_message_bytes=self._channel_config.max_receive_message_bytes,
            )
        )

    async def _request_stream(
        self, queue: asyncio.Queue[worker_service_pb2.AcquireJobsRequest | None]
    ) -> Any:
        while True:
            item = await queue.get()
            if item is None:
                return
            yield item

    async def _stream_loop(self) -> None:
        assert self._stub is not None
        backoff = Backoff(
            BackoffConfig(
                initial=self._reconnect_initial_backoff,
                maximum=self._reconnect_max_backoff,
                jitter=0.5,
            )
        )
        while not self._stop_requested.is_set():
            queue: asyncio.Queue[worker_service_pb2.AcquireJobsRequest | None] = asyncio.Queue()
            queue.put_nowait(self._hello())
            self._requests = queue
            self._outstanding_credit = 0
            self._coordinator_draining = False
            # Credit goes out once the coordinator accepts the hello: a refused
            # hello then ends the call with the coordinator's status, not with
            # a client-side write error on a closed stream.
            call = self._stub.AcquireJobs(
                self._request_stream(queue), metadata=self._channel_config.metadata
            )
            self._stream_call = call
            ended = "the coordinator closed the job stream"
            ended_code: grpc.StatusCode | None = None
            accepted = False
            try:
                async for response in call:
                    kind = response.WhichOneof("kind")
                    if kind == "jobs":
                        self._on_jobs(response.jobs)
                    elif kind == "outcomes":
                        if self._link is not None:
                            self._link.answered(response.outcomes)
                    elif kind == "accepted":
                        accepted = True
                        backoff.reset()
                        self._on_accepted(response.accepted, queue)
                    elif kind == "drain":
                        self._on_drain(response.drain)
                if self._stop_requested.is_set():
                    return
                self._on_disconnected(ended)
            except grpc.aio.AioRpcError as exc:
                ended = f"{exc.code().name}: {exc.details()}"
                ended_code = exc.code()
                if self._stop_requested.is_set():
                    return
                # INVALID_ARGUMENT after the hello was accepted refuses a later
                # message (an outcome batch): the link sends it again otherwise.
                if exc.code() in _FATAL_STREAM_CODES and not (
                    accepted and exc.code() == grpc.StatusCode.INVALID_ARGUMENT
                ):
                    raise error_from_rpc(exc) from exc
                self._on_disconnected(ended)
            finally:
                if self._link is not None:
                    self._link.ended(ended, ended_code)
                    self._link = None
                    assert self._reporter is not None
                    self._reporter.use_stream(None)
                if self._requests is queue:
                    self._requests = None
                queue.put_nowait(None)
                self._stream_call = None
            delay = backoff.next_delay()
            logger.debug("next connection attempt in %.2fs", delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stop_requested.wait()

    def _on_accepted(
        self,
        accepted: worker_service_pb2.WorkerAccepted,
        queue: asyncio.Queue[worker_service_pb2.AcquireJobsRequest | None],
    ) -> None:
        self._coordinator_id = accepted.coordinator_id
        if accepted.outcomes_on_stream:
            # Outcomes go on this stream, each batch with the credit it frees.
            self._link = StreamLink(queue.put_nowait, self._take_credit)
            assert self._reporter is not None
            self._reporter.use_stream(self._link)
        self._accepted_heartbeat_ms = accepted.heartbeat_interval_ms
        coordinator = accepted.coordinator_id or "(unnamed)"
        if self._disconnected_at is None:
            logger.info(
                "connected to coordinator %s at %s as worker %s",
                coordinator,
                self._channel_config.target,
                self._worker_id,
            )
        else:
            logger.info(
                "reconnected to coordinator %s at %s after %.1fs",
                coordinator,
                self._channel_config.target,
                time.monotonic() - self._disconnected_at,
            )
        self._connected = True
        self._disconnected_at = None
        self._disconnected_reason = ""
        if self._heartbeater is not None:
            self._heartbeater.reschedule()
        self._grant_credit()

    def _on_disconnected(self, reason: str) -> None:
        """Log a change of connection state once; repeated failures only at DEBUG."""
        target = self._channel_config.target
        if self._connected:
            logger.warning(
                "lost the connection to the coordinator at %s (%s); reconnecting, "
                "running jobs carry on",
                target,
                reason,
            )
            self._disconnected_at = time.monotonic()
        elif reason != self._disconnected_reason:
            logger.warning("cannot reach the coordinator at %s (%s); retrying", target, reason)
        else:
            logger.debug("still cannot reach the coordinator at %s (%s)", target, reason)
        self._connected = False
        self._disconnected_reason = reason

    def _on_drain(self, drain: worker_service_pb2.DrainRequested) -> None:
        # A drained coordinator stops pushing; the worker stops granting on this
        # stream and finishes what it runs. A new stream (after the coordinator
        # closes this one) starts granting again.
        logger.info("coordinator requested drain: %s", drain.reason or "(no reason)")
        self._coordinator_draining = True
        self._cancel_credit_timer()

    def _close_request_side(self) -> None:
        self._cancel_credit_timer()
        if self._link is not None:
            # Batches already sent are answered on the stream; new ones take ReportOutcomes.
            self._link.sending = False
        if self._requests is not None:
            self._requests.put_nowait(None)
            self._requests = None

    # -- credit -------------------------------------------------------------------------------

    def _free_credit(self) -> int:
        return self._concurrency - len(self._running) - self._outstanding_credit

    def _can_grant(self) -> bool:
        return (
            self._requests is not None
            and not self._stop_requested.is_set()
            and not self._coordinator_draining
        )

    def _credit_due(self) -> int:
        """The free slots worth granting now: all of them once enough are free, or
        once the coordinator holds little credit of ours; none while it holds
        plenty (a grant wakes an acquisition there, which more credit would
        not change)."""
        credits = self._free_credit()
        if credits <= 0 or not self._can_grant():
            return 0
        if credits >= self._credit_threshold or self._outstanding_credit < self._credit_threshold:
            return credits
        return 0

    def _grant_credit(self) -> None:
        """Grant the free slots due (see :meth:`_credit_due`) now."""
        self._cancel_credit_timer()
        credits = self._credit_due()
        if credits > 0:
            assert self._requests is not None
            self._requests.put_nowait(
                worker_service_pb2.AcquireJobsRequest(
                    credit=worker_service_pb2.CreditGrant(credits=credits)
                )
            )
            self._outstanding_credit += credits

    def _take_credit(self) -> int:
        """The free slots due, counted as granted: they ride on a batch of outcomes."""
        self._cancel_credit_timer()
        credits = self._credit_due()
        self._outstanding_credit += credits
        return credits

    def _slot_freed(self) -> None:
        """Coalesce grants: send now when enough slots are free, else after ~2 ms.

        When the next batch of outcomes goes on the stream it carries the free
        credit; a timer still grants it should that batch be held up. While
        the coordinator holds plenty of credit, nothing is scheduled: the
        credit goes out once it runs low (:meth:`_on_jobs`) or enough is free.
        """
        if not self._can_grant():
            return
        if self._reporter is not None and self._reporter.carries_credit:
            if self._credit_timer is None and self._loop is not None:
                self._credit_timer = self._loop.call_later(0.01, self._grant_credit)
            return
        if self._free_credit() >= self._credit_threshold:
            self._grant_credit()
        elif (
            self._credit_timer is None
            and self._loop is not None
            and self._outstanding_credit < self._credit_threshold
        ):
            self._credit_timer = self._loop.call_later(0.002, self._grant_credit)

    def _cancel_credit_timer(self) -> None:
        if self._credit_timer is not None:
            self._credit_timer.cancel()
            self._credit_timer = None

    # -- jobs ---------------------------------------------------------------------------------

    def _on_jobs(self, batch: worker_service_pb2.JobBatch) -> None:
        if _stages.ENABLED:
            _stages.received([leased.job.id for leased in batch.jobs])
        now = datetime.now(UTC)
        # The jobs of one batch mostly share their lease's expiry: convert it once.
        expire_key: tuple[int, int] | None = None
        expire: datetime | None = None
        stopping = self._stop_requested.is_set()
        for leased in batch.jobs:
            self._outstanding_credit = max(0, self._outstanding_credit - 1)
            job = leased.job
            token = leased.lease_token
            ts = leased.lease_expire_time
            if (ts.seconds, ts.nanos) != expire_key:
                expire_key = (ts.seconds, ts.nanos)
                expire = from_timestamp(ts)
            ctx = JobContext(
                job=job,
                lease_token=token,
                lease_expire_time=expire,
                worker_id=self._worker_id,
                heartbeat_callback=self._on_context_heartbeat,
                start_time=now,
                children=self._children,
                loop=self._loop,
            )
            running = Attempt(
                leased=leased,
                ctx=ctx,
                handler=self._handlers.get(job.job_type),
                lease_duration=(expire - now).total_seconds() if expire else None,
                key=(job.id, token),
            )
            if stopping:
                self._release(running, "worker shutting down", track=False)
                continue
            if running.key in self._running:
                logger.warning("job %s pushed twice with the same lease; ignored", job.id)
                continue
            self._running[running.key] = running
            running.task = asyncio.create_task(self._execute(running), name=f"job-{job.id}")
        if self._outstanding_credit < self._credit_threshold and self._free_credit() > 0:
            # The coordinator runs low on credit held back while it had plenty.
            self._slot_freed()
        if self._heartbeater is not None and self._heartbeat_interval is None:
            # The interval depends on the shortest lease held.
            self._heartbeater.reschedule()
        if len(self._running) > self._concurrency:
            logger.warning(
                "coordinator pushed more jobs than granted credit: %d running, %d slots",
                len(self._running),
                self._concurrency,
            )

    async def _execute(self, running: Attempt) -> None:
        outcome = await run_attempt(running, executor=self._executor, worker_id=self._worker_id)
        self._finish(running, outcome)

    def _finish(self, running: Attempt, outcome: Any) -> None:
        self._running.pop(running.key, None)
        if running.handed_back:
            return
        if running.ctx.lease_lost:
            running.ctx.logger.warning(
                "job %s finished after its lease was lost; outcome not reported", running.ctx.job_id
            )
        else:
            self._submit(running, outcome)
        self._slot_freed()

    def _release(self, running: Attempt, reason: str, *, track: bool = True) -> None:
        running.handed_back = True
        if track:
            self._running.pop(running.key, None)
        self._submit(running, release(reason))

    def _submit(self, running: Attempt, outcome: Outcome) -> None:
        assert self._reporter is not None
        job_id, token = running.key
        self._reporter.submit(outcome_message(job_id, token, outcome, running.ctx.push_back))

    # -- heartbeats ---------------------------------------------------------------------------

    def _held_leases(self) -> list[worker_service_pb2.LeaseRef]:
        assert self._reporter is not None
        leases = [
            worker_service_pb2.LeaseRef(job_id=job_id, lease_token=token)
            for (job_id, token), running in self._running.items()
            if not running.ctx.lease_lost
        ]
        leases.extend(self._reporter.unreported())
        return leases

    def _current_heartbeat_interval(self) -> float:
        """The configured or recommended interval, shortened to a third of the
        shortest lease held: a lease is renewed well before it can expire."""
        if self._heartbeat_interval:
            return self._heartbeat_interval
        base = self._accepted_heartbeat_ms / 1000 if self._accepted_heartbeat_ms > 0 else 10.0
        durations = [r.lease_duration for r in self._running.values() if r.lease_duration]
        if durations:
            return max(0.25, min(base, min(durations) / 3))
        return base

    def _on_context_heartbeat(self, ctx: JobContext, details: Any) -> None:
        loop, heartbeater = self._loop, self._heartbeater
        if loop is not None and heartbeater is not None and not loop.is_closed():
            loop.call_soon_threadsafe(heartbeater.trigger)

    def _on_lease_status(
        self, ref: worker_service_pb2.LeaseRef, status: worker_service_pb2.LeaseStatus
    ) -> None:
        running = self._running.get((ref.job_id, ref.lease_token))
        if running is None:
            return
        ctx = running.ctx
        if status.state == worker_service_pb2.LEASE_STATE_EXTENDED:
            expire = from_timestamp(status.lease_expire_time)
            if expire is not None:
                ctx.lease_expire_time = expire
        elif status.state == worker_service_pb2.LEASE_STATE_LOST:
            if not ctx.is_cancelled():
                ctx.logger.warning("lease of job %s lost", ctx.job_id)
            _tracing.event(running.span, "lease lost")
            ctx._cancel(CancelReason.LEASE_LOST)
        elif status.state == worker_service_pb2.LEASE_STATE_CANCEL_REQUESTED:
            if running.cancel_reason is None:
                ctx.logger.info("cancel requested for job %s", ctx.job_id)
                _tracing.event(running.span, "cancel requested")
                running.cancel_reason = CancelReason.CANCEL_REQUESTED
                ctx._cancel(CancelReason.CANCEL_REQUESTED)
                if running.handler is not None and running.handler.is_async and running.task:
                    assert self._loop is not None
                    running.timers.append(
                        self._loop.call_later(self._cancel_grace, running.task.cancel)
                    )


def channel_config_of(worker: Worker) -> ChannelConfig:
    """How ``worker`` connects, for an :class:`~worker_sdk.InlineRunner` sharing it."""
    return worker._channel_config


def handler_of(worker: Worker, job_type: str) -> HandlerSpec | None:
    """The handler ``worker`` has registered for ``job_type``, if any."""
    return worker._handlers.get(job_type)
