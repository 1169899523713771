"""AdminClient's listings come back as the SDK's own types, not protobuf: their
periods are timedeltas, their times datetimes, their kinds still compare equal
to the contract's numbers, and they print without protobuf text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

import worker_sdk
from worker_sdk import (
    CategoryWeight,
    CategoryWeights,
    ConcurrencyLimit,
    Identity,
    JobCategory,
    JobStats,
    JobStatus,
    JobTypeDefaults,
    LimitKind,
    PauseKind,
    PauseRecord,
    PauseScope,
    RateLimit,
    RetryPolicy,
    StatusCount,
    TenantWeight,
    TenantWeights,
    WindowCounts,
    WorkerView,
)
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import job_pb2 as jpb


def _timestamp(value: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def test_a_listed_rate_limit_reads_as_python_values() -> None:
    until = datetime(2026, 12, 1, 12, 0, 0, 250_000, tzinfo=UTC)
    message = apb.RateLimit(
        kind=apb.LIMIT_SCOPE_KIND_JOB_TYPE,
        value="noop",
        starts=5,
        period=Duration(seconds=2, nanos=500_000_000),
        burst=3,
        throttled_until=_timestamp(until),
        slow_level=2,
    )
    limit = RateLimit.from_proto(message)
    assert limit.kind is LimitKind.JOB_TYPE
    assert limit.kind == apb.LIMIT_SCOPE_KIND_JOB_TYPE
    assert (limit.value, limit.starts, limit.burst, limit.slow_level) == ("noop", 5, 3, 2)
    assert limit.period == timedelta(seconds=2.5)
    assert limit.throttled_until == until
    assert limit.raw is message
    assert "seconds:" not in repr(limit) and "nanos" not in repr(limit)
    assert repr(limit).startswith("RateLimit(kind=<LimitKind.JOB_TYPE: 2>, value='noop'")
    assert str(limit) == "job_type noop: 5 starts per 0:00:02.500000, burst 3"


def test_a_rate_limit_admitting_now_has_no_throttled_until() -> None:
    limit = RateLimit.from_proto(
        apb.RateLimit(
            kind=apb.LIMIT_SCOPE_KIND_CATEGORY, value="3", starts=1, period=Duration(seconds=60)
        )
    )
    assert limit.throttled_until is None
    assert limit.slow_level == 0
    assert str(limit) == "category integration: 1 starts per 0:01:00, burst 0"
    # Equal by value, whatever message it came from.
    assert limit == RateLimit(LimitKind.CATEGORY, "3", 1, timedelta(minutes=1), 0)


def test_every_limit_kind_of_the_contract_has_a_name() -> None:
    for name, number in apb.LimitScopeKind.items():
        if name.endswith("UNSPECIFIED"):
            continue
        assert LimitKind(number).name == name.removeprefix("LIMIT_SCOPE_KIND_")


def test_the_types_are_public_and_documented() -> None:
    for name in (
        "RateLimit",
        "LimitKind",
        "ConcurrencyLimit",
        "TenantWeight",
        "TenantWeights",
        "CategoryWeight",
        "CategoryWeights",
        "JobTypeDefaults",
    ):
        assert name in worker_sdk.__all__
        assert getattr(worker_sdk, name).__doc__


def test_a_listed_concurrency_limit_reads_as_python_values() -> None:
    message = apb.ConcurrencyLimit(
        kind=apb.LIMIT_SCOPE_KIND_JOB_TYPE, value="noop", max_running=7, running=2
    )
    limit = ConcurrencyLimit.from_proto(message)
    assert limit.kind is LimitKind.JOB_TYPE
    assert (limit.value, limit.max_running, limit.running) == ("noop", 7, 2)
    assert limit.raw is message
    assert str(limit) == "job_type noop: 2 of 7 running"
    assert repr(limit) == (
        "ConcurrencyLimit(kind=<LimitKind.JOB_TYPE: 2>, value='noop', max_running=7, running=2)"
    )
    category = ConcurrencyLimit.from_proto(
        apb.ConcurrencyLimit(kind=apb.LIMIT_SCOPE_KIND_CATEGORY, value="3", max_running=2)
    )
    assert str(category) == "category integration: 0 of 2 running"
    assert category == ConcurrencyLimit(LimitKind.CATEGORY, "3", 2)


def test_listed_tenant_weights_read_as_python_values() -> None:
    message = apb.ListTenantWeightsResponse(
        weights=[apb.TenantWeight(tenant_id="acme", weight=3)], default_weight=1
    )
    weights = TenantWeights.from_proto(message)
    assert weights.weights == [TenantWeight("acme", 3)]
    assert weights.default_weight == 1
    assert weights.raw is message
    assert repr(weights) == (
        "TenantWeights(weights=[TenantWeight(tenant_id='acme', weight=3)], default_weight=1)"
    )


def test_listed_category_weights_name_their_category() -> None:
    message = apb.ListCategoryWeightsResponse(
        weights=[
            apb.CategoryWeight(tenant_id="acme", category=jpb.JOB_CATEGORY_INTEGRATION, weight=3),
            apb.CategoryWeight(tenant_id="acme", category=jpb.JOB_CATEGORY_UNSPECIFIED, weight=2),
        ]
    )
    weights = CategoryWeights.from_proto(message)
    assert weights.weights == [
        CategoryWeight("acme", JobCategory.INTEGRATION, 3),
        CategoryWeight("acme", JobCategory.UNSPECIFIED, 2),
    ]
    assert weights.weights[0].category is JobCategory.INTEGRATION
    assert weights.raw is message
    assert "category=<JobCategory.INTEGRATION: 'INTEGRATION'>" in repr(weights)


def test_listed_job_type_defaults_read_as_python_values() -> None:
    message = apb.JobTypeDefaults(
        job_type="report",
        retry_policy=jpb.RetryPolicy(max_attempts=9),
        execution_timeout=Duration(seconds=120),
        ordering_failure=apb.ORDERING_FAILURE_SKIP,
    )
    defaults = JobTypeDefaults.from_proto(message)
    assert defaults == JobTypeDefaults(
        "report",
        retry_policy=RetryPolicy(max_attempts=9),
        execution_timeout=timedelta(minutes=2),
        ordering_failure="skip",
    )
    assert defaults.heartbeat_timeout is None
    assert defaults.raw is message
    assert "seconds:" not in repr(defaults)
    bare = JobTypeDefaults.from_proto(apb.JobTypeDefaults(job_type="step"))
    assert (bare.retry_policy, bare.execution_timeout, bare.ordering_failure) == (
        None,
        None,
        "block",
    )


def test_pause_records_workers_stats_and_identity_read_as_python_values() -> None:
    created = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    record_message = apb.PauseRecord(
        id="p-1",
        scope=apb.PauseScope(kind=apb.PAUSE_SCOPE_KIND_JOB_TYPE, tenant_id="acme", value="mail"),
        actor="ana",
        create_time=_timestamp(created),
        expire_time=_timestamp(created + timedelta(hours=1)),
    )
    record = PauseRecord.from_proto(record_message)
    assert record == PauseRecord(
        "p-1",
        PauseScope(PauseKind.JOB_TYPE, "acme", "mail"),
        actor="ana",
        create_time=created,
        expire_time=created + timedelta(hours=1),
    )
    assert record.lift_time is None and record.raw is record_message
    assert record.scope.kind == apb.PAUSE_SCOPE_KIND_JOB_TYPE
    assert str(record.scope) == "job type mail (tenant acme)"
    assert str(PauseScope(PauseKind.CATEGORY, "", "3")) == "category integration"
    assert "seconds:" not in repr(record)

    worker = WorkerView.from_proto(
        apb.WorkerInfo(
            worker_id="w-1",
            job_types=["mail"],
            slots=4,
            in_flight_job_ids=["j-1"],
            last_heartbeat_time=_timestamp(created),
            stale=True,
        )
    )
    assert (worker.job_types, worker.in_flight_job_ids) == (["mail"], ["j-1"])
    assert worker.stale
    assert (worker.last_heartbeat_time, worker.connect_time) == (created, None)

    stats = JobStats.from_proto(
        apb.GetStatsResponse(
            counts=[
                apb.StatusCount(
                    tenant_id="acme",
                    job_type="mail",
                    status=jpb.JOB_STATUS_PENDING,
                    count=5,
                    scheduled=2,
                )
            ],
            pending=5,
            scheduled=2,
            oldest_pending_age=Duration(seconds=3, nanos=500_000_000),
            windows=[apb.WindowCounts(window=Duration(seconds=300), completions=7)],
        )
    )
    assert stats.counts == [StatusCount("acme", "mail", JobStatus.PENDING, 5, 2)]
    assert stats.oldest_pending_age == timedelta(seconds=3.5)
    assert stats.windows == [WindowCounts(timedelta(minutes=5), completions=7)]
    assert JobStats.from_proto(apb.GetStatsResponse()).oldest_pending_age is None

    me = Identity.from_proto(
        apb.WhoAmIResponse(authenticated=True, name="ops", roles=["admin"], tenants=["*"])
    )
    assert me == Identity(True, "ops", ["admin"], ["*"], [])
