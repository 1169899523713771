"""Bearer tokens, roles and tenant scopes over real gRPC (SPEC §5.13, §9)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from security.conftest import CREDENTIALS, write_tokens

from wfj_testing import REPO, wait_until
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

pytestmark = pytest.mark.e2e
UNKNOWN_ID = "0190b6e2-5c1a-7d3e-8f00-123456789abc"


def auth(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


def code_of(call, request, token: str | None = None) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=10, metadata=auth(token) if token else None)
    return info.value.code(), info.value.details()


def spec(tenant: str, job_type: str = "noop") -> jpb.JobSpec:
    return jpb.JobSpec(job_type=job_type, tenant_id=tenant, payload=jpb.Payload(data=b"{}"))


@pytest.fixture(scope="module")
def channel(secured):
    with grpc.insecure_channel(secured.target) as ch:
        yield ch


def enqueue(channel, tenant: str, n: int = 1, job_type: str = "noop") -> list[str]:
    stub = spb_grpc.JobSchedulerServiceStub(channel)
    response = stub.EnqueueBatch(
        spb.EnqueueBatchRequest(jobs=[spec(tenant, job_type) for _ in range(n)]),
        metadata=auth("root-secret"),
        timeout=10,
    )
    return [r.job_id for r in response.results]


def test_calls_without_a_known_token_are_unauthenticated(channel) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    admin = apb_grpc.AdminServiceStub(channel)
    worker = wpb_grpc.WorkerServiceStub(channel)
    for call, request in (
        (scheduler.Enqueue, spb.EnqueueRequest(job=spec("a"))),
        (admin.GetStats, apb.GetStatsRequest()),
        (worker.Heartbeat, wpb.HeartbeatRequest(worker_id="w")),
    ):
        code, details = code_of(call, request)
        assert code == grpc.StatusCode.UNAUTHENTICATED
        assert "authorization: Bearer" in details
        code, details = code_of(call, request, "not-a-token")
        assert (code, details) == (
            grpc.StatusCode.UNAUTHENTICATED,
            "the bearer token is not known to this coordinator",
        )


def test_health_and_reflection_stay_open(channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    answer = health.Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    [reply] = list(
        reflection.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
        )
    )
    names = {s.name for s in reply.list_services_response.service}
    assert "workflowjobs.v1.AdminService" in names


def _closed_coordinator(tmp_path):
    """A coordinator on SQLite requiring tokens, with health and reflection closed."""
    from faults.harness import CoordinatorProcess

    tokens = tmp_path / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    return CoordinatorProcess(
        f"sqlite:///{tmp_path / 'closed.db'}",
        tmp_path,
        env={
            "WFJOBS_TOKENS_FILE": str(tokens),
            "WFJOBS_AUTH_OPEN_HEALTH": "0",
            "WFJOBS_AUTH_OPEN_REFLECTION": "0",
        },
    )


def test_closed_health_and_reflection_take_any_valid_token(tmp_path) -> None:
    """WFJOBS_AUTH_OPEN_HEALTH=0 / _REFLECTION=0: any known token, whatever its
    roles and tenants, may probe; no token or an unknown one is refused."""
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    coordinator = _closed_coordinator(tmp_path)
    try:
        with grpc.insecure_channel(coordinator.target) as ch:
            health = health_pb2_grpc.HealthStub(ch)
            request = health_pb2.HealthCheckRequest()
            assert code_of(health.Check, request)[0] == grpc.StatusCode.UNAUTHENTICATED
            assert code_of(health.Check, request, "nope")[0] == grpc.StatusCode.UNAUTHENTICATED
            for token in ("worker-a-secret", "sched-a-secret", "admin-a-secret", "root-secret"):
                answer = health.Check(request, metadata=auth(token), timeout=10)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING, token
            watch = health.Watch(request, metadata=auth("worker-b-secret"), timeout=10)
            assert next(iter(watch)).status == health_pb2.HealthCheckResponse.SERVING
            watch.cancel()
            reflection = reflection_pb2_grpc.ServerReflectionStub(ch)
            ask = reflection_pb2.ServerReflectionRequest(list_services="")
            with pytest.raises(grpc.RpcError) as info:
                list(reflection.ServerReflectionInfo(iter([ask]), timeout=10))
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            [reply] = list(
                reflection.ServerReflectionInfo(
                    iter([ask]), metadata=auth("sched-a-secret"), timeout=10
                )
            )
            names = {s.name for s in reply.list_services_response.service}
            assert "workflowjobs.v1.AdminService" in names
    finally:
        coordinator.stop()


def test_roles_gate_services(channel) -> None:
    admin = apb_grpc.AdminServiceStub(channel)
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    code, details = code_of(admin.GetStats, apb.GetStatsRequest(), "sched-a-secret")
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "AdminService needs the admin role" in details
    code, _ = code_of(scheduler.Enqueue, spb.EnqueueRequest(job=spec("a")), "worker-a-secret")
    assert code == grpc.StatusCode.PERMISSION_DENIED


def test_scheduler_scoped_to_its_tenants(channel) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    ok = scheduler.Enqueue(
        spb.EnqueueRequest(job=spec("a")), metadata=auth("sched-a-secret"), timeout=10
    )
    assert ok.job.tenant_id == "a"
    code, details = code_of(
        scheduler.EnqueueBatch,
        spb.EnqueueBatchRequest(jobs=[spec("a"), spec("b")]),
        "sched-a-secret",
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "tenant 'b'" in details
    [b_job] = enqueue(channel, "b")
    # Another tenant's job reads exactly like a job that does not exist.
    foreign = code_of(scheduler.GetJob, spb.GetJobRequest(job_id=b_job), "sched-a-secret")
    missing = code_of(scheduler.GetJob, spb.GetJobRequest(job_id=UNKNOWN_ID), "sched-a-secret")
    assert foreign[0] == missing[0] == grpc.StatusCode.NOT_FOUND
    assert foreign[1] == missing[1].replace(UNKNOWN_ID, b_job)


async def _acquire(
    target: str, token: str, credits: int, job_types=("noop",), want: int = 0, while_open=None
):
    """Open an AcquireJobs stream, grant credit, collect ``want`` jobs (default: credits).

    ``while_open(leased)`` runs before the stream closes: a closing stream hands
    back jobs whose last write it could not confirm, so checks that need the
    leases live run while it is open.
    """
    async with grpc.aio.insecure_channel(target) as ch:
        stub = wpb_grpc.WorkerServiceStub(ch)
        requests: asyncio.Queue = asyncio.Queue()
        await requests.put(
            wpb.AcquireJobsRequest(
                hello=wpb.WorkerHello(worker_id=f"w-{token}", job_types=list(job_types))
            )
        )

        async def outgoing():
            while True:
                yield await requests.get()

        call = stub.AcquireJobs(outgoing(), metadata=auth(token))
        leased: list[wpb.LeasedJob] = []
        try:
            async for response in call:
                if response.WhichOneof("kind") == "accepted":
                    # Grant credit once accepted, as the SDK does.
                    await requests.put(
                        wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=credits))
                    )
                if response.WhichOneof("kind") == "jobs":
                    leased.extend(response.jobs.jobs)
                    if len(leased) >= (want or credits):
                        if while_open is not None:
                            await asyncio.to_thread(while_open, leased)
                        break
        except grpc.aio.AioRpcError as e:
            return e.code(), e.details()
        finally:
            call.cancel()
        return leased


def test_worker_receives_heartbeats_and_completes_only_its_tenants_jobs(secured, channel) -> None:
    worker = wpb_grpc.WorkerServiceStub(channel)
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    b_ids = set(enqueue(channel, "b", 5, job_type="iso"))
    a_ids = set(enqueue(channel, "a", 5, job_type="iso"))
    # The tenant-a worker asks for more than a's backlog: it still gets only a's jobs.
    got_a = asyncio.run(_acquire(secured.target, "worker-a-secret", 10, ("iso",), want=5))
    assert {j.job.id for j in got_a} == a_ids

    def while_b_holds_its_leases(got_b) -> None:
        assert {j.job.id for j in got_b} == b_ids
        b_lease = got_b[0]
        before = scheduler.GetJob(
            spb.GetJobRequest(job_id=b_lease.job.id), metadata=auth("root-secret"), timeout=10
        ).job
        # Tenant a's worker holding b's real lease token still cannot touch b's job.
        ref = wpb.LeaseRef(job_id=b_lease.job.id, lease_token=b_lease.lease_token)
        answer = worker.Heartbeat(
            wpb.HeartbeatRequest(worker_id="w-a", leases=[ref]),
            metadata=auth("worker-a-secret"),
            timeout=10,
        )
        assert [s.state for s in answer.leases] == [wpb.LEASE_STATE_LOST]
        code, details = code_of(
            worker.CompleteJob,
            wpb.CompleteJobRequest(job_id=b_lease.job.id, lease_token=b_lease.lease_token),
            "worker-a-secret",
        )
        assert code == grpc.StatusCode.NOT_FOUND and details == f"job {b_lease.job.id} not found"
        code, _ = code_of(
            worker.FailJob,
            wpb.FailJobRequest(job_id=b_lease.job.id, lease_token=b_lease.lease_token, error="x"),
            "worker-a-secret",
        )
        assert code == grpc.StatusCode.NOT_FOUND
        report = worker.ReportOutcomes(
            wpb.ReportOutcomesRequest(
                outcomes=[
                    wpb.JobOutcome(
                        job_id=b_lease.job.id,
                        lease_token=b_lease.lease_token,
                        completed=wpb.Completion(),
                    )
                ]
            ),
            metadata=auth("worker-a-secret"),
            timeout=10,
        )
        assert [(r.accepted, r.error_code) for r in report.results] == [
            (False, "FAILED_PRECONDITION")
        ]
        after = scheduler.GetJob(
            spb.GetJobRequest(job_id=b_lease.job.id), metadata=auth("root-secret"), timeout=10
        ).job
        assert after == before, "a rejected call changed the job"
        # Its own worker still owns the lease.
        worker.CompleteJob(
            wpb.CompleteJobRequest(job_id=b_lease.job.id, lease_token=b_lease.lease_token),
            metadata=auth("worker-b-secret"),
            timeout=10,
        )

    got_b = asyncio.run(
        _acquire(
            secured.target, "worker-b-secret", 5, ("iso",), while_open=while_b_holds_its_leases
        )
    )
    assert {j.job.id for j in got_b} == b_ids


async def _report_on_stream(target: str, token: str, outcomes: list) -> list:
    """Open an AcquireJobs stream, send ``outcomes`` as one OutcomeBatch, return the answers."""
    async with grpc.aio.insecure_channel(target) as ch:
        stub = wpb_grpc.WorkerServiceStub(ch)
        requests: asyncio.Queue = asyncio.Queue()
        await requests.put(
            wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id=f"r-{token}", job_types=["iso"]))
        )

        async def outgoing():
            while True:
                yield await requests.get()

        call = stub.AcquireJobs(outgoing(), metadata=auth(token))
        try:
            async for response in call:
                kind = response.WhichOneof("kind")
                if kind == "accepted":
                    assert response.accepted.outcomes_on_stream
                    await requests.put(
                        wpb.AcquireJobsRequest(
                            outcomes=wpb.OutcomeBatch(batch_id=1, outcomes=outcomes)
                        )
                    )
                elif kind == "outcomes":
                    return list(response.outcomes.results)
        finally:
            call.cancel()
    raise AssertionError("the stream ended without answering the outcomes")


def test_outcomes_on_a_stream_touch_only_its_credentials_tenants(secured, channel) -> None:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    b_ids = set(enqueue(channel, "b", 2, job_type="iso"))

    def while_b_holds_its_leases(got_b) -> None:
        foreign, own = got_b

        def completed(leased: wpb.LeasedJob) -> wpb.JobOutcome:
            return wpb.JobOutcome(
                job_id=leased.job.id, lease_token=leased.lease_token, completed=wpb.Completion()
            )

        def job(job_id: str) -> jpb.Job:
            return scheduler.GetJob(
                spb.GetJobRequest(job_id=job_id), metadata=auth("root-secret"), timeout=10
            ).job

        before = job(foreign.job.id)
        # Tenant a's stream holding b's real lease token: answered like a lost lease.
        answers = asyncio.run(
            _report_on_stream(secured.target, "worker-a-secret", [completed(foreign)])
        )
        assert [(r.job_id, r.accepted, r.error_code) for r in answers] == [
            (foreign.job.id, False, "FAILED_PRECONDITION")
        ]
        assert job(foreign.job.id) == before, (
            "an outcome outside the stream's scope changed the job"
        )
        # A stream of b's credential (not the one the jobs were delivered on) records them.
        answers = asyncio.run(
            _report_on_stream(
                secured.target, "worker-b-secret", [completed(foreign), completed(own)]
            )
        )
        assert [(r.accepted, r.status) for r in answers] == [
            (True, jpb.JOB_STATUS_COMPLETED),
            (True, jpb.JOB_STATUS_COMPLETED),
        ]

    got_b = asyncio.run(
        _acquire(
            secured.target, "worker-b-secret", 2, ("iso",), while_open=while_b_holds_its_leases
        )
    )
    assert {j.job.id for j in got_b} == b_ids


def test_worker_credential_limited_to_job_types(secured) -> None:
    code, details = asyncio.run(
        _acquire(secured.target, "worker-a-mail-secret", 1, ("mail", "noop"))
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "may not acquire job type(s) noop" in details


def test_tenant_scoped_admin(channel) -> None:
    admin = apb_grpc.AdminServiceStub(channel)
    [b_job] = enqueue(channel, "b")
    enqueue(channel, "a")
    listed = admin.ListJobs(apb.ListJobsRequest(), metadata=auth("admin-a-secret"), timeout=10)
    assert listed.jobs and {j.tenant_id for j in listed.jobs} == {"a"}
    code, _ = code_of(
        admin.ListJobs,
        apb.ListJobsRequest(filter=apb.JobFilter(tenant_id="b")),
        "admin-a-secret",
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED
    for call, request in (
        (admin.GetJob, apb.AdminServiceGetJobRequest(job_id=b_job)),
        (admin.ExplainJob, apb.ExplainJobRequest(job_id=b_job)),
        (admin.CancelJob, apb.CancelJobRequest(job_id=b_job)),
    ):
        code, details = code_of(call, request, "admin-a-secret")
        assert (code, details) == (grpc.StatusCode.NOT_FOUND, f"job {b_job} not found")
    code, details = code_of(admin.Drain, apb.DrainRequest(), "admin-a-secret")
    assert code == grpc.StatusCode.PERMISSION_DENIED and "acts on every tenant" in details
    code, _ = code_of(
        admin.Pause,
        apb.PauseRequest(scope=apb.PauseScope(kind=apb.PAUSE_SCOPE_KIND_JOB_TYPE, value="noop")),
        "admin-a-secret",
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED
    stats = admin.GetStats(apb.GetStatsRequest(), metadata=auth("admin-a-secret"), timeout=10)
    assert {c.tenant_id for c in stats.counts} <= {"a"}


def test_a_tenant_scoped_admin_purges_and_lists_groups_of_its_tenant_only(channel) -> None:
    admin = apb_grpc.AdminServiceStub(channel)
    jobs = {t: enqueue(channel, t, 2, job_type="purge-scope") for t in "ab"}
    for job_id in jobs["a"] + jobs["b"]:
        admin.CancelJob(
            apb.CancelJobRequest(job_id=job_id), metadata=auth("root-secret"), timeout=10
        )
    flt = apb.JobFilter(job_types=["purge-scope"])
    purged = admin.PurgeJobs(
        apb.PurgeJobsRequest(filter=flt), metadata=auth("admin-a-secret"), timeout=10
    )
    assert (purged.matched, purged.deleted) == (2, 2)
    left = admin.ListJobs(
        apb.ListJobsRequest(filter=flt), metadata=auth("root-secret"), timeout=10
    ).jobs
    assert sorted(j.id for j in left) == sorted(jobs["b"])
    code, _ = code_of(
        admin.PurgeJobs,
        apb.PurgeJobsRequest(filter=apb.JobFilter(tenant_id="b"), dry_run=True),
        "admin-a-secret",
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED
    for tenant in "ab":
        spb_grpc.JobSchedulerServiceStub(channel).CreateGroup(
            spb.CreateGroupRequest(tenant_id=tenant, completion=spec(tenant)),
            metadata=auth("root-secret"),
            timeout=10,
        )
    groups = admin.ListGroups(
        apb.ListGroupsRequest(), metadata=auth("admin-a-secret"), timeout=10
    ).groups
    assert groups and {g.tenant_id for g in groups} == {"a"}
    code, _ = code_of(admin.ListGroups, apb.ListGroupsRequest(tenant_id="b"), "admin-a-secret")
    assert code == grpc.StatusCode.PERMISSION_DENIED
    [b_job] = enqueue(channel, "b")
    code, details = code_of(admin.RunJobNow, apb.RunJobNowRequest(job_id=b_job), "admin-a-secret")
    assert (code, details) == (grpc.StatusCode.NOT_FOUND, f"job {b_job} not found")


def test_a_tenant_scoped_explain_names_no_other_tenant(channel) -> None:
    """Jobs of tenants a and b compete for a job type: ExplainJob names b to an
    every-tenant admin and says nothing of it to an admin scoped to a."""
    admin = apb_grpc.AdminServiceStub(channel)
    [a_job] = enqueue(channel, "a", job_type="explain-share")
    enqueue(channel, "b", job_type="explain-share")

    def reasons(token: str) -> list[tuple[int, str]]:
        answer = admin.ExplainJob(
            apb.ExplainJobRequest(job_id=a_job), metadata=auth(token), timeout=10
        )
        return [(r.kind, r.message) for r in answer.reasons]

    [share] = [m for k, m in reasons("root-secret") if k == apb.WaitReason.KIND_FAIR_SHARE]
    assert "with 1 other tenant(s) that have eligible jobs of it (b)" in share
    scoped = reasons("admin-a-secret")
    assert apb.WaitReason.KIND_FAIR_SHARE not in [k for k, _ in scoped]
    assert not any("tenant b" in m or "(b)" in m for _, m in scoped), scoped


def test_tokens_rotate_without_restart(secured, channel) -> None:
    admin = apb_grpc.AdminServiceStub(channel)
    rotated = dict(CREDENTIALS)
    rotated["admin-a-rotated"] = rotated.pop("admin-a-secret")
    write_tokens(secured.tokens_file, rotated)

    def rotated_in() -> bool:
        try:
            admin.GetStats(apb.GetStatsRequest(), metadata=auth("admin-a-rotated"), timeout=10)
            return True
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAUTHENTICATED
            return False

    try:
        wait_until(rotated_in, 15, "the rotated token to be accepted")
        code, _ = code_of(admin.GetStats, apb.GetStatsRequest(), "admin-a-secret")
        assert code == grpc.StatusCode.UNAUTHENTICATED
    finally:
        write_tokens(secured.tokens_file, CREDENTIALS)
        wait_until(lambda: not rotated_in(), 15, "the original tokens to be back")


def test_non_loopback_without_auth_refuses_to_start(tmp_path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordinator",
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--database-url",
            f"sqlite:///{tmp_path / 'x.db'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert out.returncode == 5
    assert "refusing to serve 0.0.0.0:0 without authentication" in out.stderr


def test_auth_off_is_stated_loudly(tmp_path) -> None:
    from faults.harness import CoordinatorProcess

    coordinator = CoordinatorProcess(f"sqlite:///{tmp_path / 'open.db'}", tmp_path)
    coordinator.stop()
    assert "AUTHENTICATION IS OFF" in coordinator.log_text()


CORRUPT = b"\xff\xff\xff\xff"
ENQUEUE = "/workflowjobs.v1.JobSchedulerService/Enqueue"
ACQUIRE = "/workflowjobs.v1.WorkerService/AcquireJobs"


def _raw_unary(channel, method: str, body: bytes, token: str | None):
    call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as info:
        call(body, timeout=10, metadata=auth(token) if token else None)
    return info.value.code(), info.value.details()


def _raw_stream(channel, body: bytes, token: str | None):
    call = channel.stream_stream(ACQUIRE, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as info:
        for _ in call(iter([body]), timeout=10, metadata=auth(token) if token else None):
            pass
    return info.value.code(), info.value.details()


def test_the_token_is_checked_before_the_request_is_decoded(channel) -> None:
    """Garbage from a caller without a valid token is UNAUTHENTICATED, not
    INVALID_ARGUMENT: the bytes of an unauthenticated caller are never decoded."""
    for token in (None, "not-a-token"):
        code, _ = _raw_unary(channel, ENQUEUE, CORRUPT, token)
        assert code == grpc.StatusCode.UNAUTHENTICATED, token
        code, _ = _raw_stream(channel, CORRUPT, token)
        assert code == grpc.StatusCode.UNAUTHENTICATED, token
    # The role comes from the method alone: checked before decoding too.
    code, details = _raw_unary(channel, ENQUEUE, CORRUPT, "worker-a-secret")
    assert code == grpc.StatusCode.PERMISSION_DENIED and "scheduler role" in details
    code, _ = _raw_stream(channel, CORRUPT, "sched-a-secret")
    assert code == grpc.StatusCode.PERMISSION_DENIED


def test_tenant_scopes_are_checked_after_the_request_is_decoded(channel) -> None:
    """A valid token with garbage is INVALID_ARGUMENT; a decodable request
    outside the credential's tenants is PERMISSION_DENIED."""
    code, details = _raw_unary(channel, ENQUEUE, CORRUPT, "sched-a-secret")
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "EnqueueRequest" in details
    code, _ = _raw_stream(channel, CORRUPT, "worker-a-secret")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    other_tenant = spb.EnqueueRequest(job=spec("b")).SerializeToString()
    code, details = _raw_unary(channel, ENQUEUE, other_tenant, "sched-a-secret")
    assert code == grpc.StatusCode.PERMISSION_DENIED and "'b'" in details


def _every_rpc() -> list[tuple[str, bool, bool]]:
    """(method path, client streaming, server streaming) of every RPC the
    coordinator serves, from the service descriptors: a new RPC is covered
    without touching this test."""
    from grpc_reflection.v1alpha import reflection_pb2

    from coordinator.api.server import SERVICE_NAMES
    from workflowjobs.v1 import admin_service_pb2, scheduler_service_pb2, worker_service_pb2

    files = (
        scheduler_service_pb2.DESCRIPTOR,
        worker_service_pb2.DESCRIPTOR,
        admin_service_pb2.DESCRIPTOR,
        health_pb2.DESCRIPTOR,
        reflection_pb2.DESCRIPTOR,
    )
    services = [s for f in files for s in f.services_by_name.values()]
    assert {s.full_name for s in services} >= set(SERVICE_NAMES)
    return [
        (f"/{s.full_name}/{m.name}", m.client_streaming, m.server_streaming)
        for s in services
        for m in s.methods
    ]


def _raw_call(ch, rpc: tuple[str, bool, bool], token: str | None) -> tuple[grpc.StatusCode, str]:
    """Undecodable bytes sent to ``rpc`` in its own shape; the status it ends with."""
    method, client_streaming, server_streaming = rpc
    metadata = auth(token) if token else None
    kwargs = {"request_serializer": None, "response_deserializer": None}
    try:
        if client_streaming and server_streaming:
            for _ in ch.stream_stream(method, **kwargs)(
                iter([CORRUPT]), timeout=10, metadata=metadata
            ):
                pass
        elif server_streaming:
            for _ in ch.unary_stream(method, **kwargs)(CORRUPT, timeout=10, metadata=metadata):
                pass
        elif client_streaming:
            ch.stream_unary(method, **kwargs)(iter([CORRUPT]), timeout=10, metadata=metadata)
        else:
            ch.unary_unary(method, **kwargs)(CORRUPT, timeout=10, metadata=metadata)
    except grpc.RpcError as e:
        return e.code(), e.details()
    return grpc.StatusCode.OK, ""


def test_every_rpc_checks_token_and_role_before_decoding(tmp_path) -> None:
    """docs/security.md: the token and the role are checked before the request
    bytes are decoded, for every RPC of every service, streaming ones included
    (health and reflection closed, so every service needs a token)."""
    coordinator = _closed_coordinator(tmp_path)
    # A token without the service's role, and one with it.
    lacking = {"JobSchedulerService": "worker-a-secret", "WorkerService": "sched-a-secret"}
    any_token = ("/grpc.", "/workflowjobs.v1.AdminService/WhoAmI")
    rpcs = _every_rpc()
    assert "/workflowjobs.v1.JobSchedulerService/WatchJobEvents" in [r[0] for r in rpcs]
    try:
        with grpc.insecure_channel(coordinator.target) as ch:
            for rpc in rpcs:
                method = rpc[0]
                for token in (None, "not-a-token"):
                    code, details = _raw_call(ch, rpc, token)
                    assert code == grpc.StatusCode.UNAUTHENTICATED, (method, token, details)
                if not method.startswith(any_token):
                    service = method.split("/")[1].rsplit(".", 1)[1]
                    wrong = lacking.get(service, "sched-a-secret")
                    code, details = _raw_call(ch, rpc, wrong)
                    assert code == grpc.StatusCode.PERMISSION_DENIED, (method, details)
                    assert "role" in details, details
                # With the role, the bytes are decoded and refused as what they are.
                code, details = _raw_call(ch, rpc, "root-secret")
                assert code == grpc.StatusCode.INVALID_ARGUMENT, (method, details)
    finally:
        coordinator.stop()
