"""Resending an outcome over gRPC after a lost answer: CompleteJob, FailJob and
ReportOutcomes answer OK with already_recorded; a token that never recorded
that outcome is still FAILED_PRECONDITION. A real coordinator, both stores."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from wfj_testing import Coordinator
from workflowjobs.v1 import (
    job_pb2,
    scheduler_service_pb2,
    scheduler_service_pb2_grpc,
    worker_service_pb2_grpc,
)
from workflowjobs.v1 import worker_service_pb2 as wpb


def test_resent_outcomes_are_already_recorded(database: str, tmp_path: Path) -> None:
    coordinator = Coordinator(database, tmp_path / "c.log")
    try:
        with grpc.insecure_channel(coordinator.target) as channel:
            scheduler = scheduler_service_pb2_grpc.JobSchedulerServiceStub(channel)
            worker = worker_service_pb2_grpc.WorkerServiceStub(channel)

            def leased() -> tuple[str, str]:
                answer = scheduler.Enqueue(
                    scheduler_service_pb2.EnqueueRequest(
                        job=job_pb2.JobSpec(job_type="noop", tenant_id="t"),
                        inline=scheduler_service_pb2.InlineExecution(worker_id="inline"),
                    )
                )
                return answer.job.id, answer.lease_token

            job_id, token = leased()
            complete = wpb.CompleteJobRequest(job_id=job_id, lease_token=token)
            assert not worker.CompleteJob(complete).already_recorded
            assert worker.CompleteJob(complete).already_recorded
            with pytest.raises(grpc.RpcError) as stale:
                worker.FailJob(wpb.FailJobRequest(job_id=job_id, lease_token=token, error="x"))
            assert stale.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "lease lost" in stale.value.details()

            job_id, token = leased()
            fail = wpb.FailJobRequest(job_id=job_id, lease_token=token, error="boom")
            first = worker.FailJob(fail)
            again = worker.FailJob(fail)
            assert (first.already_recorded, again.already_recorded) == (False, True)
            assert again.status == job_pb2.JOB_STATUS_PENDING

            job_id, token = leased()
            release = wpb.ReportOutcomesRequest(
                outcomes=[wpb.JobOutcome(job_id=job_id, lease_token=token, released=wpb.Release())]
            )
            [first] = worker.ReportOutcomes(release).results
            [again] = worker.ReportOutcomes(release).results
            assert (first.accepted, first.already_recorded) == (True, False)
            assert (again.accepted, again.already_recorded) == (True, True)
            [wrong] = worker.ReportOutcomes(
                wpb.ReportOutcomesRequest(
                    outcomes=[
                        wpb.JobOutcome(job_id=job_id, lease_token="other", released=wpb.Release())
                    ]
                )
            ).results
            assert not wrong.accepted and wrong.error_code == "FAILED_PRECONDITION"
    finally:
        coordinator.stop()
