"""Job groups at their edges, through the SDK against a real coordinator on
both stores: a retried CreateGroup (with its own idempotency key, or with
members whose keys are stored already) never makes a second group that
completes early."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wfj_testing import Coordinator
from worker_sdk import (
    AdminClient,
    FailedPreconditionError,
    JobFilter,
    JobRequest,
    SchedulerClient,
)


@pytest.fixture
def target(database: str, tmp_path: Path) -> Iterator[str]:
    coordinator = Coordinator(database, tmp_path / "coordinator.log")
    try:
        yield coordinator.target
    finally:
        coordinator.stop()


def _completions(admin: AdminClient) -> list[str]:
    return [j.id for j in admin.iter_jobs(JobFilter(job_type="fan-in"))]


def test_a_retried_create_group_with_a_key_returns_the_same_group(target: str) -> None:
    members = [JobRequest("later", idempotency_key="m-1"), JobRequest("later", {"n": 2})]
    with SchedulerClient(target) as client, AdminClient(target) as admin:
        group, first = client.create_group(
            JobRequest("fan-in"), members, close=True, idempotency_key="batch-7"
        )
        assert [r.deduplicated for r in first] == [False, False]
        # The answer was lost; the client sends the same call again (twice).
        for _ in range(2):
            again, results = client.create_group(
                JobRequest("fan-in"), members, close=True, idempotency_key="batch-7"
            )
            assert again.id == group.id and again.status == "CLOSED" and again.total == 2
            assert [r.job_id for r in results] == [r.job_id for r in first]
            assert [(r.deduplicated, r.status.name) for r in results] == [(True, "PENDING")] * 2
        assert admin.list_jobs(JobFilter(job_type="later"), include_total=True).total_count == 2
        assert _completions(admin) == []  # its members are pending: nothing completed
        # The key is the tenant's: another tenant's call with it is a group of its own.
        other, _ = client.create_group(
            JobRequest("fan-in", tenant_id="tenant-b"),
            tenant_id="tenant-b",
            idempotency_key="batch-7",
        )
        assert other.id != group.id and other.tenant_id == "tenant-b"
        # Cancelling the members completes the one group once.
        admin.cancel_group(group.id)
        [done] = _completions(admin)
        assert client.get_group(group.id).completion_job_id == done


def test_a_member_whose_key_names_a_job_outside_the_group_is_refused(target: str) -> None:
    members = [JobRequest("later", idempotency_key="m-1"), JobRequest("later", {"n": 2})]
    with SchedulerClient(target) as client, AdminClient(target) as admin:
        group, _ = client.create_group(JobRequest("fan-in"), members, close=True)
        # A retry without a group key: its keyed member is stored (in the first
        # group), so the call is refused whole rather than making a second group
        # that lacks it, and nothing of it is stored.
        with pytest.raises(FailedPreconditionError, match="members\\[0\\]: idempotency key 'm-1'"):
            client.create_group(JobRequest("fan-in"), members, close=True)
        with pytest.raises(FailedPreconditionError, match="not a member of job group"):
            client.create_group(JobRequest("fan-in"), members[:1], close=True)
        assert _completions(admin) == []  # no empty group completed
        assert admin.list_jobs(JobFilter(job_type="later"), include_total=True).total_count == 2
        # Joining an open group with a stored job's key is refused the same way.
        open_group, _ = client.create_group(JobRequest("fan-in"))
        with pytest.raises(FailedPreconditionError, match="not a member of job group"):
            client.enqueue("later", idempotency_key="m-1", group_id=open_group.id)
        assert client.get_group(open_group.id).total == 0
        # The same member sent again to its own group is its own answer.
        again = client.enqueue("later", idempotency_key="joined", group_id=open_group.id)
        assert client.enqueue("later", idempotency_key="joined", group_id=open_group.id).id == (
            again.id
        )
        assert client.get_group(open_group.id).total == 1
        assert client.get_group(group.id).total == 2
