"""Job type defaults over real gRPC, through the SDK's AdminClient."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from wfj_testing import Coordinator
from worker_sdk import (
    AdminClient,
    InvalidArgumentError,
    JobTypeDefaults,
    RetryPolicy,
    SchedulerClient,
)


def test_set_list_and_apply_defaults(tmp_path: Path) -> None:
    coordinator = Coordinator(f"sqlite:///{tmp_path / 'defaults.db'}", tmp_path / "c.log")
    try:
        with AdminClient(coordinator.target) as admin, SchedulerClient(coordinator.target) as sched:
            admin.set_job_type_defaults(
                "report", retry_policy=RetryPolicy(max_attempts=9), execution_timeout=120
            )
            [listed] = admin.list_job_type_defaults()
            assert listed == JobTypeDefaults(
                "report",
                retry_policy=RetryPolicy(max_attempts=9),
                execution_timeout=timedelta(seconds=120),
            )
            job = sched.enqueue("report", {"month": 11})
            assert job.max_attempts == 9
            try:
                admin.set_job_type_defaults("", execution_timeout=1)
            except InvalidArgumentError as e:
                assert "job_type is required" in str(e)
            else:
                raise AssertionError("an empty job type was accepted")
            admin.set_job_type_defaults("report")
            assert admin.list_job_type_defaults() == []
    finally:
        coordinator.stop()


def test_ordering_failure_policy_is_set_listed_and_fixed_on_jobs(tmp_path: Path) -> None:
    from workflowjobs.v1 import admin_service_pb2 as apb

    coordinator = Coordinator(f"sqlite:///{tmp_path / 'ordering.db'}", tmp_path / "c.log")
    try:
        with AdminClient(coordinator.target) as admin, SchedulerClient(coordinator.target) as sched:
            admin.set_job_type_defaults("step", ordering_failure="skip")
            [listed] = admin.list_job_type_defaults()
            assert listed.ordering_failure == "skip"
            assert listed.raw is not None
            assert listed.raw.ordering_failure == apb.ORDERING_FAILURE_SKIP
            job = sched.enqueue("step", {}, ordering_key="inst-1")
            assert job.ordering_key == "inst-1"
            assert sched.get_job(job.id).ordering_key == "inst-1"
            try:
                admin.set_job_type_defaults("step", ordering_failure="sometimes")
            except ValueError as e:
                assert "expected one of: block, skip" in str(e)
            else:
                raise AssertionError("an unknown policy was accepted")
    finally:
        coordinator.stop()
