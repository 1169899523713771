"""Job groups end to end: a coordinator and a worker process on both stores,
driven through the SDK and the ``wfjobs`` CLI; and on PostgreSQL a soak with
two replicas, groups created and extended through both, one replica killed
(SIGKILL) while members run, ending with exactly one completion job per group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from wfj_testing import REPO, wait_until
from worker_sdk import (
    AdminClient,
    FailedPreconditionError,
    JobEventFilter,
    JobFilter,
    JobNotFoundError,
    JobRequest,
    SchedulerClient,
)
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc

BIN = Path(sys.executable).parent
SCALE = float(os.environ.get("WFJOBS_FAULTS_SCALE", "1"))


def wfjobs(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), WFJOBS_TARGET=target)
    return subprocess.run(
        [str(BIN / "wfjobs"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def _completions(admin: AdminClient, group_id: str) -> list[Any]:
    key = f"group:{group_id}:completion"
    return [j for j in admin.iter_jobs(JobFilter(job_type="noop")) if j.idempotency_key == key]


def test_a_group_through_the_sdk_and_the_cli(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    target = coordinator.target
    processes["worker"](target)
    with SchedulerClient(target) as client, AdminClient(target) as admin:
        group, members = client.create_group(
            JobRequest("noop"), [JobRequest("noop", {"n": i}) for i in range(3)]
        )
        assert group.status == "OPEN" and group.total == 3 and len(members) == 3
        extra = client.enqueue("noop", {"n": 3}, group_id=group.id)
        assert extra.group_id == group.id
        wait_until(lambda: client.get_group(group.id).completed == 4, 60, "the members to run")
        assert _completions(admin, group.id) == []  # open: more may join
        closed = client.close_group(group.id)
        assert closed.status == "COMPLETED" and closed.completion_job_id
        done = client.wait_for_job(closed.completion_job_id, timeout=60)
        assert done.payload_value() == {
            "group_id": group.id,
            "total": 4,
            "completed": 4,
            "faulted": 0,
            "cancelled": 0,
        }
        with pytest.raises(FailedPreconditionError, match="takes no more members"):
            client.enqueue("noop", group_id=group.id)
        # Events carry the group id; a watch filtered by it sees only the members.
        member_ids = {m.job_id for m in members} | {extra.id}
        watched = wfjobs(
            target,
            "--json",
            "events",
            "watch",
            "--group",
            group.id,
            "--from-oldest",
            "--count",
            "12",
        )
        assert watched.returncode == 0, watched.stderr
        events = [json.loads(line) for line in watched.stdout.splitlines()]
        assert {e["group_id"] for e in events} == {group.id}
        assert {e["job_id"] for e in events} == member_ids
        assert sorted(e["kind"] for e in events) == sorted(
            ["JOB_EVENT_KIND_ENQUEUED", "JOB_EVENT_KIND_STARTED", "JOB_EVENT_KIND_COMPLETED"] * 4
        )
        with client.watch_events(JobEventFilter(job_id=done.id), from_oldest=True) as watch:
            completion_event = next(iter(watch))
        assert completion_event.group_id == ""  # the completion job is no member
        # Operators read the group and list its members through AdminService.
        assert admin.get_group(group.id) == client.get_group(group.id)
        listed = admin.list_jobs(JobFilter(group_id=group.id), include_total=True)
        assert {j.id for j in listed.jobs} == member_ids and listed.total_count == 4
        by_cli = wfjobs(target, "--json", "jobs", "list", "--group", group.id)
        assert {j["id"] for j in json.loads(by_cli.stdout)["jobs"]} == member_ids
        with pytest.raises(JobNotFoundError):
            admin.get_group("0190b6e2-5c1a-7d3e-8f00-123456789abc")
        with pytest.raises(JobNotFoundError):
            client.get_group("0190b6e2-5c1a-7d3e-8f00-123456789abc")

    # The CLI: create, add members (one that waits), cancel the group.
    made = wfjobs(target, "--json", "groups", "create", "noop", '{"done": true}')
    assert made.returncode == 0, made.stderr
    group_id = json.loads(made.stdout)["id"]
    member = wfjobs(target, "enqueue", "cancellable", '{"seconds": 60}', "--group", group_id)
    assert member.returncode == 0, member.stderr
    running_id = member.stdout.split()[0]
    later = wfjobs(target, "enqueue", "noop", "--group", group_id, "--delay", "1h")
    assert later.returncode == 0, later.stderr
    with AdminClient(target) as admin:
        wait_until(
            lambda: admin.get_job(running_id).status.name == "RUNNING", 60, "the member to run"
        )
        cancelled = wfjobs(target, "groups", "cancel", group_id, "--reason", "enough")
        assert cancelled.returncode == 0, cancelled.stderr
        assert "cancelled 1 pending member(s)" in cancelled.stdout
        shown = wfjobs(target, "groups", "show", group_id)
        assert "status          closed" in shown.stdout, shown.stdout
        refused = wfjobs(target, "enqueue", "noop", "--group", group_id)
        assert refused.returncode != 0 and "takes no more members" in refused.stderr
        assert _completions(admin, group_id) == []  # a member still runs
        admin.cancel_job(running_id, reason="stop")  # its handler stops: the group completes
        wait_until(lambda: _completions(admin, group_id), 60, "the completion job")
        [done] = _completions(admin, group_id)
        assert done.payload_value() == {"done": True}
    shown = wfjobs(target, "--json", "groups", "show", group_id)
    data = json.loads(shown.stdout)
    assert (data["status"], data["cancelled"], data["completion_job_id"]) == (
        "COMPLETED",
        2,
        done.id,
    )


@pytest.fixture
def pg_url(pg_database: str):
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_groups")
    yield url
    drop()


GROUPS = int(12 * SCALE)
MEMBERS = 8
SECONDS = 1.5


def test_groups_over_two_replicas_one_killed_complete_once_each(
    pg_url: str, processes: dict[str, Callable[..., Any]], tmp_path: Path
) -> None:
    first = processes["coordinator"](pg_url)
    second = processes["coordinator"](pg_url)
    processes["worker"](first.target, "--concurrency", "20")
    processes["worker"](second.target, "--concurrency", "20")
    member = {"job_type": "sleep", "heartbeat_timeout": 2.0}
    ids: list[str] = []
    with SchedulerClient(first.target) as one, SchedulerClient(second.target) as two:
        clients = [one, two]
        for n in range(GROUPS):
            creator, other = clients[n % 2], clients[(n + 1) % 2]
            closed = n % 3 == 0
            group, _ = creator.create_group(
                JobRequest("noop"),
                [JobRequest(payload={"seconds": SECONDS}, **member) for _ in range(MEMBERS // 2)],
                close=False,
            )
            # The rest join through the other replica, in one batch and one by one.
            other.enqueue_batch(
                [
                    JobRequest(payload={"seconds": SECONDS}, group_id=group.id, **member)
                    for _ in range(MEMBERS // 4)
                ]
            )
            for _ in range(MEMBERS - MEMBERS // 2 - MEMBERS // 4):
                other.enqueue(payload={"seconds": SECONDS}, group_id=group.id, **member)
            if closed:
                creator.close_group(group.id)
            ids.append(group.id)
        # Kill one replica while members run on both: some have completed and the
        # killed replica's worker holds leases, so some members must be reclaimed
        # (a kill between its batches proves nothing). Members sleep long enough
        # (1.5 s) that leases are still held when the first completions show,
        # however busy the machine.
        with grpc.insecure_channel(first.target) as channel:
            workers = apb_grpc.AdminServiceStub(channel)

            def first_replica_leases() -> bool:
                listed = workers.ListWorkers(apb.ListWorkersRequest(), timeout=30).workers
                return any(w.in_flight_job_ids for w in listed)

            def mid_way() -> bool:
                return first_replica_leases() and any(two.get_group(g).completed for g in ids)

            wait_until(
                mid_way, 120, "a completed member and the first replica's worker holding leases"
            )
            first.kill()
        for group_id in ids:
            two.close_group(group_id)

        def all_completed() -> bool:
            return all(two.get_group(g).status == "COMPLETED" for g in ids)

        wait_until(all_completed, 180 * max(1.0, SCALE), "every group to complete")
    stub_channel = grpc.insecure_channel(second.target)
    stub = spb_grpc.JobSchedulerServiceStub(stub_channel)
    with AdminClient(second.target) as admin:
        for group_id in ids:
            group = stub.GetGroup(spb.GetGroupRequest(group_id=group_id), timeout=30).group
            assert group.total == MEMBERS
            assert group.pending == group.running == 0
            completions = _completions(admin, group_id)
            assert [c.id for c in completions] == [group.completion_job_id], group_id
            assert completions[0].payload_value()["total"] == MEMBERS
        # The kill mattered: members leased through the killed replica were
        # reclaimed when their lease expired and ran again.
        members = list(admin.iter_jobs(JobFilter(job_type="sleep")))
        assert len(members) == GROUPS * MEMBERS
        assert any(m.attempt > 1 for m in members)
    stub_channel.close()
