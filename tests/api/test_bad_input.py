"""Bad input over real gRPC gets a deliberate status and a message that says
what to fix, and the coordinator keeps serving."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from wfj_testing import Coordinator
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

UNKNOWN_ID = "0190b6e2-5c1a-7d3e-8f00-123456789abc"


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[grpc.Channel]:
    tmp: Path = tmp_path_factory.mktemp("api")
    coordinator = Coordinator(f"sqlite:///{tmp / 'api.db'}", tmp / "coordinator.log")
    ch = grpc.insecure_channel(coordinator.target)
    try:
        yield ch
    finally:
        ch.close()
        coordinator.stop()


def code_of(call, *args) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call(*args, timeout=10)
    return info.value.code(), info.value.details()


def spec(**fields) -> jpb.JobSpec:
    base = {"job_type": "noop", "tenant_id": "t", "payload": jpb.Payload(data=b"{}")}
    base.update(fields)
    return jpb.JobSpec(**base)


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (spec(job_type=""), "job_type is required"),
        (spec(tenant_id=""), "tenant_id is required"),
        (spec(payload=jpb.Payload(data=b"x" * (1024 * 1024 + 1))), "payload is 1048577 bytes"),
        (spec(category=99), "category 99 is not a known JobCategory"),
        (spec(job_type="x" * 600), "job_type is 600 characters long"),
        (spec(job_type="mail,sms"), "job_type 'mail,sms' contains ','"),
        (spec(job_type=" mail"), "job_type ' mail' starts or ends with whitespace"),
        (spec(retry_policy=jpb.RetryPolicy(max_attempts=-1)), "max_attempts must be between 1"),
        (spec(retry_policy=jpb.RetryPolicy(jitter=2)), "jitter must be between 0 and 1"),
    ],
)
def test_enqueue_rejects_bad_specs(channel: grpc.Channel, job, expected: str) -> None:
    stub = spb_grpc.JobSchedulerServiceStub(channel)
    code, details = code_of(stub.Enqueue, spb.EnqueueRequest(job=job))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert expected in details


def test_job_type_names_the_cli_could_not_list_are_refused_everywhere(
    channel: grpc.Channel,
) -> None:
    """The CLI and the dashboard take job types comma-separated and trimmed: a
    name with a comma or surrounding whitespace is refused wherever it is named."""
    admin = apb_grpc.AdminServiceStub(channel)
    code, details = code_of(
        admin.SetJobTypeDefaults,
        apb.SetJobTypeDefaultsRequest(defaults=apb.JobTypeDefaults(job_type="a,b")),
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "defaults.job_type 'a,b' contains ','" in details
    worker = wpb_grpc.WorkerServiceStub(channel)
    hello = wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="w-comma", job_types=["a,b"]))
    with pytest.raises(grpc.RpcError) as info:
        list(worker.AcquireJobs(iter([hello]), timeout=10))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "hello.job_types entry 'a,b' contains ','" in info.value.details()


def test_batch_with_one_bad_job_stores_nothing(channel: grpc.Channel) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    admin = apb_grpc.AdminServiceStub(channel)
    before = admin.GetStats(apb.GetStatsRequest(tenant_id="atomic")).pending
    request = spb.EnqueueBatchRequest(jobs=[spec(tenant_id="atomic"), spec(job_type="")])
    code, _ = code_of(scheduler.EnqueueBatch, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert admin.GetStats(apb.GetStatsRequest(tenant_id="atomic")).pending == before


def test_unknown_and_malformed_job_ids(channel: grpc.Channel) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    code, details = code_of(scheduler.GetJob, spb.GetJobRequest(job_id=UNKNOWN_ID))
    assert (code, details) == (grpc.StatusCode.NOT_FOUND, f"job {UNKNOWN_ID} not found")
    code, details = code_of(scheduler.GetJob, spb.GetJobRequest(job_id="12; drop table"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "malformed" in details
    code, _ = code_of(scheduler.GetJob, spb.GetJobRequest(job_id=""))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_stale_lease_token_is_rejected_and_changes_nothing(channel: grpc.Channel) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    worker = wpb_grpc.WorkerServiceStub(channel)
    job = scheduler.Enqueue(spb.EnqueueRequest(job=spec(job_type="stale-test"))).job
    received = threading.Event()

    def requests():
        yield wpb.AcquireJobsRequest(
            hello=wpb.WorkerHello(worker_id="w-stale", job_types=["stale-test"])
        )
        yield wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=1))
        # Closing the request side means "drain": keep it open until the job arrives.
        received.wait(10)

    stream = worker.AcquireJobs(requests(), timeout=10)
    leased = None
    for message in stream:
        if message.WhichOneof("kind") == "jobs":
            leased = message.jobs.jobs[0]
            break
    assert leased is not None and leased.job.id == job.id
    before = scheduler.GetJob(spb.GetJobRequest(job_id=job.id, include_attempts=True)).job
    code, details = code_of(
        worker.CompleteJob, wpb.CompleteJobRequest(job_id=job.id, lease_token="stale")
    )
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert "lease lost" in details
    code, _ = code_of(worker.FailJob, wpb.FailJobRequest(job_id=job.id, lease_token="stale"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    [status] = worker.Heartbeat(
        wpb.HeartbeatRequest(
            worker_id="w", leases=[wpb.LeaseRef(job_id=job.id, lease_token="stale")]
        )
    ).leases
    assert status.state == wpb.LEASE_STATE_LOST
    after = scheduler.GetJob(spb.GetJobRequest(job_id=job.id, include_attempts=True)).job
    assert after == before
    # The real token still works (while the stream is open: a closing stream may
    # hand back a job whose delivery it could not confirm).
    worker.CompleteJob(wpb.CompleteJobRequest(job_id=job.id, lease_token=leased.lease_token))
    received.set()
    stream.cancel()
    done = scheduler.GetJob(spb.GetJobRequest(job_id=job.id)).job
    assert done.status == jpb.JOB_STATUS_COMPLETED


def test_negative_credits_and_missing_hello(channel: grpc.Channel) -> None:
    worker = wpb_grpc.WorkerServiceStub(channel)
    hello = wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="w-neg", job_types=["noop"]))
    bad_credit = wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=-5))
    with pytest.raises(grpc.RpcError) as info:
        list(worker.AcquireJobs(iter([hello, bad_credit]), timeout=10))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "credits must be >= 0" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        list(worker.AcquireJobs(iter([bad_credit]), timeout=10))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "WorkerHello" in info.value.details()


def test_job_types_filter_lists_any_of_them_and_refuses_bad_entries(
    channel: grpc.Channel,
) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    admin = apb_grpc.AdminServiceStub(channel)
    ids = {
        t: scheduler.Enqueue(
            spb.EnqueueRequest(job=spec(job_type=t, tenant_id="types")), timeout=10
        ).job.id
        for t in ("mail", "sms", "push")
    }
    listed = admin.ListJobs(
        apb.ListJobsRequest(filter=apb.JobFilter(tenant_id="types", job_types=["mail", "push"])),
        timeout=10,
    )
    assert [j.id for j in listed.jobs] == sorted([ids["mail"], ids["push"]])
    code, details = code_of(
        admin.ListJobs, apb.ListJobsRequest(filter=apb.JobFilter(job_types=["mail", ""]))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "empty job type" in details
    code, details = code_of(
        admin.BulkCancelJobs,
        apb.BulkCancelJobsRequest(filter=apb.JobFilter(job_types=[f"t{i}" for i in range(101)])),
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "at most 100" in details


def test_bad_page_token_and_pause_scope(channel: grpc.Channel) -> None:
    admin = apb_grpc.AdminServiceStub(channel)
    code, details = code_of(admin.ListJobs, apb.ListJobsRequest(page_token="garbage"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "page_token" in details
    code, details = code_of(admin.Pause, apb.PauseRequest(scope=apb.PauseScope(kind=42)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "scope.kind" in details
    code, _ = code_of(
        admin.Unpause,
        apb.UnpauseRequest(
            scope=apb.PauseScope(kind=apb.PAUSE_SCOPE_KIND_TENANT, tenant_id="nope")
        ),
    )
    assert code == grpc.StatusCode.NOT_FOUND


def _rate(**fields) -> apb.RateLimit:
    from google.protobuf import duration_pb2

    base = {
        "kind": apb.LIMIT_SCOPE_KIND_JOB_TYPE,
        "value": "noop",
        "starts": 10,
        "period": duration_pb2.Duration(seconds=1),
    }
    base.update(fields)
    return apb.RateLimit(**base)


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (_rate(kind=0), "limit.kind must be TENANT"),
        (_rate(kind=42), "limit.kind must be TENANT"),
        (_rate(value=""), "limit.value is required"),
        (_rate(starts=0), "limit.starts must be > 0"),
        (_rate(period=None), "limit.period must be at least one millisecond"),
        (_rate(burst=-1), "limit.burst must be >= 1"),
        (_rate(kind=apb.LIMIT_SCOPE_KIND_CATEGORY, value="nope"), "nope"),
    ],
)
def test_bad_rate_limits_are_invalid_argument(channel: grpc.Channel, limit, expected) -> None:
    admin = apb_grpc.AdminServiceStub(channel)
    code, details = code_of(admin.SetRateLimit, apb.SetRateLimitRequest(limit=limit))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert expected in details
    code, details = code_of(admin.RemoveRateLimit, apb.RemoveRateLimitRequest(kind=0, value="noop"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "kind must be TENANT" in details


def test_rate_limits_round_trip_over_grpc(channel: grpc.Channel) -> None:
    admin = apb_grpc.AdminServiceStub(channel)
    admin.SetRateLimit(apb.SetRateLimitRequest(limit=_rate(value="mailer", burst=3)), timeout=10)
    listed = admin.ListRateLimits(apb.ListRateLimitsRequest(), timeout=10).limits
    mine = [x for x in listed if x.value == "mailer"]
    assert [(x.starts, x.period.seconds, x.burst) for x in mine] == [(10, 1, 3)]
    assert not mine[0].HasField("throttled_until")
    request = apb.RemoveRateLimitRequest(kind=apb.LIMIT_SCOPE_KIND_JOB_TYPE, value="mailer")
    assert admin.RemoveRateLimit(request, timeout=10).removed
    assert not admin.RemoveRateLimit(request, timeout=10).removed


def test_still_serving_after_bad_input(channel: grpc.Channel) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    job = scheduler.Enqueue(spb.EnqueueRequest(job=spec()), timeout=10).job
    assert job.status == jpb.JOB_STATUS_PENDING


def _seconds(s: float):
    from google.protobuf import duration_pb2

    return duration_pb2.Duration(seconds=int(s))


# Each policy or timeout out of bounds, with the field its answer must name.
BAD_POLICIES = [
    (jpb.RetryPolicy(backoff_multiplier=float("nan")), "retry_policy.backoff_multiplier"),
    (jpb.RetryPolicy(backoff_multiplier=float("inf")), "retry_policy.backoff_multiplier"),
    (jpb.RetryPolicy(backoff_multiplier=1e308), "retry_policy.backoff_multiplier"),
    (jpb.RetryPolicy(backoff_multiplier=0.5), "retry_policy.backoff_multiplier"),
    (jpb.RetryPolicy(max_attempts=2**31 - 1), "retry_policy.max_attempts"),
    (jpb.RetryPolicy(max_attempts=10_001), "retry_policy.max_attempts"),
    (jpb.RetryPolicy(jitter=float("nan")), "retry_policy.jitter"),
    (jpb.RetryPolicy(initial_backoff=_seconds(400 * 86400)), "retry_policy.initial_backoff"),
    (jpb.RetryPolicy(max_backoff=_seconds(10**11)), "retry_policy.max_backoff"),
    (
        jpb.RetryPolicy(non_retryable_error_kinds=["x"] * 101),
        "retry_policy.non_retryable_error_kinds",
    ),
]
BAD_TIMEOUTS = [
    ({"execution_timeout": _seconds(-1)}, "execution_timeout"),
    ({"execution_timeout": _seconds(10**11)}, "execution_timeout"),
    ({"heartbeat_timeout": _seconds(400 * 86400)}, "heartbeat_timeout"),
]


@pytest.mark.parametrize(
    ("policy", "field"),
    BAD_POLICIES,
    ids=[f"{f.rsplit('.', 1)[1]}-{i}" for i, (_, f) in enumerate(BAD_POLICIES)],
)
def test_unbounded_retry_policies_are_refused_everywhere(
    channel: grpc.Channel, policy: jpb.RetryPolicy, field: str
) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    admin = apb_grpc.AdminServiceStub(channel)
    code, details = code_of(scheduler.Enqueue, spb.EnqueueRequest(job=spec(retry_policy=policy)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and field in details, details
    batch = spb.EnqueueBatchRequest(jobs=[spec(), spec(retry_policy=policy)])
    code, details = code_of(scheduler.EnqueueBatch, batch)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and field in details, details
    assert "jobs[1]" in details
    defaults = apb.JobTypeDefaults(job_type="bounded", retry_policy=policy)
    code, details = code_of(
        admin.SetJobTypeDefaults, apb.SetJobTypeDefaultsRequest(defaults=defaults)
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and f"defaults.{field}" in details, details
    assert admin.ListJobTypeDefaults(apb.ListJobTypeDefaultsRequest()).defaults == []


@pytest.mark.parametrize(
    ("fields", "field"), BAD_TIMEOUTS, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_TIMEOUTS)]
)
def test_unbounded_timeouts_are_refused_everywhere(
    channel: grpc.Channel, fields: dict, field: str
) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    admin = apb_grpc.AdminServiceStub(channel)
    code, details = code_of(scheduler.Enqueue, spb.EnqueueRequest(job=spec(**fields)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and field in details, details
    code, details = code_of(
        scheduler.EnqueueBatch, spb.EnqueueBatchRequest(jobs=[spec(**fields), spec()])
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and f"jobs[0]: {field}" in details, details
    defaults = apb.JobTypeDefaults(job_type="bounded", **fields)
    code, details = code_of(
        admin.SetJobTypeDefaults, apb.SetJobTypeDefaultsRequest(defaults=defaults)
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and field in details, details


def test_policies_at_the_bounds_are_accepted(channel: grpc.Channel) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    policy = jpb.RetryPolicy(
        max_attempts=10_000,
        backoff_multiplier=100,
        jitter=1,
        initial_backoff=_seconds(365 * 86400),
        max_backoff=_seconds(365 * 86400),
    )
    job = scheduler.Enqueue(
        spb.EnqueueRequest(
            job=spec(
                job_type="at-bounds",
                retry_policy=policy,
                execution_timeout=_seconds(366 * 86400),
                heartbeat_timeout=_seconds(366 * 86400),
            )
        ),
        timeout=10,
    ).job
    assert job.max_attempts == 10_000 and job.retry_policy.backoff_multiplier == 100
