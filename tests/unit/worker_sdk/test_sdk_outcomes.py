"""The SDK's outcome reporter against a real coordinator (gRPC server, engine,
store on both dialects, in this process), through ``ReportOutcomes`` and on the
job stream: per-outcome answers, a batch split on a persistent server error,
an outcome given up after a bounded time, a batch re-sent when the stream ends
before answering it, and a worker whose outcomes and credit ride the stream."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import pytest
import sqlalchemy as sa

from coordinator.api.server import CoordinatorServer
from coordinator.api.worker import WorkerServicer
from coordinator.engine import Engine
from coordinator.engine.outcomes import OutcomeResult
from coordinator.errors import InvalidArgument
from coordinator.model import JobStatus
from coordinator.store import open_store
from wfj_testing import make_job
from worker_sdk import Worker
from worker_sdk._outcomes import OutcomeReporter, ReporterConfig, StreamLink
from workflowjobs.v1 import job_pb2, worker_service_pb2, worker_service_pb2_grpc

FAST = ReporterConfig(linger=0.05, initial_backoff=0.02, max_backoff=0.1, give_up_after=1.0)


async def _coordinator(url: str) -> CoordinatorServer:
    server = CoordinatorServer(Engine(open_store(url)), "127.0.0.1:0")
    await server.start()
    return server


async def _leased(server: CoordinatorServer, n: int) -> list[tuple[str, str]]:
    """``n`` jobs leased to this test as an inline caller: (job id, lease token)."""
    out = []
    for _ in range(n):
        row, _, token = await server.engine.enqueue_inline(
            make_job(job_type="noop", due_at=0), "reporter-test", enqueue_if_paused=False
        )
        assert token is not None
        out.append((row.id, token))
    return out


def _completed(job_id: str, token: str) -> worker_service_pb2.JobOutcome:
    return worker_service_pb2.JobOutcome(
        job_id=job_id,
        lease_token=token,
        completed=worker_service_pb2.Completion(result=job_pb2.Payload(data=b"ok")),
    )


def _failed(job_id: str, token: str) -> worker_service_pb2.JobOutcome:
    return worker_service_pb2.JobOutcome(
        job_id=job_id, lease_token=token, failed=worker_service_pb2.Failure(error="boom")
    )


async def _status(server: CoordinatorServer, job_id: str) -> JobStatus:
    row, _ = await server.engine.get_job(job_id)
    return JobStatus(row.status)


class _Stream:
    """An AcquireJobs stream that carries the reporter's batches, as the worker's does."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.requests: asyncio.Queue[Any] = asyncio.Queue()
        self.requests.put_nowait(
            worker_service_pb2.AcquireJobsRequest(
                hello=worker_service_pb2.WorkerHello(worker_id="reporter-test", job_types=["x"])
            )
        )
        self.call = worker_service_pb2_grpc.WorkerServiceStub(channel).AcquireJobs(self._out())
        self.link: StreamLink | None = None
        self.reader: asyncio.Task[None] | None = None
        self.answered = 0
        """OutcomeAnswers received."""

    async def _out(self) -> Any:
        while (item := await self.requests.get()) is not None:
            yield item

    async def open(self, reporter: OutcomeReporter) -> None:
        accepted = asyncio.Event()
        self.reader = asyncio.create_task(self._read(reporter, accepted))
        await asyncio.wait_for(accepted.wait(), 10)

    async def _read(self, reporter: OutcomeReporter, accepted: asyncio.Event) -> None:
        ended = "closed"
        try:
            async for response in self.call:
                kind = response.WhichOneof("kind")
                if kind == "accepted":
                    assert response.accepted.outcomes_on_stream
                    self.link = StreamLink(self.requests.put_nowait, lambda: 0)
                    reporter.use_stream(self.link)
                    accepted.set()
                elif kind == "outcomes" and self.link is not None:
                    self.answered += 1
                    self.link.answered(response.outcomes)
        except grpc.aio.AioRpcError as exc:
            ended = exc.code().name
        finally:
            if self.link is not None:
                self.link.ended(ended)
            reporter.use_stream(None)


TRANSPORTS = ["unary", "stream"]


def _run(url: str, scenario: Any, transport: str = "unary") -> None:
    async def main() -> None:
        server = await _coordinator(url)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        reporter = OutcomeReporter(
            worker_service_pb2_grpc.WorkerServiceStub(channel),
            config=FAST,
            logger=logging.getLogger("worker_sdk.outcomes"),
        )
        stream = _Stream(channel) if transport == "stream" else None
        if stream is not None:
            await stream.open(reporter)
        reporter.start()
        try:
            await scenario(server, reporter)
            if stream is not None:
                assert stream.answered >= 1, "no batch went on the stream"
        finally:
            await reporter.close()
            if stream is not None:
                stream.call.cancel()
            await channel.close()
            await server.stop(0)

    asyncio.run(main())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_poisoned_job_is_answered_on_its_own_and_its_neighbours_recorded(
    store_url: str, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(server: CoordinatorServer, reporter: OutcomeReporter) -> None:
        leased = await _leased(server, 4)
        poisoned = leased[1][0]
        with server.engine.store.engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE wfj_jobs SET retry_policy = :p WHERE id = :id"),
                {"p": '{"backoff_multiplier": 2.0, "written_by": "old"}', "id": poisoned},
            )
        for job_id, token in leased:
            reporter.submit(
                _failed(job_id, token) if job_id == poisoned else _completed(job_id, token)
            )
        with caplog.at_level(logging.WARNING, logger="worker_sdk.outcomes"):
            assert await reporter.flush(timeout=20)
        # One call answered every outcome: nothing was re-sent.
        assert reporter.reports_sent == 1
        for job_id, _ in leased:
            expected = JobStatus.RUNNING if job_id == poisoned else JobStatus.COMPLETED
            assert await _status(server, job_id) == expected
        # The line says what the coordinator said, not that the lease was lost.
        [line] = [
            r.getMessage()
            for r in caplog.records
            if r.name == "worker_sdk.outcomes" and poisoned in r.getMessage()
        ]
        assert line.startswith(f"outcome of job {poisoned} not recorded: FAILED_PRECONDITION: ")
        assert "stored data is unusable" in line and "lease lost" not in line

    _run(store_url, scenario, transport)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_stale_outcome_is_logged_with_the_coordinators_answer(
    store_url: str, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(server: CoordinatorServer, reporter: OutcomeReporter) -> None:
        [(job_id, _)] = await _leased(server, 1)
        reporter.submit(_completed(job_id, "not-the-lease-token"))
        with caplog.at_level(logging.WARNING, logger="worker_sdk.outcomes"):
            assert await reporter.flush(timeout=20)
        assert reporter.reports_sent == 1
        [record] = [
            r
            for r in caplog.records
            if r.name == "worker_sdk.outcomes" and job_id in r.getMessage()
        ]
        assert record.levelno == logging.WARNING
        assert record.getMessage().startswith(
            f"outcome of job {job_id} not recorded: FAILED_PRECONDITION: "
        )
        assert await _status(server, job_id) == JobStatus.RUNNING

    _run(store_url, scenario, transport)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_note_on_a_recorded_outcome_is_logged(
    store_url: str, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An outcome sent with a push-back the coordinator holds shorter (by a
    client that did not bound it) is recorded, and the answer's note logged."""

    async def scenario(server: CoordinatorServer, reporter: OutcomeReporter) -> None:
        [(job_id, token)] = await _leased(server, 1)
        outcome = _completed(job_id, token)
        outcome.push_back.retry_after.seconds = 400 * 86_400
        reporter.submit(outcome)
        with caplog.at_level(logging.WARNING, logger="worker_sdk.outcomes"):
            assert await reporter.flush(timeout=20)
        [record] = [
            r
            for r in caplog.records
            if r.name == "worker_sdk.outcomes" and job_id in r.getMessage()
        ]
        assert record.getMessage().startswith(
            f"outcome of job {job_id} recorded: push_back.retry_after of 400 days"
        )
        assert await _status(server, job_id) == JobStatus.COMPLETED

    _run(store_url, scenario, transport)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_outcome_carries_the_engines_own_error_code(
    store_url: str, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An outcome the engine refuses as INVALID_ARGUMENT is answered with that
    code (through the API's one error map), not as a lost lease, and is not
    sent again; its neighbours are recorded."""

    async def scenario(server: CoordinatorServer, reporter: OutcomeReporter) -> None:
        leased = await _leased(server, 3)
        refused = leased[1][0]
        engine = server.engine
        report = engine.outcomes.report

        async def refusing_report(outcomes: Any) -> Any:
            kept = [o for o in outcomes if o.job_id != refused]
            by_id = {r.job_id: r for r in await report(kept)}
            error = InvalidArgument(f"the completion of job {refused} carries a refused value")
            return [
                by_id[o.job_id]
                if o.job_id in by_id
                else OutcomeResult(o.job_id, False, error=error)
                for o in outcomes
            ]

        engine.outcomes.report = refusing_report  # type: ignore[method-assign]
        for job_id, token in leased:
            reporter.submit(_completed(job_id, token))
        with caplog.at_level(logging.WARNING, logger="worker_sdk.outcomes"):
            assert await reporter.flush(timeout=20)
        assert reporter.reports_sent == 1
        [record] = [
            r
            for r in caplog.records
            if r.name == "worker_sdk.outcomes" and refused in r.getMessage()
        ]
        assert record.levelno == logging.ERROR
        assert record.getMessage() == (
            f"outcome of job {refused} rejected: INVALID_ARGUMENT: "
            f"the completion of job {refused} carries a refused value"
        )
        for job_id, _ in leased:
            expected = JobStatus.RUNNING if job_id == refused else JobStatus.COMPLETED
            assert await _status(server, job_id) == expected

    _run(store_url, scenario, transport)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_batch_failing_with_internal_is_split_and_the_bad_outcome_given_up(
    store_url: str, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(server: CoordinatorServer, reporter: OutcomeReporter) -> None:
        leased = await _leased(server, 5)
        doomed = leased[2][0]
        engine = server.engine
        report = engine.outcomes.report
        calls: list[int] = []

        # A coordinator fault that one outcome triggers, whatever batch carries
        # it: ReportOutcomes answers INTERNAL for the whole call.
        async def faulty_report(outcomes: Any) -> Any:
            calls.append(len(outcomes))
            if any(o.job_id == doomed for o in outcomes):
                raise RuntimeError("engine fault on one outcome")
            return await report(outcomes)

        engine.outcomes.report = faulty_report  # type: ignore[method-assign]
        for job_id, token in leased:
            reporter.submit(_completed(job_id, token))
        with caplog.at_level(logging.WARNING, logger="worker_sdk.outcomes"):
            # Bounded: the reporter ends on its own, well before this timeout.
            assert await reporter.flush(timeout=30)
        for job_id, _ in leased:
            expected = JobStatus.RUNNING if job_id == doomed else JobStatus.COMPLETED
            assert await _status(server, job_id) == expected
        # Split after the first failure (on the stream, the coordinator does it).
        assert calls[0] == 5 and sorted(calls).count(5) == 1
        gave_up = [r for r in caplog.records if "gave up reporting" in r.getMessage()]
        assert len(gave_up) == 1 and gave_up[0].levelno == logging.ERROR
        assert doomed in gave_up[0].getMessage()
        assert reporter.backlog == 0 and reporter.unreported() == []

    _run(store_url, scenario, transport)


def test_a_batch_unanswered_when_the_stream_ends_is_sent_again(store_url: str) -> None:
    async def scenario(server: CoordinatorServer, reporter: OutcomeReporter) -> None:
        [(job_id, token)] = await _leased(server, 1)
        engine = server.engine
        report = engine.outcomes.report
        held, release = asyncio.Event(), asyncio.Event()
        calls: list[int] = []

        # The first report (the stream's) hangs until the stream is gone.
        async def slow_report(outcomes: Any) -> Any:
            calls.append(len(outcomes))
            if len(calls) == 1:
                held.set()
                await release.wait()
            return await report(outcomes)

        engine.outcomes.report = slow_report  # type: ignore[method-assign]
        reporter.submit(_completed(job_id, token))
        await asyncio.wait_for(held.wait(), 10)
        assert reporter.unreported()[0].job_id == job_id
        stream.call.cancel()
        assert await reporter.flush(timeout=20)
        release.set()
        assert await _status(server, job_id) == JobStatus.COMPLETED
        assert len(calls) == 2  # sent again through ReportOutcomes

    stream: _Stream

    async def main() -> None:
        nonlocal stream
        server = await _coordinator(store_url)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        reporter = OutcomeReporter(worker_service_pb2_grpc.WorkerServiceStub(channel), config=FAST)
        stream = _Stream(channel)
        await stream.open(reporter)
        reporter.start()
        try:
            await scenario(server, reporter)
        finally:
            await reporter.close()
            await channel.close()
            await server.stop(0)

    asyncio.run(main())


def test_a_batch_in_flight_when_the_worker_closes_its_side_is_answered_on_the_stream(
    store_url: str,
) -> None:
    async def main() -> None:
        server = await _coordinator(store_url)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        reporter = OutcomeReporter(worker_service_pb2_grpc.WorkerServiceStub(channel), config=FAST)
        stream = _Stream(channel)
        await stream.open(reporter)
        reporter.start()
        try:
            [(job_id, token)] = await _leased(server, 1)
            engine = server.engine
            report = engine.outcomes.report
            held, release = asyncio.Event(), asyncio.Event()
            calls: list[int] = []

            async def slow_report(outcomes: Any) -> Any:
                calls.append(len(outcomes))
                held.set()
                await release.wait()
                return await report(outcomes)

            engine.outcomes.report = slow_report  # type: ignore[method-assign]
            reporter.submit(_completed(job_id, token))
            await asyncio.wait_for(held.wait(), 10)
            # The worker closes its side (shutdown) while the batch is being written.
            assert stream.link is not None
            stream.link.sending = False
            stream.requests.put_nowait(None)
            await asyncio.sleep(0.05)
            release.set()
            assert await reporter.flush(timeout=20)
            assert stream.reader is not None
            await asyncio.wait_for(stream.reader, 10)
            assert stream.answered == 1 and calls == [1]  # answered there, never re-sent
            assert await _status(server, job_id) == JobStatus.COMPLETED
        finally:
            await reporter.close()
            await channel.close()
            await server.stop(0)

    asyncio.run(main())


def test_a_worker_reports_on_its_stream_and_the_credit_rides_along(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    unary_reports: list[int] = []
    credit_grants: list[int] = []
    unary = WorkerServicer.ReportOutcomes
    grant = WorkerServicer._grant

    async def counted_report(self: Any, request: Any, context: Any) -> Any:
        unary_reports.append(len(request.outcomes))
        return await unary(self, request, context)

    def counted_grant(self: Any, session: Any, credits: int) -> None:
        credit_grants.append(credits)
        grant(self, session, credits)

    monkeypatch.setattr(WorkerServicer, "ReportOutcomes", counted_report)
    monkeypatch.setattr(WorkerServicer, "_grant", counted_grant)

    async def main() -> None:
        server = await _coordinator(store_url)
        worker = Worker(f"127.0.0.1:{server.port}", concurrency=4, shutdown_grace=5)
        ran: list[str] = []

        @worker.handler("noop")
        async def noop() -> str:
            ran.append("x")
            return "ok"

        running = asyncio.create_task(worker.arun())
        try:
            result = await server.engine.enqueue(
                [make_job(job_type="noop", due_at=0) for _ in range(20)]
            )
            for job_id, _, _ in result:
                row = await asyncio.wait_for(server.engine.wait_for_finish(job_id), 30)
                assert JobStatus(row.status) == JobStatus.COMPLETED
        finally:
            await worker.shutdown()
            await running
            await server.stop(0)
        assert len(ran) == 20
        assert unary_reports == []
        # 4 slots ran 20 jobs: the 16 credits after the first grant came with outcomes.
        assert sum(credit_grants) >= 20

    asyncio.run(main())
