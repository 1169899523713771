"""Worker protocol tests against a scripted coordinator on a real loopback gRPC server.

The scripted coordinator implements ``WorkerService`` just far enough to check the
worker's side of the contract: credit accounting, batched outcome reports,
heartbeat answers, drain, Release on shutdown and reconnects. Tests wait on
events with timeouts; nothing sleeps to make time pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest

from worker_sdk import (
    CancelReason,
    JobContext,
    NonRetryableError,
    RetryAfter,
    UnauthenticatedError,
    Worker,
    current_job,
    encode_payload,
)
from workflowjobs.v1 import job_pb2, worker_service_pb2, worker_service_pb2_grpc

WAIT = 10.0


@dataclasses.dataclass
class Connection:
    hello: worker_service_pb2.WorkerHello
    credit: int = 0
    granted: list[int] = dataclasses.field(default_factory=list)
    pushed: int = 0
    max_outstanding: int = 0
    wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    closed: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    drain: bool = False


class ScriptedCoordinator(worker_service_pb2_grpc.WorkerServiceServicer):
    """A WorkerService double: pushes queued jobs within credit and records everything."""

    def __init__(self, *, heartbeat_interval_ms: int = 50) -> None:
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.connections: list[Connection] = []
        self.queue: list[worker_service_pb2.LeasedJob] = []
        self.outcomes: dict[str, worker_service_pb2.JobOutcome] = {}
        self.report_sizes: list[int] = []
        self.heartbeats: list[worker_service_pb2.HeartbeatRequest] = []
        self.lease_states: dict[str, int] = {}
        self.reject_outcomes: set[str] = set()
        self.fail_next_reports = 0
        self.drain_on_connect = False
        self.changed = asyncio.Event()

    # -- scripting ----------------------------------------------------------------------------

    def push(self, *jobs: worker_service_pb2.LeasedJob) -> list[str]:
        self.queue.extend(jobs)
        for conn in self.connections:
            conn.wake.set()
        return [j.job.id for j in jobs]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = WAIT) -> None:
        async def poll() -> None:
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(poll(), timeout)

    def _notify(self) -> None:
        self.changed.set()

    # -- WorkerService ------------------------------------------------------------------------

    async def AcquireJobs(
        self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[worker_service_pb2.AcquireJobsResponse]:
        requests = request_iterator.__aiter__()
        first = await requests.__anext__()
        assert first.WhichOneof("kind") == "hello"
        conn = Connection(hello=first.hello, drain=self.drain_on_connect)
        self.connections.append(conn)
        reader = asyncio.create_task(self._read_credit(requests, conn))
        self._notify()
        try:
            yield worker_service_pb2.AcquireJobsResponse(
                accepted=worker_service_pb2.WorkerAccepted(
                    coordinator_id="scripted", heartbeat_interval_ms=self.heartbeat_interval_ms
                )
            )
            if conn.drain:
                yield worker_service_pb2.AcquireJobsResponse(
                    drain=worker_service_pb2.DrainRequested(reason="scripted drain")
                )
            while not conn.closed.is_set():
                await conn.wake.wait()
                conn.wake.clear()
                limit = conn.hello.max_batch_size or 100
                while conn.credit > 0 and self.queue:
                    n = min(conn.credit, len(self.queue), limit)
                    batch, self.queue[:n] = self.queue[:n], []
                    conn.credit -= n
                    conn.pushed += n
                    yield worker_service_pb2.AcquireJobsResponse(
                        jobs=worker_service_pb2.JobBatch(jobs=batch)
                    )
                    self._notify()
        finally:
            reader.cancel()

    async def _read_credit(self, requests: AsyncIterator[Any], conn: Connection) -> None:
        try:
            async for request in requests:
                assert request.WhichOneof("kind") == "credit"
                assert request.credit.credits > 0
                conn.credit += request.credit.credits
                conn.granted.append(request.credit.credits)
                conn.max_outstanding = max(conn.max_outstanding, conn.credit)
                conn.wake.set()
                self._notify()
        finally:
            conn.closed.set()
            conn.wake.set()
            self._notify()

    async def Heartbeat(
        self, request: worker_service_pb2.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> worker_service_pb2.HeartbeatResponse:
        self.heartbeats.append(request)
        expire = datetime.now(UTC) + timedelta(seconds=30)
        statuses = []
        for lease in request.leases:
            status = worker_service_pb2.LeaseStatus(
                job_id=lease.job_id,
                state=self.lease_states.get(lease.job_id, worker_service_pb2.LEASE_STATE_EXTENDED),
            )
            status.lease_expire_time.FromDatetime(expire)
            statuses.append(status)
        self._notify()
        return worker_service_pb2.HeartbeatResponse(leases=statuses)

    async def ReportOutcomes(
        self, request: worker_service_pb2.ReportOutcomesRequest, context: grpc.aio.ServicerContext
    ) -> worker_service_pb2.ReportOutcomesResponse:
        if self.fail_next_reports > 0:
            self.fail_next_reports -= 1
            self._notify()
            await context.abort(grpc.StatusCode.UNAVAILABLE, "scripted outage")
        self.report_sizes.append(len(request.outcomes))
        results = []
        for outcome in request.outcomes:
            if outcome.job_id in self.reject_outcomes:
                results.append(
                    worker_service_pb2.OutcomeResult(
                        job_id=outcome.job_id,
                        accepted=False,
                        error_code="FAILED_PRECONDITION",
                        error_message="lease lost",
                    )
                )
                continue
            self.outcomes[outcome.job_id] = outcome
            results.append(worker_service_pb2.OutcomeResult(job_id=outcome.job_id, accepted=True))
        self._notify()
        return worker_service_pb2.ReportOutcomesResponse(results=results)


def leased(job_type: str, payload: Any = None, **job_fields: Any) -> worker_service_pb2.LeasedJob:
    job = job_pb2.Job(
        id=str(uuid.uuid4()),
        job_type=job_type,
        tenant_id="t1",
        attempt=1,
        max_attempts=3,
        status=job_pb2.JOB_STATUS_RUNNING,
        payload=encode_payload(payload),
        **job_fields,
    )
    lease = worker_service_pb2.LeasedJob(job=job, lease_token=uuid.uuid4().hex)
    lease.lease_expire_time.FromDatetime(datetime.now(UTC) + timedelta(seconds=30))
    return lease


async def start_server(servicer: ScriptedCoordinator, port: int = 0) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    worker_service_pb2_grpc.add_WorkerServiceServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, bound


@contextlib.asynccontextmanager
async def running(
    worker: Worker, coordinator: ScriptedCoordinator
) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(worker.arun())
    try:
        await coordinator.wait_for(lambda: bool(coordinator.connections))
        yield task
    finally:
        await asyncio.wait_for(worker.shutdown(), WAIT)
        await asyncio.wait_for(task, WAIT)


def make_worker(port: int, **options: Any) -> Worker:
    options.setdefault("shutdown_grace", 2.0)
    options.setdefault("reconnect_initial_backoff", 0.02)
    options.setdefault("reconnect_max_backoff", 0.2)
    return Worker(f"127.0.0.1:{port}", **options)


@dataclasses.dataclass
class Greeting:
    name: str
    times: int = 1


def test_runs_pushed_jobs_within_credit_and_reports_in_batches() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=20, max_batch_size=10)
        active = 0
        peak = 0

        @worker.handler("greet")
        async def greet(greeting: Greeting) -> str:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0)
            active -= 1
            return f"hello {greeting.name}" * greeting.times

        try:
            async with running(worker, coordinator):
                conn = coordinator.connections[0]
                assert conn.hello.job_types == ["greet"]
                assert conn.hello.slots == 20
                assert conn.hello.max_batch_size == 10
                assert conn.hello.worker_id == worker.worker_id
                ids = coordinator.push(*(leased("greet", Greeting(f"n{i}")) for i in range(500)))
                await coordinator.wait_for(lambda: len(coordinator.outcomes) == 500)
        finally:
            await server.stop(None)

        assert peak <= 20
        assert conn.max_outstanding <= 20
        assert conn.granted[0] == 20
        assert conn.pushed == 500
        results = [coordinator.outcomes[i].completed.result for i in ids]
        assert results[7].data == b'"hello n7"'
        assert all(r.content_type == "application/json" for r in results)
        assert len(coordinator.report_sizes) < 500
        assert sum(coordinator.report_sizes) == 500

    asyncio.run(main())


def test_credit_waits_while_the_coordinator_holds_plenty_and_goes_out_when_it_runs_low() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=8)  # grants coalesce at 2 free slots
        release = asyncio.Event()

        @worker.handler("hold")
        async def hold(wait: bool) -> None:
            if wait:
                await release.wait()

        try:
            async with running(worker, coordinator):
                conn = coordinator.connections[0]
                await coordinator.wait_for(lambda: conn.granted == [8])
                # One quick job: its slot frees while the coordinator still
                # holds 7 credits, so no grant follows.
                [quick] = coordinator.push(leased("hold", False))
                await coordinator.wait_for(lambda: quick in coordinator.outcomes)
                await asyncio.sleep(0.05)  # longer than any coalescing timer
                assert conn.granted == [8]
                # Six held jobs leave the coordinator 1 credit: the free slot goes out.
                coordinator.push(*(leased("hold", True) for _ in range(6)))
                await coordinator.wait_for(lambda: len(conn.granted) == 2)
                assert conn.granted == [8, 1]
                release.set()
                await coordinator.wait_for(lambda: len(coordinator.outcomes) == 7)
        finally:
            release.set()
            await server.stop(None)

    asyncio.run(main())


def test_failures_become_typed_failure_outcomes() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=8)
        retry_at = datetime(2031, 1, 1, tzinfo=UTC)

        @worker.handler("boom")
        async def boom(payload: dict) -> None:
            raise ValueError(f"bad value {payload['v']}")

        @worker.handler("permanent")
        def permanent(payload: dict) -> None:
            raise NonRetryableError("card declined", kind="CardDeclined")

        @worker.handler("later")
        async def later() -> None:
            raise RetryAfter(at=retry_at)

        @worker.handler("typed")
        def typed(greeting: Greeting) -> str:
            return greeting.name

        @worker.handler("whoami")
        def whoami(payload: Any) -> dict:
            ctx = current_job()
            return {"id": ctx.job_id, "thread": threading.current_thread().name}

        try:
            async with running(worker, coordinator):
                boom_id, perm_id, later_id, typed_id, who_id = coordinator.push(
                    leased("boom", {"v": 3}),
                    leased("permanent", {}),
                    leased("later"),
                    leased("typed", {"times": 2}),
                    leased("whoami", None),
                )
                await coordinator.wait_for(lambda: len(coordinator.outcomes) == 5)
        finally:
            await server.stop(None)

        boom_failure = coordinator.outcomes[boom_id].failed
        assert boom_failure.error == "ValueError: bad value 3"
        assert boom_failure.error_kind == "ValueError"
        assert not boom_failure.non_retryable
        perm_failure = coordinator.outcomes[perm_id].failed
        assert perm_failure.non_retryable
        assert perm_failure.error_kind == "CardDeclined"
        assert perm_failure.error == "NonRetryableError: card declined"
        later_failure = coordinator.outcomes[later_id].failed
        assert later_failure.error_kind == "RetryAfter"
        assert later_failure.retry_time.ToDatetime(tzinfo=UTC) == retry_at
        typed_failure = coordinator.outcomes[typed_id].failed
        assert typed_failure.non_retryable
        assert typed_failure.error_kind == "PayloadDecodeError"
        assert "missing required field(s) name" in typed_failure.error
        who = coordinator.outcomes[who_id].completed.result
        assert who.data.startswith(f'{{"id":"{who_id}"'.encode())
        assert b"worker-sdk-handler" in who.data

    asyncio.run(main())


def test_shutdown_releases_jobs_still_running_after_grace() -> None:
    """An async handler is cancelled at the end of the grace and its job handed
    back; a blocking one cannot be stopped, so under ``arun`` its job stays
    leased and heartbeated until it returns, and what it returned is reported."""

    async def main() -> None:
        coordinator = ScriptedCoordinator()
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=4, shutdown_grace=0.1)
        started = asyncio.Event()
        blocker = threading.Event()
        seen_reasons: list[str | None] = []

        @worker.handler("stuck_async")
        async def stuck_async(ctx: JobContext) -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                seen_reasons.append(ctx.cancel_reason)

        @worker.handler("stuck_sync")
        def stuck_sync(ctx: JobContext) -> str:
            blocker.wait(WAIT)
            return f"returned after {ctx.cancel_reason}"

        try:
            task = asyncio.create_task(worker.arun())
            await coordinator.wait_for(lambda: bool(coordinator.connections))
            async_id, sync_id = coordinator.push(leased("stuck_async"), leased("stuck_sync"))
            await asyncio.wait_for(started.wait(), WAIT)
            await coordinator.wait_for(lambda: worker.in_flight == 2)
            stopping = asyncio.gather(worker.shutdown(), worker.shutdown())
            await coordinator.wait_for(lambda: async_id in coordinator.outcomes)
            # The blocking handler still runs: its lease goes on being heartbeated.
            beats = len(coordinator.heartbeats)
            await coordinator.wait_for(
                lambda: any(
                    lease.job_id == sync_id
                    for beat in coordinator.heartbeats[beats:]
                    for lease in beat.leases
                )
            )
            assert sync_id not in coordinator.outcomes
            assert not stopping.done()
            blocker.set()
            await asyncio.wait_for(stopping, WAIT)
            await asyncio.wait_for(task, WAIT)
            await worker.shutdown()
        finally:
            blocker.set()
            await server.stop(None)

        released = coordinator.outcomes[async_id]
        assert released.WhichOneof("outcome") == "released"
        assert released.released.reason == CancelReason.WORKER_SHUTDOWN
        assert seen_reasons == [CancelReason.WORKER_SHUTDOWN]
        completed = coordinator.outcomes[sync_id]
        assert completed.WhichOneof("outcome") == "completed"
        assert completed.completed.result.data == b'"returned after worker shutting down"'
        assert coordinator.connections[0].closed.is_set()

    asyncio.run(main())


def test_a_blocking_handler_that_raises_once_stopped_hands_its_job_back() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=1, shutdown_grace=0.1)
        started = threading.Event()

        @worker.handler("polite_sync")
        def polite_sync(ctx: JobContext) -> None:
            started.set()
            ctx.cancelled.wait_blocking(WAIT)
            raise RuntimeError(f"stopped: {ctx.cancel_reason}")

        try:
            task = asyncio.create_task(worker.arun())
            await coordinator.wait_for(lambda: bool(coordinator.connections))
            (job_id,) = coordinator.push(leased("polite_sync"))
            await asyncio.get_running_loop().run_in_executor(None, started.wait, WAIT)
            await asyncio.wait_for(worker.shutdown(), WAIT)
            await asyncio.wait_for(task, WAIT)
        finally:
            await server.stop(None)

        outcome = coordinator.outcomes[job_id]
        assert outcome.WhichOneof("outcome") == "released", outcome

    asyncio.run(main())


def test_shutdown_waits_for_running_jobs_to_finish() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=2, shutdown_grace=WAIT)
        started = asyncio.Event()
        finish = asyncio.Event()

        @worker.handler("slow")
        async def slow() -> str:
            started.set()
            await finish.wait()
            return "done"

        try:
            task = asyncio.create_task(worker.arun())
            await coordinator.wait_for(lambda: bool(coordinator.connections))
            (job_id,) = coordinator.push(leased("slow"))
            await asyncio.wait_for(started.wait(), WAIT)
            stopping = asyncio.create_task(worker.shutdown())
            conn = coordinator.connections[0]
            await asyncio.wait_for(conn.closed.wait(), WAIT)
            assert not stopping.done()
            finish.set()
            await asyncio.wait_for(stopping, WAIT)
            await asyncio.wait_for(task, WAIT)
        finally:
            await server.stop(None)

        assert coordinator.outcomes[job_id].completed.result.data == b'"done"'

    asyncio.run(main())


def test_handlers_learn_the_worker_is_stopping_during_the_grace() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=2, shutdown_grace=WAIT)
        started = asyncio.Event()
        seen: list[tuple[bool, bool, str | None]] = []

        @worker.handler("long")
        async def long(ctx: JobContext) -> str:
            started.set()
            assert not ctx.is_stopping()
            await ctx.stopping.wait()
            seen.append((ctx.is_stopping(), ctx.is_cancelled(), ctx.stopping.reason))
            return "checkpointed"

        try:
            task = asyncio.create_task(worker.arun())
            await coordinator.wait_for(lambda: bool(coordinator.connections))
            (job_id,) = coordinator.push(leased("long"))
            await asyncio.wait_for(started.wait(), WAIT)
            await asyncio.wait_for(worker.shutdown(), WAIT)
            await asyncio.wait_for(task, WAIT)
        finally:
            await server.stop(None)

        # Told at the start of the drain, not cancelled; its outcome is reported.
        assert seen == [(True, False, CancelReason.WORKER_SHUTDOWN)]
        assert coordinator.outcomes[job_id].completed.result.data == b'"checkpointed"'

    asyncio.run(main())


def test_heartbeats_carry_leases_and_deliver_cancel_and_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)

    async def main() -> None:
        coordinator = ScriptedCoordinator(heartbeat_interval_ms=20)
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=4, cancel_grace=WAIT)
        lost_contexts: list[JobContext] = []

        @worker.handler("cancellable")
        async def cancellable(ctx: JobContext) -> str | None:
            await ctx.cancelled.wait()
            return ctx.cancel_reason

        @worker.handler("blocking_cancellable")
        def blocking_cancellable(ctx: JobContext) -> bool:
            return ctx.cancelled.wait_blocking(WAIT)

        @worker.handler("loses_lease")
        async def loses_lease(ctx: JobContext) -> str:
            lost_contexts.append(ctx)
            await ctx.cancelled.wait()
            return "finished anyway"

        try:
            async with running(worker, coordinator):
                cancel_id, blocking_id, lost_id = coordinator.push(
                    leased("cancellable"), leased("blocking_cancellable"), leased("loses_lease")
                )
                await coordinator.wait_for(
                    lambda: any(len(h.leases) == 3 for h in coordinator.heartbeats)
                )
                beat = next(h for h in coordinator.heartbeats if len(h.leases) == 3)
                assert beat.worker_id == worker.worker_id
                assert {lease.job_id for lease in beat.leases} == {cancel_id, blocking_id, lost_id}
                coordinator.lease_states[cancel_id] = (
                    worker_service_pb2.LEASE_STATE_CANCEL_REQUESTED
                )
                coordinator.lease_states[blocking_id] = (
                    worker_service_pb2.LEASE_STATE_CANCEL_REQUESTED
                )
                coordinator.lease_states[lost_id] = worker_service_pb2.LEASE_STATE_LOST
                await coordinator.wait_for(lambda: len(coordinator.outcomes) == 2)
                await coordinator.wait_for(lambda: worker.in_flight == 0)
        finally:
            await server.stop(None)

        # The results are reported (and kept); the coordinator ends both jobs
        # CANCELLED, and the worker says so.
        assert coordinator.outcomes[cancel_id].completed.result.data == b'"cancel requested"'
        assert coordinator.outcomes[blocking_id].completed.result.data == b"true"
        ended = [r.getMessage() for r in caplog.records if "ends CANCELLED" in r.getMessage()]
        assert len(ended) == 2
        assert lost_id not in coordinator.outcomes
        assert lost_contexts[0].lease_lost
        assert lost_contexts[0].is_cancelled()

    asyncio.run(main())


def test_context_heartbeat_forces_an_early_heartbeat() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator(heartbeat_interval_ms=3_600_000)
        server, port = await start_server(coordinator)
        # The scheduled heartbeat is an hour away: any heartbeat seen within
        # the test's wait is the one the handler asked for.
        worker = make_worker(port, concurrency=1, heartbeat_interval=3600.0)
        release = threading.Event()
        seen_before_asking: list[int] = []
        contexts: list[JobContext] = []

        @worker.handler("progress")
        def progress(ctx: JobContext) -> None:
            contexts.append(ctx)
            seen_before_asking.append(len(coordinator.heartbeats))
            ctx.heartbeat({"step": 1})
            release.wait(WAIT)

        job = leased("progress")
        job.lease_expire_time.FromDatetime(datetime.now(UTC) + timedelta(hours=2))
        try:
            async with running(worker, coordinator):
                [job_id] = coordinator.push(job)
                await coordinator.wait_for(
                    lambda: any(
                        lease.job_id == job_id for h in coordinator.heartbeats for lease in h.leases
                    )
                )
                release.set()
                await coordinator.wait_for(lambda: job_id in coordinator.outcomes)
        finally:
            release.set()
            await server.stop(None)

        assert seen_before_asking == [0]
        [beat] = [h for h in coordinator.heartbeats if h.leases]
        assert [(lease.job_id, lease.lease_token) for lease in beat.leases] == [
            (job_id, job.lease_token)
        ]
        assert contexts[0].heartbeat_details == {"step": 1}

    asyncio.run(main())


def test_outcome_reports_are_retried_after_transport_failure() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        coordinator.fail_next_reports = 2
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=4)

        @worker.handler("echo")
        async def echo(payload: Any) -> Any:
            return payload

        try:
            async with running(worker, coordinator):
                (job_id,) = coordinator.push(leased("echo", [1, 2]))
                await coordinator.wait_for(lambda: job_id in coordinator.outcomes)
        finally:
            await server.stop(None)

        assert coordinator.fail_next_reports == 0
        assert coordinator.outcomes[job_id].completed.result.data == b"[1,2]"

    asyncio.run(main())


def test_rejected_outcome_is_logged_as_lease_lost(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=4)

        @worker.handler("echo")
        async def echo(payload: Any) -> Any:
            return payload

        try:
            async with running(worker, coordinator):
                rejected = leased("echo", 1)
                coordinator.reject_outcomes.add(rejected.job.id)
                (ok_id,) = coordinator.push(rejected, leased("echo", 2))[1:]
                await coordinator.wait_for(lambda: ok_id in coordinator.outcomes)
                await coordinator.wait_for(lambda: sum(coordinator.report_sizes) == 2)
        finally:
            await server.stop(None)
        return rejected.job.id

    with caplog.at_level(logging.WARNING, logger="worker_sdk"):
        rejected_id = asyncio.run(main())

    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(rejected_id in m and "lease lost" in m for m in messages)


def test_reconnects_after_the_coordinator_restarts() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=3)
        started = asyncio.Event()
        finish = asyncio.Event()

        @worker.handler("echo")
        async def echo(payload: Any) -> Any:
            return payload

        @worker.handler("long")
        async def long() -> str:
            started.set()
            await finish.wait()
            return "survived"

        try:
            async with running(worker, coordinator):
                (long_id,) = coordinator.push(leased("long"))
                await asyncio.wait_for(started.wait(), WAIT)
                await server.stop(None)
                server, _ = await start_server(coordinator, port)
                await coordinator.wait_for(lambda: len(coordinator.connections) == 2)
                second = coordinator.connections[1]
                await coordinator.wait_for(lambda: sum(second.granted) == 2)
                (echo_id,) = coordinator.push(leased("echo", "after restart"))
                await coordinator.wait_for(lambda: echo_id in coordinator.outcomes)
                finish.set()
                await coordinator.wait_for(lambda: long_id in coordinator.outcomes)
        finally:
            await server.stop(None)

        assert coordinator.connections[1].hello.worker_id == worker.worker_id
        assert coordinator.outcomes[long_id].completed.result.data == b'"survived"'
        assert coordinator.outcomes[echo_id].completed.result.data == b'"after restart"'

    asyncio.run(main())


def test_drain_request_stops_credit_grants() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        coordinator.drain_on_connect = True
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=2)

        @worker.handler("echo")
        async def echo(payload: Any) -> Any:
            return payload

        try:
            async with running(worker, coordinator):
                ids = coordinator.push(leased("echo", 1), leased("echo", 2), leased("echo", 3))
                await coordinator.wait_for(lambda: len(coordinator.outcomes) == 2)
                await coordinator.wait_for(lambda: worker.in_flight == 0)
        finally:
            await server.stop(None)

        conn = coordinator.connections[0]
        assert conn.closed.is_set()
        assert sum(conn.granted) == 2
        assert ids[2] not in coordinator.outcomes

    asyncio.run(main())


def test_rejected_credentials_stop_the_worker_with_a_typed_error() -> None:
    class Unauthenticated(ScriptedCoordinator):
        async def AcquireJobs(self, request_iterator: Any, context: Any) -> Any:  # type: ignore[override]
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid token")
            yield  # pragma: no cover

    async def main() -> None:
        server, port = await start_server(Unauthenticated())
        worker = make_worker(port, concurrency=1, token="wrong")

        @worker.handler("echo")
        async def echo(payload: Any) -> Any:
            return payload

        try:
            with pytest.raises(UnauthenticatedError, match="invalid token"):
                await asyncio.wait_for(worker.arun(), WAIT)
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_shutdown_before_start_is_a_no_op() -> None:
    async def main() -> None:
        worker = Worker("127.0.0.1:1")

        @worker.handler("echo")
        async def echo(payload: Any) -> Any:
            return payload

        await worker.shutdown()
        await worker.shutdown()
        await asyncio.wait_for(worker.arun(), WAIT)

    asyncio.run(main())


def test_registration_errors() -> None:
    worker = Worker()

    @worker.handler("a")
    def a(payload: Any) -> None:
        pass

    with pytest.raises(ValueError, match="already registered"):
        worker.register("a", a)
    with pytest.raises(TypeError, match="has no default"):
        worker.register("b", lambda x, y: None)
    with pytest.raises(ValueError, match="register at least one handler"):
        asyncio.run(Worker().arun())
    partial = Worker(job_types=["a", "missing"])
    partial.register("a", a)
    with pytest.raises(ValueError, match="no handler registered for job type.*missing"):
        asyncio.run(partial.arun())


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals need main thread"
)
def test_sigterm_drains_running_jobs_then_stops() -> None:
    async def main() -> None:
        coordinator = ScriptedCoordinator()
        server, port = await start_server(coordinator)
        worker = make_worker(port, concurrency=2, shutdown_grace=WAIT)
        started = asyncio.Event()
        finish = asyncio.Event()

        @worker.handler("slow")
        async def slow() -> str:
            started.set()
            await finish.wait()
            return "finished"

        try:
            task = asyncio.create_task(worker._run_with_signals())
            await coordinator.wait_for(lambda: bool(coordinator.connections))
            (job_id,) = coordinator.push(leased("slow"))
            await asyncio.wait_for(started.wait(), WAIT)
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(coordinator.connections[0].closed.wait(), WAIT)
            assert not task.done()
            finish.set()
            await asyncio.wait_for(task, WAIT)
        finally:
            await server.stop(None)

        assert coordinator.outcomes[job_id].completed.result.data == b'"finished"'

    asyncio.run(main())
