"""The conformance kit's machinery: a real coordinator, the worker under test
as a process, stubs of the public API, and a recording proxy between the two.

Nothing here knows the SDK under test: it is a command line (the contract in
README.md) started with ``--target``, ``--worker-id``, ``--concurrency``,
``--shutdown-grace`` and ``--record``, its bearer token in ``WFJOBS_TOKEN``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from faults.harness import CoordinatorProcess, free_port
from google.protobuf import duration_pb2

from wfj_testing import ManagedProcess, wait_until
from workflowjobs.v1 import (
    admin_service_pb2 as apb,
)
from workflowjobs.v1 import (
    admin_service_pb2_grpc as apb_grpc,
)
from workflowjobs.v1 import (
    job_pb2,
    scheduler_service_pb2,
    scheduler_service_pb2_grpc,
    worker_service_pb2,
)

REPO = Path(__file__).resolve().parents[2]
TENANT = "conformance"


# A coordinator on a fixed loopback port, so it can be killed and restarted in place.
Coordinator = CoordinatorProcess


@dataclass(frozen=True)
class Sdk:
    """How to start an SDK's conformance worker: its command, before the contract's options."""

    name: str
    command: Sequence[str]


class WorkerUnderTest(ManagedProcess):
    """The SDK's conformance worker in a process; its handlers append to ``record``."""

    def __init__(
        self,
        sdk: Sdk,
        target: str,
        tmp: Path,
        *,
        worker_id: str,
        concurrency: int = 4,
        shutdown_grace: float = 5.0,
        token: str | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.record = tmp / f"record-{worker_id}.txt"
        command = [
            *sdk.command,
            "--target",
            target,
            "--worker-id",
            worker_id,
            "--concurrency",
            str(concurrency),
            "--shutdown-grace",
            str(shutdown_grace),
            "--record",
            str(self.record),
        ]
        env = {"WFJOBS_TOKEN": token} if token else None
        self._spawn(
            command, tmp / f"{worker_id}.log", env, without=() if token else ("WFJOBS_TOKEN",)
        )

    def records(self) -> list[tuple[str, str, int, int]]:
        """``(event, job id, attempt, epoch ms)`` lines the handlers wrote."""
        if not self.record.exists():
            return []
        rows = []
        for line in self.record.read_text().splitlines():
            event, job_id, attempt, at = line.split()
            rows.append((event, job_id, int(attempt), int(at)))
        return rows

    def wait_connected(self, timeout: float = 30) -> None:
        def connected() -> bool:
            if not self.alive():
                raise AssertionError(f"the worker exited: {self.log()[-3000:]}")
            return "connected to coordinator" in self.log()

        wait_until(connected, timeout, f"worker {self.worker_id} to connect (log: {self.log_path})")


class Api:
    """The public API as a test drives it: scheduler and admin stubs."""

    def __init__(self, target: str, token: str | None = None) -> None:
        self.channel = grpc.insecure_channel(
            target, options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        )
        self.scheduler = scheduler_service_pb2_grpc.JobSchedulerServiceStub(self.channel)
        self.admin = apb_grpc.AdminServiceStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.enqueued: list[str] = []

    def cancel_unfinished(self) -> None:
        """Cancel every job this client enqueued that has not finished (a shared
        coordinator's next scenario must not receive it)."""
        for job_id in self.enqueued:
            try:
                if self.job(job_id).status in (
                    job_pb2.JOB_STATUS_PENDING,
                    job_pb2.JOB_STATUS_RUNNING,
                ):
                    self.cancel(job_id)
            except grpc.RpcError:
                pass

    def close(self) -> None:
        self.channel.close()

    def enqueue(
        self,
        job_type: str,
        payload: Any = None,
        *,
        tenant: str = TENANT,
        max_attempts: int = 3,
        lease_s: float | None = None,
        execution_timeout_s: float | None = None,
        traceparent: str = "",
    ) -> str:
        spec = job_pb2.JobSpec(
            job_type=job_type,
            tenant_id=tenant,
            payload=job_pb2.Payload(
                data=json.dumps(payload if payload is not None else {}).encode(),
                content_type="application/json",
            ),
            retry_policy=job_pb2.RetryPolicy(
                max_attempts=max_attempts,
                initial_backoff=duration_pb2.Duration(nanos=50_000_000),
                max_backoff=duration_pb2.Duration(nanos=200_000_000),
            ),
            traceparent=traceparent,
        )
        if lease_s is not None:
            spec.heartbeat_timeout.FromMilliseconds(int(lease_s * 1000))
        if execution_timeout_s is not None:
            spec.execution_timeout.FromMilliseconds(int(execution_timeout_s * 1000))
        response = self.retrying(
            lambda: self.scheduler.Enqueue(
                scheduler_service_pb2.EnqueueRequest(job=spec), metadata=self.metadata, timeout=10
            )
        )
        self.enqueued.append(response.job.id)
        return str(response.job.id)

    def job(self, job_id: str) -> job_pb2.Job:
        request = scheduler_service_pb2.GetJobRequest(job_id=job_id, include_attempts=True)
        response = self.retrying(
            lambda: self.scheduler.GetJob(request, metadata=self.metadata, timeout=10)
        )
        return response.job

    def wait(self, job_id: str, timeout: float = 60) -> job_pb2.Job:
        """The job once finished (COMPLETED, FAULTED or CANCELLED)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.scheduler.WaitForJob(
                    scheduler_service_pb2.WaitForJobRequest(job_id=job_id),
                    metadata=self.metadata,
                    timeout=max(0.1, min(5.0, deadline - time.monotonic())),
                )
                return self.job(job_id)
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
                    raise
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"job {job_id} did not finish in {timeout}s: {self.job(job_id)}"
                )

    def wait_status(self, job_id: str, status: int, timeout: float = 30) -> job_pb2.Job:
        return wait_until(  # type: ignore[no-any-return]
            lambda: (j := self.job(job_id)).status == status and j,
            timeout,
            f"job {job_id} to reach {job_pb2.JobStatus.Name(status)}",
        )

    def cancel(self, job_id: str) -> None:
        self.admin.CancelJob(
            apb.CancelJobRequest(job_id=job_id), metadata=self.metadata, timeout=10
        )

    def unlock(self, job_id: str) -> None:
        self.admin.UnlockJob(
            apb.UnlockJobRequest(job_id=job_id), metadata=self.metadata, timeout=10
        )

    def drain_worker(self, worker_id: str, *, undrain: bool = False) -> None:
        if undrain:
            self.admin.Undrain(
                apb.UndrainRequest(worker_id=worker_id), metadata=self.metadata, timeout=10
            )
        else:
            self.admin.Drain(
                apb.DrainRequest(worker_id=worker_id), metadata=self.metadata, timeout=10
            )

    def workers(self) -> list[apb.WorkerInfo]:
        response = self.admin.ListWorkers(
            apb.ListWorkersRequest(), metadata=self.metadata, timeout=10
        )
        return list(response.workers)

    def events(self, job_id: str) -> list[scheduler_service_pb2.JobEvent]:
        """Every event of one job so far (the history part of WatchJobEvents)."""
        request = scheduler_service_pb2.WatchJobEventsRequest(
            filter=scheduler_service_pb2.JobEventFilter(job_id=job_id), from_oldest=True
        )
        call = self.scheduler.WatchJobEvents(request, metadata=self.metadata, timeout=3)
        events: list[scheduler_service_pb2.JobEvent] = []
        try:
            for response in call:
                if not response.events and events:
                    break
                events.extend(response.events)
                if events and events[-1].kind in (
                    scheduler_service_pb2.JOB_EVENT_KIND_COMPLETED,
                    scheduler_service_pb2.JOB_EVENT_KIND_FAULTED,
                    scheduler_service_pb2.JOB_EVENT_KIND_CANCELLED,
                ):
                    break
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
        finally:
            call.cancel()
        return events

    @staticmethod
    def retrying(call: Callable[[], Any], timeout: float = 30) -> Any:
        """``call()``, again while the coordinator is unreachable (it may be restarting)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return call()
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def result(job: job_pb2.Job) -> Any:
    return json.loads(job.result.data) if job.result.data else None


def outcomes(job: job_pb2.Job) -> list[str]:
    """The job's attempt history as outcome names: ``["FAILED", "COMPLETED"]``."""
    return [
        job_pb2.AttemptOutcome.Name(a.outcome).removeprefix("ATTEMPT_OUTCOME_")
        for a in job.attempts
    ]


def max_overlap(intervals: Iterable[tuple[int, int]]) -> int:
    """The most intervals open at one instant (an end at t closes before a start at t)."""
    spans = list(intervals)
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    best = now = 0
    for _, step in points:
        now += step
        best = max(best, now)
    return best


# -- the recording proxy ------------------------------------------------------------------------


@dataclass
class StreamView:
    """What one AcquireJobs stream carried, as the coordinator received and sent it."""

    granted: int = 0
    pushed: int = 0
    # Credit the coordinator held (granted - pushed) after each grant it received.
    outstanding_after_grant: list[int] = field(default_factory=list)
    # Jobs pushed beyond the credit granted so far (must stay 0).
    over_pushed: int = 0
    outcome_batches: int = 0
    # ("grant", n) / ("push", n) in the order the proxy saw them, for failure messages.
    timeline: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class ProxyLog:
    streams: list[StreamView] = field(default_factory=list)
    # (job id, lease token) of every outcome the worker sent, on the stream or by ReportOutcomes.
    outcomes_sent: list[tuple[str, str]] = field(default_factory=list)
    answers_dropped: int = 0
    # Answers to outcomes passed on to the worker (OutcomeAnswers, ReportOutcomes responses).
    answers_forwarded: int = 0
    # Every Heartbeat answered, in the order the answers reached the worker.
    heartbeats: list[HeartbeatSeen] = field(default_factory=list)
    # Set by RecordingProxy.mark(): heartbeats sent from then on are marked.
    marked: bool = False


@dataclass
class HeartbeatSeen:
    """One Heartbeat call as it passed the proxy."""

    # The worker sent it after the test's RecordingProxy.mark().
    sent_after_mark: bool
    # The coordinator's answer per job: LeaseState values (worker_service.proto).
    states: dict[str, int]


_ACQUIRE = "/workflowjobs.v1.WorkerService/AcquireJobs"
_REPORT = "/workflowjobs.v1.WorkerService/ReportOutcomes"
_HEARTBEAT = "/workflowjobs.v1.WorkerService/Heartbeat"
_STREAMING = {
    _ACQUIRE: "stream_stream",
    "/workflowjobs.v1.JobSchedulerService/WatchJobEvents": "unary_stream",
}


class RecordingProxy:
    """A gRPC proxy between the worker and the coordinator that records the
    AcquireJobs stream and can drop the first OutcomeAnswers carrying an
    accepted outcome (the stream then breaks, as a dropped connection would).

    Messages pass as bytes; only AcquireJobs and ReportOutcomes are parsed.
    """

    def __init__(self, upstream: str, *, drop_first_answer: bool = False) -> None:
        self.upstream = upstream
        self.drop_first_answer = drop_first_answer
        self.log = ProxyLog()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise AssertionError("the proxy did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        options = [
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ]
        self._channel = grpc.aio.insecure_channel(self.upstream, options=options)
        self._server = grpc.aio.server(options=options)
        self._server.add_generic_rpc_handlers([_Handler(self)])
        self._server.add_insecure_port(self.target)
        await self._server.start()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await self._server.stop(0)
        await self._channel.close()

    def mark(self) -> None:
        """Mark every Heartbeat the worker sends from now on (HeartbeatSeen)."""
        with self._lock:
            self.log.marked = True

    def _record_heartbeat(self, sent_after_mark: bool, answer: bytes) -> None:
        message = worker_service_pb2.HeartbeatResponse.FromString(answer)
        seen = HeartbeatSeen(sent_after_mark, {s.job_id: s.state for s in message.leases})
        with self._lock:
            self.log.heartbeats.append(seen)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _record_request(self, view: StreamView, data: bytes) -> None:
        message = worker_service_pb2.AcquireJobsRequest.FromString(data)
        kind = message.WhichOneof("kind")
        with self._lock:
            if kind == "credit":
                view.timeline.append(("grant", message.credit.credits))
                view.granted += message.credit.credits
                view.outstanding_after_grant.append(view.granted - view.pushed)
            elif kind == "outcomes":
                view.outcome_batches += 1
                view.timeline.append(("outcomes+grant", message.outcomes.credits))
                view.granted += message.outcomes.credits
                if message.outcomes.credits:
                    view.outstanding_after_grant.append(view.granted - view.pushed)
                self.log.outcomes_sent.extend(
                    (o.job_id, o.lease_token) for o in message.outcomes.outcomes
                )

    def _filter_response(self, view: StreamView, data: bytes) -> bool:
        """Record one coordinator message; False to drop it (and break the stream)."""
        message = worker_service_pb2.AcquireJobsResponse.FromString(data)
        kind = message.WhichOneof("kind")
        with self._lock:
            if kind == "drain":
                view.timeline.append(("drain", 0))
            if kind == "jobs":
                view.timeline.append(("push", len(message.jobs.jobs)))
                view.pushed += len(message.jobs.jobs)
                view.over_pushed = max(view.over_pushed, view.pushed - view.granted)
            elif kind == "outcomes" and self.drop_first_answer and self.log.answers_dropped == 0:
                if any(r.accepted for r in message.outcomes.results):
                    self.log.answers_dropped += 1
                    return False
            if kind == "outcomes":
                self.log.answers_forwarded += 1
        return True


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, proxy: RecordingProxy) -> None:
        self.proxy = proxy

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = details.method
        proxy = self.proxy
        kind = _STREAMING.get(method, "unary_unary")

        def forwarded(context: grpc.aio.ServicerContext) -> list[tuple[str, str]]:
            return [(k, v) for k, v in context.invocation_metadata() if not k.startswith(":")]

        if kind == "unary_unary":

            async def unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
                if method == _REPORT:
                    parsed = worker_service_pb2.ReportOutcomesRequest.FromString(request)
                    with proxy._lock:
                        proxy.log.outcomes_sent.extend(
                            (o.job_id, o.lease_token) for o in parsed.outcomes
                        )
                with proxy._lock:
                    sent_after_mark = proxy.log.marked
                call = proxy._channel.unary_unary(method)
                try:
                    response: bytes = await call(request, metadata=forwarded(context))
                    if method == _REPORT:
                        with proxy._lock:
                            proxy.log.answers_forwarded += 1
                    elif method == _HEARTBEAT:
                        proxy._record_heartbeat(sent_after_mark, response)
                    return response
                except grpc.aio.AioRpcError as e:
                    await context.abort(e.code(), e.details() or "")
                    raise

            return grpc.unary_unary_rpc_method_handler(unary)

        if kind == "unary_stream":

            async def unary_stream(request: bytes, context: grpc.aio.ServicerContext) -> Any:
                call = proxy._channel.unary_stream(method)(request, metadata=forwarded(context))
                try:
                    async for response in call:
                        yield response
                except grpc.aio.AioRpcError as e:
                    await context.abort(e.code(), e.details() or "")

            return grpc.unary_stream_rpc_method_handler(unary_stream)

        async def stream(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            view = StreamView()
            with proxy._lock:
                proxy.log.streams.append(view)
            call = proxy._channel.stream_stream(method)(metadata=forwarded(context))

            async def pump() -> None:
                try:
                    async for request in requests:
                        proxy._record_request(view, request)
                        await call.write(request)
                    await call.done_writing()
                except (grpc.aio.AioRpcError, asyncio.CancelledError):
                    pass

            pumping = asyncio.get_running_loop().create_task(pump())
            try:
                async for response in call:
                    if not proxy._filter_response(view, response):
                        call.cancel()
                        await context.abort(grpc.StatusCode.UNAVAILABLE, "proxy dropped an answer")
                    yield response
            except grpc.aio.AioRpcError as e:
                await context.abort(e.code(), e.details() or "")
            finally:
                pumping.cancel()

        return grpc.stream_stream_rpc_method_handler(stream)


class SilenceableProxy:
    """TCP forwarding to ``upstream`` (``host:port``) on an event loop of its own.

    ``silence()`` makes every connection open at that moment stop forwarding,
    both ways, while its sockets stay open: a path that went silent without a
    reset (no FIN, no RST). Connections opened afterwards forward normally, as
    a fresh path would.
    """

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._silenced: list[asyncio.Event] = []
        self._writers: list[asyncio.StreamWriter] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result(10)
        self.target = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        self.connections = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        self.connections += 1
        silenced = asyncio.Event()
        self._silenced.append(silenced)
        self._writers += [writer, up_writer]
        await asyncio.gather(
            self._pump(reader, up_writer, silenced),
            self._pump(up_reader, writer, silenced),
        )

    @staticmethod
    async def _pump(
        src: asyncio.StreamReader, dst: asyncio.StreamWriter, silenced: asyncio.Event
    ) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await src.read(65536):
                if silenced.is_set():
                    continue  # dropped: the peer hears nothing, and no reset
                dst.write(data)
                await dst.drain()
        if not silenced.is_set():
            dst.close()

    def silence(self) -> int:
        """Silence the connections open now; returns how many."""

        def silence_all() -> int:
            for event in self._silenced:
                event.set()
            return len(self._silenced)

        async def run() -> int:
            return silence_all()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    def close(self) -> None:
        async def shutdown() -> None:
            self._server.close()
            for writer in self._writers:
                writer.close()
            for writer in self._writers:
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
