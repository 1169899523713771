"""Idempotent enqueue under concurrency, over real gRPC (SPEC §5.11): every
caller with the same tenant + key gets OK and the same job."""

from __future__ import annotations

import grpc
import pytest

from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc

CALLERS = 50
ROUNDS = 3


def _spec(key: str = "") -> jpb.JobSpec:
    return jpb.JobSpec(
        job_type="noop",
        tenant_id="tenant-idem",
        payload=jpb.Payload(data=b"{}"),
        idempotency_key=key,
    )


def _answers(futures: list[grpc.Future]) -> list[object]:
    out: list[object] = []
    for f in futures:
        try:
            out.append(f.result(timeout=60))
        except grpc.RpcError as e:
            out.append(f"{e.code().name}: {e.details()}")
    return out


def test_concurrent_one_job_batches_with_one_key_get_one_job(e2e_database, processes) -> None:
    coordinator = processes["coordinator"](e2e_database)
    with grpc.insecure_channel(coordinator.target) as channel:
        stub = spb_grpc.JobSchedulerServiceStub(channel)
        # The tenant already has jobs of this type.
        stub.EnqueueBatch(spb.EnqueueBatchRequest(jobs=[_spec()]), timeout=30)
        for n in range(ROUNDS):
            request = spb.EnqueueBatchRequest(jobs=[_spec(f"order-{n}")])
            answers = _answers([stub.EnqueueBatch.future(request) for _ in range(CALLERS)])
            failures = [a for a in answers if isinstance(a, str)]
            assert failures == [], failures
            results = [a.results[0] for a in answers]
            assert len({r.job_id for r in results}) == 1
            assert sorted(r.deduplicated for r in results) == [False] + [True] * (CALLERS - 1)


@pytest.fixture
def pg_url(pg_database):
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_idem")
    yield url
    drop()


def test_enqueues_with_one_key_over_two_replicas_get_one_job(pg_url, processes) -> None:
    first = processes["coordinator"](pg_url)
    second = processes["coordinator"](pg_url)
    with (
        grpc.insecure_channel(first.target) as one,
        grpc.insecure_channel(second.target) as two,
    ):
        stubs = [spb_grpc.JobSchedulerServiceStub(one), spb_grpc.JobSchedulerServiceStub(two)]
        for stub in stubs:
            stub.Enqueue(spb.EnqueueRequest(job=_spec()), timeout=30)
        for n in range(ROUNDS):
            request = spb.EnqueueRequest(job=_spec(f"order-{n}"))
            answers = _answers([stubs[i % 2].Enqueue.future(request) for i in range(CALLERS)])
            failures = [a for a in answers if isinstance(a, str)]
            assert failures == [], failures
            assert len({a.job.id for a in answers}) == 1
            assert sorted(a.deduplicated for a in answers) == [False] + [True] * (CALLERS - 1)
