"""Inline execution against a small fake coordinator on a real loopback server.

The fake keeps jobs in memory and answers Enqueue (plain and inline),
Heartbeat, ReportOutcomes and WaitForJob the way the coordinator does, so these
tests pin the SDK side: what is sent, when, and what the caller gets back.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent import futures
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest

from worker_sdk import (
    AsyncSchedulerClient,
    CancelReason,
    DeadlineExceededError,
    FailedPreconditionError,
    HandOff,
    InlineRunner,
    InlineStatus,
    JobContext,
    JobFailedError,
    JobPausedError,
    JobStatus,
    LeaseLostError,
    SchedulerClient,
    Worker,
    WorkflowRef,
    _tracing,
    aenqueue_and_wait,
    current_job,
    enqueue_and_wait,
)
from worker_sdk.testing import make_job_context
from workflowjobs.v1 import (
    job_pb2,
    scheduler_service_pb2,
    scheduler_service_pb2_grpc,
    worker_service_pb2,
    worker_service_pb2_grpc,
)

WAIT = 10.0
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@dataclasses.dataclass
class Order:
    id: str
    items: int


class FakeCoordinator(
    scheduler_service_pb2_grpc.JobSchedulerServiceServicer,
    worker_service_pb2_grpc.WorkerServiceServicer,
):
    """JobSchedulerService + WorkerService over an in-memory job table."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.jobs: dict[str, job_pb2.Job] = {}
        self.tokens: dict[str, str] = {}
        self.by_key: dict[tuple[str, str], str] = {}
        self.enqueues: list[scheduler_service_pb2.EnqueueRequest] = []
        self.outcomes: list[worker_service_pb2.JobOutcome] = []
        self.heartbeats: list[worker_service_pb2.HeartbeatRequest] = []
        self.paused_types: set[str] = set()
        self.lost: set[str] = set()
        self.unavailable_reports = 0

    def wait_for(self, predicate: Callable[[], Any], what: str = "condition") -> Any:
        with self.lock:
            if not self.lock.wait_for(predicate, WAIT):
                raise AssertionError(f"timed out waiting for {what}")
            return predicate()

    def Enqueue(self, request, context):  # noqa: N802
        with self.lock:
            self.enqueues.append(request)
            spec = request.job
            key = (spec.tenant_id, spec.idempotency_key)
            if spec.idempotency_key and key in self.by_key:
                job = self.jobs[self.by_key[key]]
                return scheduler_service_pb2.EnqueueResponse(job=job, deduplicated=True)
            inline = request.HasField("inline")
            if (
                inline
                and spec.job_type in self.paused_types
                and not request.inline.enqueue_if_paused
            ):
                context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"cannot run inline: paused (job type {spec.job_type}); retry after unpause "
                    "or set enqueue_if_paused to queue it",
                )
            job = job_pb2.Job(
                id=str(uuid.uuid4()),
                job_type=spec.job_type,
                tenant_id=spec.tenant_id,
                workflow=spec.workflow,
                payload=spec.payload,
                category=spec.category,
                priority=spec.priority,
                status=job_pb2.JOB_STATUS_PENDING,
                max_attempts=spec.retry_policy.max_attempts or 3,
                traceparent=spec.traceparent,
                tracestate=spec.tracestate,
                idempotency_key=spec.idempotency_key,
                heartbeat_timeout=spec.heartbeat_timeout,
            )
            response = scheduler_service_pb2.EnqueueResponse(job=job)
            if inline and spec.job_type not in self.paused_types:
                job.status = job_pb2.JOB_STATUS_RUNNING
                job.attempt = 1
                job.lease_owner = request.inline.worker_id
                token = uuid.uuid4().hex
                self.tokens[job.id] = token
                response.job.CopyFrom(job)
                response.lease_token = token
                response.lease_expire_time.FromDatetime(datetime.now(UTC) + timedelta(seconds=30))
            self.jobs[job.id] = job
            if spec.idempotency_key:
                self.by_key[key] = job.id
            self.lock.notify_all()
            return response

    def WaitForJob(self, request, context):  # noqa: N802
        with self.lock:
            finished = (
                job_pb2.JOB_STATUS_COMPLETED,
                job_pb2.JOB_STATUS_FAULTED,
                job_pb2.JOB_STATUS_CANCELLED,
            )
            self.lock.wait_for(lambda: self.jobs[request.job_id].status in finished, 0.2)
            return scheduler_service_pb2.WaitForJobResponse(job=self.jobs[request.job_id])

    def Heartbeat(self, request, context):  # noqa: N802
        with self.lock:
            self.heartbeats.append(request)
            answers = []
            for lease in request.leases:
                job = self.jobs.get(lease.job_id)
                state = worker_service_pb2.LEASE_STATE_EXTENDED
                if (
                    job is None
                    or lease.job_id in self.lost
                    or self.tokens.get(lease.job_id) != lease.lease_token
                ):
                    state = worker_service_pb2.LEASE_STATE_LOST
                elif job.cancel_requested:
                    state = worker_service_pb2.LEASE_STATE_CANCEL_REQUESTED
                status = worker_service_pb2.LeaseStatus(job_id=lease.job_id, state=state)
                status.lease_expire_time.FromDatetime(datetime.now(UTC) + timedelta(seconds=30))
                answers.append(status)
            self.lock.notify_all()
            return worker_service_pb2.HeartbeatResponse(leases=answers)

    def ReportOutcomes(self, request, context):  # noqa: N802
        with self.lock:
            if self.unavailable_reports > 0:
                self.unavailable_reports -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "coordinator restarting")
            results = []
            for outcome in request.outcomes:
                job = self.jobs.get(outcome.job_id)
                if job is None or self.tokens.get(outcome.job_id) != outcome.lease_token:
                    results.append(
                        worker_service_pb2.OutcomeResult(
                            job_id=outcome.job_id,
                            error_code="FAILED_PRECONDITION",
                            error_message=f"lease lost for job {outcome.job_id}",
                        )
                    )
                    continue
                self.outcomes.append(outcome)
                del self.tokens[outcome.job_id]
                kind = outcome.WhichOneof("outcome")
                if kind == "completed":
                    # As the coordinator: a requested cancel wins over the outcome.
                    job.status = (
                        job_pb2.JOB_STATUS_CANCELLED
                        if job.cancel_requested
                        else job_pb2.JOB_STATUS_COMPLETED
                    )
                    job.result.CopyFrom(outcome.completed.result)
                elif job.cancel_requested:
                    job.status = job_pb2.JOB_STATUS_CANCELLED
                elif kind == "released":
                    job.status = job_pb2.JOB_STATUS_PENDING
                    if outcome.released.HasField("payload"):
                        job.payload.CopyFrom(outcome.released.payload)
                else:
                    job.last_error = outcome.failed.error
                    job.status = (
                        job_pb2.JOB_STATUS_FAULTED
                        if outcome.failed.non_retryable
                        else job_pb2.JOB_STATUS_PENDING
                    )
                results.append(
                    worker_service_pb2.OutcomeResult(
                        job_id=job.id, accepted=True, status=job.status
                    )
                )
            self.lock.notify_all()
            return worker_service_pb2.ReportOutcomesResponse(results=results)

    def outcome_of(self, job_id: str) -> worker_service_pb2.JobOutcome:
        return self.wait_for(
            lambda: next((o for o in self.outcomes if o.job_id == job_id), None),
            f"the outcome of {job_id}",
        )


@pytest.fixture
def fake() -> Iterator[tuple[FakeCoordinator, str]]:
    coordinator = FakeCoordinator()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    scheduler_service_pb2_grpc.add_JobSchedulerServiceServicer_to_server(coordinator, server)
    worker_service_pb2_grpc.add_WorkerServiceServicer_to_server(coordinator, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield coordinator, f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def runner_for(target: str, **options: Any) -> InlineRunner:
    options.setdefault("heartbeat_interval", 0.05)
    options.setdefault("worker_id", "web-1")
    return InlineRunner(target, **options)


def released_payload(outcome: worker_service_pb2.JobOutcome) -> Any:
    assert outcome.WhichOneof("outcome") == "released", outcome
    payload = outcome.released.payload
    return json.loads(payload.data) if payload.data else None


# -- running inline --------------------------------------------------------------------------


def test_async_run_leases_heartbeats_and_reports_completion(fake) -> None:
    coordinator, target = fake
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with runner_for(target) as runner:

            @runner.handler("order.price")
            async def price(order: Order, ctx: JobContext) -> dict:
                seen.update(is_inline=ctx.is_inline, job_id=ctx.job_id, current=current_job())
                # Stay until the lease has been heartbeated at least once.
                await asyncio.to_thread(
                    coordinator.wait_for, lambda: coordinator.heartbeats, "a heartbeat"
                )
                return {"total": order.items * 3}

            result = await runner.run(
                "order.price", Order("o-1", 4), tenant_id="shop", heartbeat_timeout=3
            )

        assert result.status == InlineStatus.COMPLETED == "completed"
        assert result.value == {"total": 12}
        assert result.job_status == JobStatus.COMPLETED and result.finished
        assert result.attempt == 1 and result.follow_job_id == result.job_id
        assert seen["is_inline"] and seen["job_id"] == result.job_id
        assert seen["current"].job_id == result.job_id
        (request,) = coordinator.enqueues
        assert request.inline.worker_id == "web-1" and not request.inline.enqueue_if_paused
        assert request.job.tenant_id == "shop"
        lease = coordinator.heartbeats[0].leases[0]
        assert (coordinator.heartbeats[0].worker_id, lease.job_id) == ("web-1", result.job_id)
        outcome = coordinator.outcome_of(result.job_id)
        assert json.loads(outcome.completed.result.data) == {"total": 12}

    asyncio.run(main())


def test_run_sync_runs_a_blocking_handler_with_the_callers_context_variables(fake) -> None:
    coordinator, target = fake
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")
    threads: list[str] = []

    def price(order: Order, ctx: JobContext) -> int:
        threads.append(threading.current_thread().name)
        return order.items if request_id.get() == "req-7" else -1

    def broken(order: Order) -> int:
        raise ValueError(f"order {order.id} has no items")

    with runner_for(target) as runner:
        request_id.set("req-7")
        result = runner.run_sync("order.price", Order("o-1", 5), handler=price)
        failed = runner.run_sync("order.bad", {"id": "o-2", "items": 0}, handler=broken)

    assert (result.status, result.value) == ("completed", 5)
    assert threads and threads[0] != threading.current_thread().name
    assert failed.status == InlineStatus.FAILED
    assert failed.job_status == JobStatus.PENDING, "retryable: the coordinator schedules a retry"
    assert isinstance(failed.exception, ValueError)
    assert failed.error == "ValueError: order o-2 has no items"
    assert coordinator.outcome_of(failed.job_id).failed.error_kind == "ValueError"


def test_run_sync_refuses_a_running_event_loop_and_a_missing_handler(fake) -> None:
    _, target = fake

    async def main() -> None:
        runner = runner_for(target)
        with pytest.raises(RuntimeError, match="await run"):
            runner.run_sync("x", handler=lambda: None)
        with pytest.raises(ValueError, match="no handler registered for job type 'x'"):
            await runner.run("x")
        with pytest.raises(ValueError, match="runs now"):
            await runner.run("x", handler=lambda: None, delay=5)
        await runner.aclose()

    asyncio.run(main())


def test_a_worker_shares_its_handlers_with_the_runner(fake) -> None:
    coordinator, target = fake
    worker = Worker(target)

    @worker.handler("greet")
    def greet(name: str) -> str:
        return f"hello {name}"

    with InlineRunner(worker, worker_id="web-2") as runner:
        assert runner.run_sync("greet", "ada").value == "hello ada"
    assert coordinator.enqueues[0].inline.worker_id == "web-2"


def test_paused_scope_is_refused_or_queued(fake) -> None:
    coordinator, target = fake
    coordinator.paused_types.add("report")
    calls: list[int] = []

    with runner_for(target) as runner:
        runner.register("report", lambda: calls.append(1))
        with pytest.raises(JobPausedError, match="paused") as refused:
            runner.run_sync("report")
        queued = runner.run_sync("report", if_paused="queue")

    assert isinstance(refused.value, FailedPreconditionError)
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert (queued.status, queued.job_status) == (InlineStatus.QUEUED, JobStatus.PENDING)
    assert not queued.finished and calls == []
    assert coordinator.enqueues[-1].inline.enqueue_if_paused


def test_an_existing_job_with_the_same_idempotency_key_is_not_run_again(fake) -> None:
    coordinator, target = fake
    calls: list[str] = []

    def once(order: Order) -> dict:
        calls.append(order.id)
        return {"charged": order.items}

    with runner_for(target) as runner:
        first = runner.run_sync("charge", Order("o-1", 2), handler=once, idempotency_key="req-1")
        again = runner.run_sync("charge", Order("o-1", 2), handler=once, idempotency_key="req-1")

    assert calls == ["o-1"]
    assert (again.status, again.value, again.deduplicated) == ("completed", {"charged": 2}, True)
    assert again.job_id == first.job_id


# -- mixed mode: hand-offs ---------------------------------------------------------------------


def test_hand_off_releases_the_job_with_a_checkpoint(fake) -> None:
    coordinator, target = fake

    async def explicit(order: Order, ctx: JobContext) -> None:
        ctx.hand_off(Order(order.id, 3), reason="too many items for a request")

    def by_exception(order: Order, ctx: JobContext) -> None:
        ctx.checkpoint({"id": order.id, "items": 1})
        raise HandOff()

    def plain(order: Order) -> None:
        raise HandOff()

    with runner_for(target) as runner:
        results = [
            runner.run_sync("batch", Order("o-1", 9), handler=handler)
            for handler in (explicit, by_exception, plain)
        ]

    for result in results:
        assert (result.status, result.job_status) == ("handed_off", JobStatus.PENDING)
        assert not result.finished and result.follow_job_id == result.job_id
    assert results[0].reason == "too many items for a request"
    payloads = [released_payload(coordinator.outcome_of(r.job_id)) for r in results]
    assert payloads == [{"id": "o-1", "items": 3}, {"id": "o-1", "items": 1}, None]


def test_continue_as_enqueues_a_continuation_with_the_workflow_and_trace_context(fake) -> None:
    coordinator, target = fake
    workflow = WorkflowRef(definition_id="checkout", instance_id="i-9", correlation_id="c-1")

    async def checkout(order: Order, ctx: JobContext) -> None:
        ctx.continue_as("order.ship", {"order": order.id})

    async def main() -> None:
        async with runner_for(target) as runner:
            result = await runner.run(
                "order.checkout",
                Order("o-5", 1),
                handler=checkout,
                workflow=workflow,
                tenant_id="shop",
                priority=4,
                traceparent=TRACEPARENT,
                tracestate="vendor=1",
            )
        assert result.status == InlineStatus.HANDED_OFF
        assert result.job_status == JobStatus.COMPLETED and not result.finished
        assert result.continuation_job_id and result.follow_job_id == result.continuation_job_id
        assert result.reason == "continued as order.ship"
        plain = [r for r in coordinator.enqueues if not r.HasField("inline")]
        (spec,) = [r.job for r in plain]
        assert spec.job_type == "order.ship" and json.loads(spec.payload.data) == {"order": "o-5"}
        assert WorkflowRef.from_proto(spec.workflow) == workflow
        assert (spec.tenant_id, spec.priority) == ("shop", 4)
        assert (spec.traceparent, spec.tracestate) == (TRACEPARENT, "vendor=1")
        assert spec.category == job_pb2.JOB_CATEGORY_CONTINUATION
        assert spec.idempotency_key == f"{result.job_id}/continuation"
        completed = coordinator.outcome_of(result.job_id).completed
        assert json.loads(completed.result.data) == {"continued_as": result.continuation_job_id}

    asyncio.run(main())


def test_time_budget_cancels_an_async_handler_and_releases_its_checkpoint(fake) -> None:
    coordinator, target = fake
    seen: list[str | None] = []

    async def endless(order: Order, ctx: JobContext) -> None:
        for done in range(order.items):
            ctx.checkpoint(Order(order.id, order.items - done))
            if done == 2:
                try:
                    await asyncio.Event().wait()  # never set: only the budget ends this
                finally:
                    seen.append(ctx.cancel_reason)

    async def main() -> None:
        async with runner_for(target) as runner:
            result = await runner.run("crunch", Order("o-1", 10), handler=endless, budget=0.2)
        assert (result.status, result.reason) == ("handed_off", CancelReason.BUDGET_EXHAUSTED)
        assert seen == [CancelReason.BUDGET_EXHAUSTED]
        assert released_payload(coordinator.outcome_of(result.job_id)) == {"id": "o-1", "items": 8}

    asyncio.run(main())


def test_time_budget_lets_a_blocking_handler_hand_off_within_the_grace(fake) -> None:
    coordinator, target = fake

    def cooperative(order: Order, ctx: JobContext) -> None:
        assert ctx.budget_remaining is not None
        assert ctx.cancelled.wait_blocking(WAIT), "the budget sets the cancel signal"
        ctx.hand_off({"id": order.id, "items": 1})

    release_stuck = threading.Event()

    def stuck(order: Order) -> str:
        release_stuck.wait(WAIT)
        return "too late"

    with runner_for(target) as runner:
        handed = runner.run_sync(
            "crunch", Order("o-1", 5), handler=cooperative, budget=0.1, budget_grace=WAIT
        )
        abandoned = runner.run_sync(
            "crunch", Order("o-2", 5), handler=stuck, budget=timedelta(milliseconds=100)
        )
        release_stuck.set()

    assert handed.status == abandoned.status == "handed_off"
    assert released_payload(coordinator.outcome_of(handed.job_id)) == {"id": "o-1", "items": 1}
    # The stuck handler's thread could not be interrupted: released as it was, result ignored.
    assert released_payload(coordinator.outcome_of(abandoned.job_id)) is None


def test_hand_off_outside_inline_execution_is_a_clear_error() -> None:
    ctx = make_job_context({"id": "o-1"})
    assert not ctx.is_inline
    with pytest.raises(RuntimeError, match="needs an inline execution"):
        ctx.hand_off({"id": "o-1"})
    with pytest.raises(RuntimeError, match="check ctx.is_inline"):
        ctx.continue_as("next")
    ctx.checkpoint({"done": 1})
    assert ctx.checkpoint_value == {"done": 1}


# -- cancellation, lost leases, flaky coordinators -------------------------------------------


def test_cancel_requested_through_the_heartbeat_reaches_the_handler(fake) -> None:
    coordinator, target = fake

    async def cancellable(ctx: JobContext) -> str:
        with coordinator.lock:
            coordinator.jobs[ctx.job_id].cancel_requested = True
        await ctx.cancelled.wait()
        raise asyncio.CancelledError()

    async def main() -> None:
        async with runner_for(target, cancel_grace=WAIT) as runner:
            result = await runner.run("long", handler=cancellable)
        assert (result.status, result.job_status) == ("cancelled", JobStatus.CANCELLED)

    asyncio.run(main())


def test_a_lost_lease_is_reported_to_the_caller_and_no_outcome_is_sent(fake) -> None:
    coordinator, target = fake

    async def slow(ctx: JobContext) -> str:
        with coordinator.lock:
            coordinator.lost.add(ctx.job_id)
        await ctx.cancelled.wait()
        assert ctx.lease_lost
        return "finished anyway"

    async def main() -> None:
        async with runner_for(target) as runner:
            with pytest.raises(LeaseLostError) as lost:
                await runner.run("long", handler=slow)
        assert lost.value.job_id in coordinator.jobs  # type: ignore[attr-defined]
        assert coordinator.outcomes == []

    asyncio.run(main())


def test_the_outcome_is_retried_while_the_coordinator_is_unavailable(fake) -> None:
    coordinator, target = fake
    coordinator.unavailable_reports = 2
    with runner_for(target) as runner:
        result = runner.run_sync("echo", "hi", handler=lambda value: value)
    assert (result.status, result.value) == ("completed", "hi")
    assert coordinator.unavailable_reports == 0


def test_a_cancelled_caller_hands_the_job_back(fake) -> None:
    coordinator, target = fake
    started = asyncio.Event()

    async def long(ctx: JobContext) -> None:
        started.set()
        await asyncio.Event().wait()

    async def main() -> None:
        async with runner_for(target) as runner:
            call = asyncio.create_task(runner.run("long", handler=long))
            await asyncio.wait_for(started.wait(), WAIT)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        (outcome,) = coordinator.outcomes
        assert outcome.released.reason == "inline caller cancelled"

    asyncio.run(main())


# -- wait for result ---------------------------------------------------------------------------


def test_enqueue_and_wait_returns_the_typed_result_or_raises_the_jobs_error(fake) -> None:
    coordinator, target = fake

    def finish_jobs() -> None:
        # Stands in for a remote worker: completes or faults each new pending job.
        done: set[str] = set()
        while True:
            with coordinator.lock:
                coordinator.lock.wait_for(
                    lambda: (
                        any(
                            j.id not in done and j.status == job_pb2.JOB_STATUS_PENDING
                            for j in coordinator.jobs.values()
                        )
                        or stop.is_set()
                    )
                )
                if stop.is_set():
                    return
                for job in coordinator.jobs.values():
                    if job.id in done or job.status != job_pb2.JOB_STATUS_PENDING:
                        continue
                    done.add(job.id)
                    if job.job_type == "never":
                        continue
                    if job.job_type == "boom":
                        job.status = job_pb2.JOB_STATUS_FAULTED
                        job.last_error = "RuntimeError: boom"
                    else:
                        job.status = job_pb2.JOB_STATUS_COMPLETED
                        job.result.data = json.dumps({"id": "o-1", "items": 2}).encode()
                        job.result.content_type = "application/json"
                coordinator.lock.notify_all()

    stop = threading.Event()
    finisher = threading.Thread(target=finish_jobs, daemon=True)
    finisher.start()
    try:
        with SchedulerClient(target) as client:
            assert enqueue_and_wait(client, "ok", timeout=WAIT, result_type=Order) == Order(
                "o-1", 2
            )
            with pytest.raises(JobFailedError, match="ended FAULTED: RuntimeError: boom") as failed:
                enqueue_and_wait(client, "boom", timeout=WAIT)
            assert failed.value.status == JobStatus.FAULTED
            with pytest.raises(DeadlineExceededError) as late:
                enqueue_and_wait(client, "never", timeout=0.3)
            assert late.value.job_id in coordinator.jobs  # type: ignore[attr-defined]

        async def main() -> None:
            async with AsyncSchedulerClient(target) as client:
                value = await aenqueue_and_wait(client, "ok", timeout=WAIT, result_type=Order)
                assert value == Order("o-1", 2)

        asyncio.run(main())
    finally:
        stop.set()
        with coordinator.lock:
            coordinator.lock.notify_all()
        finisher.join(WAIT)


# -- tracing -----------------------------------------------------------------------------------


def test_an_inline_run_is_traced_and_its_continuation_stays_in_the_trace(fake) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    coordinator, target = fake
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _tracing.use_tracer_provider(provider)

    async def checkout(order: Order, ctx: JobContext) -> None:
        ctx.continue_as("order.ship", {"order": order.id})

    try:
        with runner_for(target) as runner:
            result = runner.run_sync("order.checkout", Order("o-1", 1), handler=checkout)
    finally:
        _tracing.use_tracer_provider(None)
        provider.shutdown()

    spans = {span.name: span for span in exporter.get_finished_spans()}
    enqueue, execute = spans["enqueue order.checkout"], spans["execute order.checkout"]
    assert execute.parent is not None and execute.parent.span_id == enqueue.context.span_id
    assert execute.attributes["wfjobs.job_id"] == result.job_id
    assert execute.attributes["wfjobs.worker_id"] == "web-1"
    inline, continuation = coordinator.enqueues[0].job, coordinator.enqueues[1].job
    trace_id = format(enqueue.context.trace_id, "032x")
    assert inline.traceparent.split("-")[1] == trace_id
    assert continuation.traceparent == inline.traceparent, "the continuation joins the same trace"
