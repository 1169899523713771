"""The SDK's outcome reporter against a real coordinator (gRPC server, engine,
store on both dialects, in this process): per-outcome answers, a batch split
on a persistent server error, and an outcome given up after a bounded time."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import pytest
import sqlalchemy as sa

from coordinator.api.server import CoordinatorServer
from coordinator.engine import Engine
from coordinator.model import JobStatus
from coordinator.store import open_store
from wfj_testing import make_job
from worker_sdk._outcomes import OutcomeReporter, ReporterConfig
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


def _run(url: str, scenario: Any) -> None:
    async def main() -> None:
        server = await _coordinator(url)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        reporter = OutcomeReporter(
            worker_service_pb2_grpc.WorkerServiceStub(channel),
            config=FAST,
            logger=logging.getLogger("worker_sdk.outcomes"),
        )
        reporter.start()
        try:
            await scenario(server, reporter)
        finally:
            await reporter.close()
            await channel.close()
            await server.stop(0)

    asyncio.run(main())


def test_a_poisoned_job_is_answered_on_its_own_and_its_neighbours_recorded(
    store_url: str, caplog: pytest.LogCaptureFixture
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
        assert f"outcome of job {poisoned} not recorded" in caplog.text
        assert "stored data is unusable" in caplog.text

    _run(store_url, scenario)


def test_a_batch_failing_with_internal_is_split_and_the_bad_outcome_given_up(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(server: CoordinatorServer, reporter: OutcomeReporter) -> None:
        leased = await _leased(server, 5)
        doomed = leased[2][0]
        engine = server.engine
        report = engine.report
        calls: list[int] = []

        # A coordinator fault that one outcome triggers, whatever batch carries
        # it: ReportOutcomes answers INTERNAL for the whole call.
        async def faulty_report(outcomes: Any) -> Any:
            calls.append(len(outcomes))
            if any(o.job_id == doomed for o in outcomes):
                raise RuntimeError("engine fault on one outcome")
            return await report(outcomes)

        engine.report = faulty_report  # type: ignore[method-assign]
        for job_id, token in leased:
            reporter.submit(_completed(job_id, token))
        with caplog.at_level(logging.WARNING, logger="worker_sdk.outcomes"):
            # Bounded: the reporter ends on its own, well before this timeout.
            assert await reporter.flush(timeout=30)
        for job_id, _ in leased:
            expected = JobStatus.RUNNING if job_id == doomed else JobStatus.COMPLETED
            assert await _status(server, job_id) == expected
        assert calls[0] == 5 and sorted(calls).count(5) == 1  # split after the first failure
        gave_up = [r for r in caplog.records if "gave up reporting" in r.getMessage()]
        assert len(gave_up) == 1 and gave_up[0].levelno == logging.ERROR
        assert doomed in gave_up[0].getMessage()
        assert reporter.backlog == 0 and reporter.unreported() == []

    _run(store_url, scenario)
