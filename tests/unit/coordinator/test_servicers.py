"""Servicer unit tests with grpcio-testing.

grpcio-testing drives synchronous servicers; ours are grpc.aio coroutines. The
adapter below runs each servicer method on an event loop in a background
thread (where a real engine over SQLite lives), and maps domain errors to
status codes with the same function the production interceptor uses, so each
test checks one servicer's translation: protobuf in, domain call, protobuf
and status out.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc_testing
import pytest

from coordinator.api.admin import AdminServicer
from coordinator.api.errors import status_for
from coordinator.api.scheduler import JobSchedulerServicer
from coordinator.api.worker import WorkerServicer
from coordinator.engine import Engine
from coordinator.errors import WorkflowJobsError
from coordinator.store import open_store
from coordinator.store.migrate import upgrade
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import worker_service_pb2 as wpb

SCHEDULER = spb.DESCRIPTOR.services_by_name["JobSchedulerService"]
WORKER = wpb.DESCRIPTOR.services_by_name["WorkerService"]
ADMIN = apb.DESCRIPTOR.services_by_name["AdminService"]


class _Aborted(Exception):
    pass


class _AioContext:
    """What the servicers use of grpc.aio's context, backed by grpc_testing's."""

    def __init__(self, context: Any) -> None:
        self._context = context

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self._context.set_code(code)
        self._context.set_details(details)
        raise _Aborted

    def invocation_metadata(self) -> Any:
        return self._context.invocation_metadata()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


def _mapped(context: Any, exc: BaseException) -> None:
    code = status_for(exc) if isinstance(exc, WorkflowJobsError) else None
    context.abort(code or grpc.StatusCode.INTERNAL, str(exc))


class _SyncServicer:
    """Exposes an async servicer's methods as the blocking calls grpc_testing makes."""

    def __init__(self, servicer: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._servicer = servicer
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._servicer, name)
        if name == "AcquireJobs":
            return lambda requests, context: self._stream(method, requests, context)

        def unary(request: Any, context: Any) -> Any:
            future = asyncio.run_coroutine_threadsafe(
                method(request, _AioContext(context)), self._loop
            )
            try:
                return future.result(timeout=30)
            except _Aborted:
                return None
            except Exception as exc:  # noqa: BLE001 - mapped like the interceptor does
                _mapped(context, exc)

        return unary

    def _stream(self, method: Any, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        loop = self._loop

        async def pull() -> Any:
            item = await loop.run_in_executor(None, next, requests, None)
            if item is None:
                raise StopAsyncIteration
            return item

        class _Requests:
            def __aiter__(self) -> _Requests:
                return self

            async def __anext__(self) -> Any:
                return await pull()

        responses = method(_Requests(), _AioContext(context))
        try:
            while True:
                future = asyncio.run_coroutine_threadsafe(responses.__anext__(), loop)
                try:
                    yield future.result(timeout=30)
                except StopAsyncIteration:
                    return
        except _Aborted:
            return
        except WorkflowJobsError as exc:
            _mapped(context, exc)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    store = open_store(f"sqlite:///{tmp_path / 'servicers.db'}")
    upgrade(store)
    engine = Engine(store)
    asyncio.run_coroutine_threadsafe(engine.start(), loop).result(30)
    servicers = {
        SCHEDULER: _SyncServicer(JobSchedulerServicer(engine), loop),
        WORKER: _SyncServicer(WorkerServicer(engine), loop),
        ADMIN: _SyncServicer(AdminServicer(engine), loop),
    }
    try:
        yield grpc_testing.server_from_dictionary(servicers, grpc_testing.strict_real_time())
    finally:
        asyncio.run_coroutine_threadsafe(engine.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def unary(server: Any, service: Any, method: str, request: Any) -> tuple[Any, Any, str]:
    rpc = server.invoke_unary_unary(service.methods_by_name[method], (), request, None)
    response, _, code, details = rpc.termination()
    return response, code, details


def spec(**fields: Any) -> jpb.JobSpec:
    base: dict[str, Any] = {
        "job_type": "noop",
        "tenant_id": "t",
        "payload": jpb.Payload(data=b"{}"),
    }
    base.update(fields)
    return jpb.JobSpec(**base)


def test_enqueue_translates_the_spec_and_returns_the_stored_job(server: Any) -> None:
    request = spb.EnqueueRequest(
        job=spec(
            priority=4,
            workflow=jpb.WorkflowRef(definition_id="d1", instance_id="i1", correlation_id="c1"),
            retry_policy=jpb.RetryPolicy(max_attempts=6),
        )
    )
    response, code, _ = unary(server, SCHEDULER, "Enqueue", request)
    assert code == grpc.StatusCode.OK
    job = response.job
    assert (job.job_type, job.tenant_id, job.priority, job.max_attempts) == ("noop", "t", 4, 6)
    assert (job.workflow.definition_id, job.workflow.correlation_id) == ("d1", "c1")
    assert job.status == jpb.JOB_STATUS_PENDING and job.id
    fetched, code, _ = unary(server, SCHEDULER, "GetJob", spb.GetJobRequest(job_id=job.id))
    assert code == grpc.StatusCode.OK and fetched.job == job


def test_domain_errors_become_status_codes(server: Any) -> None:
    _, code, details = unary(
        server, SCHEDULER, "Enqueue", spb.EnqueueRequest(job=spec(job_type=""))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "job_type is required" in details
    missing = "0190b6e2-5c1a-7d3e-8f00-123456789abc"
    _, code, _ = unary(server, SCHEDULER, "GetJob", spb.GetJobRequest(job_id=missing))
    assert code == grpc.StatusCode.NOT_FOUND
    _, code, details = unary(
        server, WORKER, "CompleteJob", wpb.CompleteJobRequest(job_id=missing, lease_token="x")
    )
    assert code == grpc.StatusCode.NOT_FOUND


def test_batch_results_in_request_order(server: Any) -> None:
    request = spb.EnqueueBatchRequest(
        jobs=[spec(idempotency_key="k1"), spec(), spec(idempotency_key="k1")]
    )
    response, code, _ = unary(server, SCHEDULER, "EnqueueBatch", request)
    assert code == grpc.StatusCode.OK
    first, second, third = response.results
    assert (first.deduplicated, second.deduplicated, third.deduplicated) == (False, False, True)
    assert third.job_id == first.job_id != second.job_id


def test_acquire_stream_leases_and_report_outcomes(server: Any) -> None:
    unary(server, SCHEDULER, "Enqueue", spb.EnqueueRequest(job=spec(job_type="stream")))
    rpc = server.invoke_stream_stream(WORKER.methods_by_name["AcquireJobs"], (), None)
    rpc.send_request(
        wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="w1", job_types=["stream"]))
    )
    accepted = rpc.take_response()
    assert accepted.WhichOneof("kind") == "accepted"
    rpc.send_request(wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=5)))
    batch = rpc.take_response()
    [leased] = batch.jobs.jobs
    assert leased.job.job_type == "stream" and leased.job.attempt == 1 and leased.lease_token
    report = wpb.ReportOutcomesRequest(
        outcomes=[
            wpb.JobOutcome(
                job_id=leased.job.id, lease_token=leased.lease_token, completed=wpb.Completion()
            ),
            wpb.JobOutcome(
                job_id=leased.job.id, lease_token=leased.lease_token, completed=wpb.Completion()
            ),
        ]
    )
    response, code, _ = unary(server, WORKER, "ReportOutcomes", report)
    assert code == grpc.StatusCode.OK
    assert [(r.accepted, r.error_code) for r in response.results] == [
        (True, ""),
        (False, "INVALID_ARGUMENT"),
    ]
    assert "named more than once" in response.results[1].error_message
    rpc.requests_closed()
    rpc.termination()


def test_report_outcomes_refuses_a_malformed_outcome_alone(server: Any) -> None:
    """ReportOutcomes answers per outcome: one without a kind, or without a
    lease token, is INVALID_ARGUMENT on its own and its neighbour is recorded."""
    unary(server, SCHEDULER, "Enqueue", spb.EnqueueRequest(job=spec(job_type="unary")))
    rpc = server.invoke_stream_stream(WORKER.methods_by_name["AcquireJobs"], (), None)
    rpc.send_request(
        wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="w1", job_types=["unary"]))
    )
    rpc.take_response()
    rpc.send_request(wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=5)))
    [leased] = rpc.take_response().jobs.jobs
    other = "01a230cc-dd4b-7002-98d7-f6ec9a0719b6"
    report = wpb.ReportOutcomesRequest(
        outcomes=[
            wpb.JobOutcome(job_id=other, lease_token="t"),  # no kind set
            wpb.JobOutcome(
                job_id=leased.job.id, lease_token=leased.lease_token, completed=wpb.Completion()
            ),
            wpb.JobOutcome(job_id=other, completed=wpb.Completion()),  # no lease token
        ]
    )
    response, code, _ = unary(server, WORKER, "ReportOutcomes", report)
    assert code == grpc.StatusCode.OK
    assert [(r.accepted, r.error_code) for r in response.results] == [
        (False, "INVALID_ARGUMENT"),
        (True, ""),
        (False, "INVALID_ARGUMENT"),
    ]
    assert "no kind set" in response.results[0].error_message
    assert "lease_token is required" in response.results[2].error_message
    rpc.requests_closed()
    rpc.termination()
    fetched, _, _ = unary(server, SCHEDULER, "GetJob", spb.GetJobRequest(job_id=leased.job.id))
    assert fetched.job.status == jpb.JOB_STATUS_COMPLETED


def test_admin_list_jobs_pages(server: Any) -> None:
    for _ in range(5):
        unary(server, SCHEDULER, "Enqueue", spb.EnqueueRequest(job=spec(tenant_id="pages")))
    first, code, _ = unary(
        server,
        ADMIN,
        "ListJobs",
        apb.ListJobsRequest(filter=apb.JobFilter(tenant_id="pages"), page_size=3),
    )
    assert code == grpc.StatusCode.OK and len(first.jobs) == 3 and first.next_page_token
    second, _, _ = unary(
        server,
        ADMIN,
        "ListJobs",
        apb.ListJobsRequest(
            filter=apb.JobFilter(tenant_id="pages"), page_size=3, page_token=first.next_page_token
        ),
    )
    assert len(second.jobs) == 2 and not second.next_page_token
    ids = [j.id for j in first.jobs] + [j.id for j in second.jobs]
    assert ids == sorted(ids)


def test_a_failed_attempt_keeps_the_tail_of_its_traceback(server: Any) -> None:
    unary(server, SCHEDULER, "Enqueue", spb.EnqueueRequest(job=spec(job_type="tb")))
    rpc = server.invoke_stream_stream(WORKER.methods_by_name["AcquireJobs"], (), None)
    rpc.send_request(
        wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="w1", job_types=["tb"]))
    )
    rpc.take_response()
    rpc.send_request(wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=1)))
    [leased] = rpc.take_response().jobs.jobs
    frames = "".join(f'  File "app.py", line {n}, in step_{n}\n' for n in range(2000))
    traceback = f"Traceback (most recent call last):\n{frames}ValueError: the disk is full\n"
    assert len(traceback.encode()) > 40_000
    failed = wpb.Failure(error="ValueError: the disk is full", traceback=traceback)
    report = wpb.ReportOutcomesRequest(
        outcomes=[
            wpb.JobOutcome(job_id=leased.job.id, lease_token=leased.lease_token, failed=failed)
        ]
    )
    _, code, _ = unary(server, WORKER, "ReportOutcomes", report)
    assert code == grpc.StatusCode.OK
    rpc.requests_closed()
    rpc.termination()

    fetched, code, _ = unary(
        server, SCHEDULER, "GetJob", spb.GetJobRequest(job_id=leased.job.id, include_attempts=True)
    )

    (attempt,) = fetched.job.attempts
    kept = attempt.traceback
    assert kept.endswith("line 1999, in step_1999\nValueError: the disk is full\n")
    assert kept.startswith("[") and " earlier bytes cut]\n" in kept.splitlines(keepends=True)[0]
    body = kept.split("\n", 1)[1]
    assert len(body.encode()) <= 16 * 1024
    assert traceback.endswith(body)


def test_outcomes_on_the_stream_are_answered_one_by_one_and_free_their_credit(
    server: Any,
) -> None:
    unary(server, SCHEDULER, "Enqueue", spec_request := spb.EnqueueRequest(job=spec(job_type="os")))
    rpc = server.invoke_stream_stream(WORKER.methods_by_name["AcquireJobs"], (), None)
    rpc.send_request(
        wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="w1", job_types=["os"]))
    )
    accepted = rpc.take_response().accepted
    assert accepted.outcomes_on_stream
    rpc.send_request(wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=1)))
    [leased] = rpc.take_response().jobs.jobs
    unary(server, SCHEDULER, "Enqueue", spec_request)
    done = wpb.JobOutcome(
        job_id=leased.job.id, lease_token=leased.lease_token, completed=wpb.Completion()
    )
    # A malformed outcome and a repeated one are refused on their own; the
    # completion beside them is recorded, and the credit leases the next job.
    malformed = wpb.JobOutcome(job_id=leased.job.id, lease_token=leased.lease_token)
    rpc.send_request(
        wpb.AcquireJobsRequest(
            outcomes=wpb.OutcomeBatch(batch_id=7, outcomes=[malformed, done, done], credits=1)
        )
    )
    first, second = rpc.take_response(), rpc.take_response()
    by_kind = {first.WhichOneof("kind"): first, second.WhichOneof("kind"): second}
    answers = by_kind["outcomes"].outcomes
    assert answers.batch_id == 7
    assert [(r.job_id, r.accepted, r.error_code) for r in answers.results] == [
        (leased.job.id, False, "INVALID_ARGUMENT"),
        (leased.job.id, True, ""),
        (leased.job.id, False, "INVALID_ARGUMENT"),
    ]
    assert "no kind set" in answers.results[0].error_message
    assert "named more than once" in answers.results[2].error_message
    assert answers.results[1].status == jpb.JOB_STATUS_COMPLETED
    [next_job] = by_kind["jobs"].jobs.jobs
    assert next_job.job.id != leased.job.id
    fetched, _, _ = unary(server, SCHEDULER, "GetJob", spb.GetJobRequest(job_id=leased.job.id))
    assert fetched.job.status == jpb.JOB_STATUS_COMPLETED
    rpc.requests_closed()
    rpc.termination()


def test_outcomes_sent_before_the_worker_closes_its_side_are_still_answered(
    server: Any,
) -> None:
    unary(server, SCHEDULER, "Enqueue", spb.EnqueueRequest(job=spec(job_type="oc")))
    rpc = server.invoke_stream_stream(WORKER.methods_by_name["AcquireJobs"], (), None)
    rpc.send_request(
        wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="w1", job_types=["oc"]))
    )
    rpc.take_response()
    rpc.send_request(wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=1)))
    [leased] = rpc.take_response().jobs.jobs
    done = wpb.JobOutcome(
        job_id=leased.job.id, lease_token=leased.lease_token, completed=wpb.Completion()
    )
    rpc.send_request(wpb.AcquireJobsRequest(outcomes=wpb.OutcomeBatch(batch_id=1, outcomes=[done])))
    rpc.requests_closed()
    answers = rpc.take_response().outcomes
    assert [(r.accepted, r.status) for r in answers.results] == [(True, jpb.JOB_STATUS_COMPLETED)]
    rpc.termination()
