"""Operator verbs over raw gRPC, on a real coordinator and both stores: run a
scheduled job now (RunJobNow), set a FAULTED job aside with CancelJob, purge
finished jobs by filter (PurgeJobs) and list job groups (ListGroups)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from wfj_testing import Coordinator
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import (
    admin_service_pb2_grpc,
    job_pb2,
    scheduler_service_pb2,
    scheduler_service_pb2_grpc,
    worker_service_pb2_grpc,
)
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import worker_service_pb2 as wpb


@pytest.fixture
def coordinator(database: str, tmp_path: Path) -> Iterator[Coordinator]:
    c = Coordinator(database, tmp_path / "coordinator.log")
    try:
        yield c
    finally:
        c.stop()


class Stubs:
    def __init__(self, channel: grpc.Channel) -> None:
        self.scheduler = scheduler_service_pb2_grpc.JobSchedulerServiceStub(channel)
        self.admin = admin_service_pb2_grpc.AdminServiceStub(channel)
        self.worker = worker_service_pb2_grpc.WorkerServiceStub(channel)

    def enqueue(self, job_type: str = "noop", **spec: object) -> str:
        job = job_pb2.JobSpec(job_type=job_type, tenant_id=str(spec.pop("tenant_id", "t")), **spec)  # type: ignore[arg-type]
        return self.scheduler.Enqueue(scheduler_service_pb2.EnqueueRequest(job=job)).job.id

    def job(self, job_id: str) -> job_pb2.Job:
        return self.scheduler.GetJob(scheduler_service_pb2.GetJobRequest(job_id=job_id)).job

    def events(self, job_id: str) -> list[int]:
        watch = self.scheduler.WatchJobEvents(
            spb.WatchJobEventsRequest(filter=spb.JobEventFilter(job_id=job_id), from_oldest=True),
            timeout=3,
        )
        kinds: list[int] = []
        try:
            for answer in watch:
                kinds.extend(e.kind for e in answer.events)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED, err
        return kinds


@pytest.fixture
def stubs(coordinator: Coordinator) -> Iterator[Stubs]:
    with grpc.insecure_channel(coordinator.target) as channel:
        yield Stubs(channel)


def _faulted(stubs: Stubs, **spec: object) -> str:
    """A job leased by a raw worker stream and failed for good (not retryable)."""
    job_id = stubs.enqueue("poison", **spec)
    done = threading.Event()

    def requests() -> Iterator[wpb.AcquireJobsRequest]:
        hello = wpb.WorkerHello(worker_id="raw", job_types=["poison"], slots=1)
        yield wpb.AcquireJobsRequest(hello=hello)
        yield wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=1))
        done.wait(30)

    stream = stubs.worker.AcquireJobs(requests(), timeout=30)
    try:
        leased = next(a.jobs.jobs[0] for a in stream if a.WhichOneof("kind") == "jobs")
        assert leased.job.id == job_id
        stubs.worker.FailJob(
            wpb.FailJobRequest(
                job_id=job_id, lease_token=leased.lease_token, error="poison", non_retryable=True
            )
        )
    finally:
        done.set()
        stream.cancel()
    assert stubs.job(job_id).status == job_pb2.JOB_STATUS_FAULTED
    return job_id


# -- RunJobNow ---------------------------------------------------------------------------


def test_run_now_makes_a_scheduled_job_due_and_records_it(stubs: Stubs) -> None:
    due = Timestamp()
    due.FromSeconds(int(time.time()) + 3600)
    job_id = stubs.enqueue(due_time=due)
    before = stubs.job(job_id)
    assert before.due_time.ToSeconds() > before.create_time.ToSeconds() + 3000
    job = stubs.admin.RunJobNow(apb.RunJobNowRequest(job_id=job_id)).job
    assert job.status == job_pb2.JOB_STATUS_PENDING
    assert job.due_time.ToMicroseconds() < before.due_time.ToMicroseconds() - 3_000_000_000
    assert stubs.job(job_id).due_time == job.due_time
    # Once due, a second call answers the job unchanged and records nothing more.
    again = stubs.admin.RunJobNow(apb.RunJobNowRequest(job_id=job_id)).job
    assert again.due_time == job.due_time
    kinds = stubs.events(job_id)
    assert kinds == [spb.JOB_EVENT_KIND_ENQUEUED, spb.JOB_EVENT_KIND_RESCHEDULED], kinds
    explained = stubs.admin.ExplainJob(apb.ExplainJobRequest(job_id=job_id))
    assert apb.WaitReason.KIND_NOT_DUE not in [r.kind for r in explained.reasons]


def test_run_now_refuses_a_job_that_is_not_pending_naming_its_state(stubs: Stubs) -> None:
    job_id = _faulted(stubs)
    with pytest.raises(grpc.RpcError) as refused:
        stubs.admin.RunJobNow(apb.RunJobNowRequest(job_id=job_id))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"job {job_id} is FAULTED" in str(refused.value.details())
    with pytest.raises(grpc.RpcError) as unknown:
        stubs.admin.RunJobNow(apb.RunJobNowRequest(job_id="0190b6e2-5c1a-7d3e-8f00-123456789abc"))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as malformed:
        stubs.admin.RunJobNow(apb.RunJobNowRequest(job_id="nope"))
    assert malformed.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# -- CancelJob of a FAULTED job ----------------------------------------------------------


def test_cancel_sets_a_faulted_ordering_head_aside_and_frees_its_key(stubs: Stubs) -> None:
    head = _faulted(stubs, ordering_key="k")
    behind = stubs.enqueue(ordering_key="k")
    reasons = stubs.admin.ExplainJob(apb.ExplainJobRequest(job_id=behind)).reasons
    [ordering] = [r for r in reasons if r.kind == apb.WaitReason.KIND_ORDERING]
    assert f"`wfjobs jobs cancel {head}`" in ordering.message, ordering.message
    job = stubs.admin.CancelJob(apb.CancelJobRequest(job_id=head, reason="poison")).job
    assert job.status == job_pb2.JOB_STATUS_CANCELLED
    assert job.cancel_reason == "poison"
    assert stubs.events(head)[-1] == spb.JOB_EVENT_KIND_CANCELLED
    # The key's next job is no longer held behind it.
    reasons = stubs.admin.ExplainJob(apb.ExplainJobRequest(job_id=behind)).reasons
    assert apb.WaitReason.KIND_ORDERING not in [r.kind for r in reasons], reasons
    # A finished job other than FAULTED is still refused, naming its state.
    with pytest.raises(grpc.RpcError) as refused:
        stubs.admin.CancelJob(apb.CancelJobRequest(job_id=head))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"job {head} is CANCELLED; only PENDING or RUNNING or FAULTED" in str(
        refused.value.details()
    )


# -- PurgeJobs ---------------------------------------------------------------------------


def test_purge_deletes_finished_matches_and_keeps_live_and_key_holding_jobs(stubs: Stubs) -> None:
    faulted = [_faulted(stubs) for _ in range(3)]
    holding = _faulted(stubs, ordering_key="k")
    cancelled = stubs.enqueue()
    stubs.admin.CancelJob(apb.CancelJobRequest(job_id=cancelled))
    pending = stubs.enqueue()
    other_tenant = _faulted(stubs, tenant_id="other")
    flt = apb.JobFilter(tenant_id="t")
    dry = stubs.admin.PurgeJobs(apb.PurgeJobsRequest(filter=flt, dry_run=True))
    assert (dry.matched, dry.deleted, dry.kept) == (4, 0, 1)
    assert stubs.job(faulted[0]).status == job_pb2.JOB_STATUS_FAULTED  # a dry run deletes nothing
    done = stubs.admin.PurgeJobs(apb.PurgeJobsRequest(filter=flt))
    assert (done.matched, done.deleted, done.kept) == (4, 4, 1)
    for gone in [*faulted, cancelled]:
        with pytest.raises(grpc.RpcError) as missing:
            stubs.job(gone)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert stubs.job(pending).status == job_pb2.JOB_STATUS_PENDING
    assert stubs.job(holding).status == job_pb2.JOB_STATUS_FAULTED
    assert stubs.job(other_tenant).status == job_pb2.JOB_STATUS_FAULTED
    # Set aside, the key's head is purged like any finished job.
    stubs.admin.CancelJob(apb.CancelJobRequest(job_id=holding))
    again = stubs.admin.PurgeJobs(apb.PurgeJobsRequest(filter=flt))
    assert (again.matched, again.deleted, again.kept) == (1, 1, 0)


def test_purge_refuses_live_statuses_in_its_filter(stubs: Stubs) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        stubs.admin.PurgeJobs(
            apb.PurgeJobsRequest(
                filter=apb.JobFilter(statuses=[job_pb2.JOB_STATUS_PENDING]), dry_run=True
            )
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "filter.statuses has PENDING" in str(refused.value.details())


# -- ListGroups --------------------------------------------------------------------------


def _group(stubs: Stubs, members: int, close: bool, tenant: str = "t") -> str:
    answer = stubs.scheduler.CreateGroup(
        spb.CreateGroupRequest(
            tenant_id=tenant,
            completion=job_pb2.JobSpec(job_type="summary", tenant_id=tenant),
            members=[job_pb2.JobSpec(job_type="noop", tenant_id=tenant) for _ in range(members)],
            close=close,
        )
    )
    return answer.group.id


def test_list_groups_pages_newest_first_with_counts_and_filters(stubs: Stubs) -> None:
    ids = [_group(stubs, members=n + 1, close=False) for n in range(5)]
    completed = _group(stubs, members=0, close=True)
    _group(stubs, members=1, close=False, tenant="other")
    first = stubs.admin.ListGroups(apb.ListGroupsRequest(tenant_id="t", page_size=4))
    assert [g.id for g in first.groups] == [completed, *reversed(ids)][:4]
    assert first.next_page_token
    rest = stubs.admin.ListGroups(
        apb.ListGroupsRequest(tenant_id="t", page_size=4, page_token=first.next_page_token)
    )
    assert [g.id for g in rest.groups] == ids[:2][::-1]
    assert rest.next_page_token == ""
    by_id = {g.id: g for g in [*first.groups, *rest.groups]}
    assert [(by_id[i].total, by_id[i].pending) for i in ids] == [(n, n) for n in range(1, 6)]
    done = by_id[completed]
    assert done.status == job_pb2.JOB_GROUP_STATUS_COMPLETED and done.completion_job_id
    only_completed = stubs.admin.ListGroups(
        apb.ListGroupsRequest(statuses=[job_pb2.JOB_GROUP_STATUS_COMPLETED])
    )
    assert [g.id for g in only_completed.groups] == [completed]
    everyone = stubs.admin.ListGroups(apb.ListGroupsRequest())
    assert len(everyone.groups) == 7
    with pytest.raises(grpc.RpcError) as bad:
        stubs.admin.ListGroups(apb.ListGroupsRequest(page_token="bogus"))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as bad:
        stubs.admin.ListGroups(apb.ListGroupsRequest(statuses=[7]))  # type: ignore[list-item]
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# -- ListJobs failed_after ---------------------------------------------------------------


def test_failed_after_lists_the_jobs_of_the_failures_get_stats_counts_retried_or_not(
    stubs: Stubs,
) -> None:
    first, second = _faulted(stubs, tenant_id="fl"), _faulted(stubs, tenant_id="fl")
    stubs.enqueue(tenant_id="fl")  # never failed
    stubs.admin.RetryJob(apb.RetryJobRequest(job_id=first))
    stats = stubs.admin.GetStats(apb.GetStatsRequest(tenant_id="fl"))
    assert stats.failures_in_window == 2
    # The window the count read: read_time minus the default five minutes.
    start = Timestamp()
    start.FromMicroseconds(stats.read_time.ToMicroseconds() - 5 * 60 * 1_000_000)

    def listed(after: Timestamp, *statuses: int) -> set[str]:
        flt = apb.JobFilter(tenant_id="fl", failed_after=after, statuses=statuses)
        return {j.id for j in stubs.admin.ListJobs(apb.ListJobsRequest(filter=flt)).jobs}

    assert stubs.job(first).status == job_pb2.JOB_STATUS_PENDING
    assert listed(start) == {first, second}
    # With the other fields like any filter field: of them, the one still faulted.
    assert listed(start, job_pb2.JOB_STATUS_FAULTED) == {second}
    # Failed at or after: the last failure's own end time keeps it, a moment past drops it.
    job = stubs.admin.GetJob(apb.AdminServiceGetJobRequest(job_id=second)).job
    ended = max(a.end_time.ToMicroseconds() for a in job.attempts)
    at, past = Timestamp(), Timestamp()
    at.FromMicroseconds(ended)
    past.FromMicroseconds(stats.read_time.ToMicroseconds() + 1)
    assert second in listed(at)
    assert listed(past) == set()
    # A bad time is refused naming the field.
    with pytest.raises(grpc.RpcError) as refused:
        listed(Timestamp(seconds=-(10**12)))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "failed_after" in str(refused.value.details())
