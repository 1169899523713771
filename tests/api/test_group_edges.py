"""Job groups at their edges, through the SDK against a real coordinator on
both stores: a retried CreateGroup (with its own idempotency key, or with
members whose keys are stored already) never makes a second group that
completes early."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

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


MANY = 100_000
BATCH = 5_000


def test_cancelling_a_group_of_100k_pending_members_cancels_every_one(target: str) -> None:
    """More members than a statement may carry parameters (65,535 on PostgreSQL)."""
    with SchedulerClient(target, timeout=300) as client, AdminClient(target, timeout=300) as admin:
        group, _ = client.create_group(
            JobRequest("fan-in"), [JobRequest("later") for _ in range(BATCH)]
        )
        for _ in range(MANY // BATCH - 1):
            client.enqueue_batch([JobRequest("later", group_id=group.id) for _ in range(BATCH)])
        assert client.get_group(group.id).pending == MANY
        cancelled, ids = admin.cancel_group(group.id, reason="too many")
        assert len(ids) == len(set(ids)) == MANY
        assert (cancelled.status, cancelled.cancelled, cancelled.pending) == (
            "COMPLETED",
            MANY,
            0,
        )
        [done] = _completions(admin)
        assert cancelled.completion_job_id == done
        assert _health(target) == health_pb2.HealthCheckResponse.SERVING


def _health(target: str) -> int:
    with grpc.insecure_channel(target) as channel:
        request = health_pb2.HealthCheckRequest()
        return health_pb2_grpc.HealthStub(channel).Check(request, timeout=30).status


def test_a_replay_of_a_member_joins_no_group(target: str) -> None:
    with SchedulerClient(target) as client, AdminClient(target) as admin:
        group, [member] = client.create_group(
            JobRequest("fan-in"), [JobRequest("later")], close=True
        )
        admin.cancel_job(member.job_id, reason="enough")
        completed = client.get_group(group.id)
        assert (completed.status, completed.total) == ("COMPLETED", 1)
        replay = admin.replay_job(member.job_id)
        assert replay.group_id == "" and replay.status.name == "PENDING"
        after = client.get_group(group.id)
        assert (after.status, after.total, after.cancelled) == ("COMPLETED", 1, 1)
        assert admin.list_jobs(JobFilter(group_id=group.id), include_total=True).total_count == 1
        # A member of a group still open is replayed outside it as well.
        open_group, [waiting] = client.create_group(JobRequest("fan-in"), [JobRequest("later")])
        assert admin.replay_job(waiting.job_id).group_id == ""
        assert client.get_group(open_group.id).total == 1
