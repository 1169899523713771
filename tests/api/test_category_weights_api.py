"""Category weights over real gRPC, on both stores: set, listed, removed, kept
across a restart, scoped to the caller's tenant, refused when malformed, and
applied to the starts a worker's AcquireJobs stream receives."""

from __future__ import annotations

import queue
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from faults.harness import CoordinatorProcess
from security.conftest import write_tokens

from worker_sdk import (
    AdminClient,
    CategoryWeight,
    InvalidArgumentError,
    JobCategory,
    JobRequest,
    PermissionDeniedError,
    SchedulerClient,
)
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

pytestmark = pytest.mark.e2e

CREDENTIALS = {
    "cw-root-secret": (["admin", "scheduler", "worker"], ["*"], None),
    "cw-acme-secret": (["admin"], ["acme"], None),
}
INTEGRATION = jpb.JOB_CATEGORY_INTEGRATION
MAINTENANCE = jpb.JOB_CATEGORY_MAINTENANCE


@pytest.fixture(params=["sqlite", "postgres"])
def coordinator(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CoordinatorProcess]:
    tokens = tmp_path / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    drop = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'category-weights.db'}"
    else:
        request.getfixturevalue("pg_database")
        from conftest import new_pg_database

        url, drop = new_pg_database("wfj_category_weights")
    process = CoordinatorProcess(url, tmp_path, env={"WFJOBS_TOKENS_FILE": str(tokens)})
    try:
        yield process
    finally:
        process.stop()
        if drop is not None:
            drop()


def weights(admin: AdminClient, tenant_id: str = "") -> list[tuple[str, int, int]]:
    answer = admin.list_category_weights(tenant_id=tenant_id)
    assert all(isinstance(w, CategoryWeight) for w in answer.weights)
    return [(w.tenant_id, w.category.to_proto(), w.weight) for w in answer.weights]


def test_category_weights_are_set_listed_removed_and_kept(coordinator) -> None:
    with AdminClient(coordinator.target, token="cw-root-secret") as root:
        assert weights(root) == []
        root.set_category_weight("globex", "integration", 2)
        root.set_category_weight("acme", JobCategory.MAINTENANCE, 5)
        root.set_category_weight("acme", INTEGRATION, 3)
        root.set_category_weight("globex", "integration", 4)
        assert weights(root) == [
            ("acme", INTEGRATION, 3),
            ("acme", MAINTENANCE, 5),
            ("globex", INTEGRATION, 4),
        ]
        assert weights(root, "globex") == [("globex", INTEGRATION, 4)]
        assert root.remove_category_weight("acme", "maintenance") is True
        assert root.remove_category_weight("acme", "maintenance") is False
    coordinator.stop()
    coordinator.start()
    with AdminClient(coordinator.target, token="cw-root-secret") as root:
        assert weights(root) == [("acme", INTEGRATION, 3), ("globex", INTEGRATION, 4)]
        for call, message in (
            (lambda: root.set_category_weight("", "integration", 2), "tenant_id is required"),
            (lambda: root.set_category_weight("acme", 99, 2), "99 is not a known JobCategory"),
            (lambda: root.set_category_weight("acme", "custom", 0), "between 1 and 10000"),
            (lambda: root.remove_category_weight("acme", 42), "42 is not a known JobCategory"),
        ):
            with pytest.raises(InvalidArgumentError, match=message) as refused:
                call()
            assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_a_tenant_scoped_admin_sets_and_reads_only_its_tenants_weights(coordinator) -> None:
    with (
        AdminClient(coordinator.target, token="cw-root-secret") as root,
        AdminClient(coordinator.target, token="cw-acme-secret") as acme,
    ):
        root.set_category_weight("globex", "integration", 7)
        acme.set_category_weight("acme", "integration", 2)
        assert weights(acme) == [("acme", INTEGRATION, 2)]
        for call in (
            lambda: acme.list_category_weights(tenant_id="globex"),
            lambda: acme.set_category_weight("globex", "integration", 1),
            lambda: acme.remove_category_weight("globex", "integration"),
        ):
            with pytest.raises(PermissionDeniedError) as refused:
                call()
            assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED
            assert "tenant 'globex'" in refused.value.message
        assert weights(root, "globex") == [("globex", INTEGRATION, 7)]


def test_a_worker_stream_gets_a_tenants_categories_in_proportion(coordinator) -> None:
    with (
        AdminClient(coordinator.target, token="cw-root-secret") as root,
        SchedulerClient(coordinator.target, token="cw-root-secret") as scheduler,
    ):
        root.set_category_weight("acme", "integration", 3)
        # The maintenance jobs are older: in-lane order alone would start them all first.
        for category in ("maintenance", "integration"):
            scheduler.enqueue_batch(
                [
                    JobRequest(job_type="cw-work", tenant_id="acme", category=category)
                    for _ in range(300)
                ]
            )
    requests: queue.Queue[wpb.AcquireJobsRequest | None] = queue.Queue()
    requests.put(
        wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id="cw-w", job_types=["cw-work"]))
    )
    requests.put(wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=10)))

    def feed() -> Iterator[wpb.AcquireJobsRequest]:
        while (item := requests.get()) is not None:
            yield item

    taken: Counter[int] = Counter()
    with grpc.insecure_channel(coordinator.target) as channel:
        stream = wpb_grpc.WorkerServiceStub(channel).AcquireJobs(
            feed(), timeout=60, metadata=[("authorization", "Bearer cw-root-secret")]
        )
        for message in stream:
            if message.WhichOneof("kind") != "jobs":
                continue
            for leased in message.jobs.jobs:
                taken[leased.job.category] += 1
            if sum(taken.values()) >= 200:
                break
            if sum(taken.values()) % 10 == 0:
                requests.put(wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=10)))
        requests.put(None)
        stream.cancel()
    assert taken == {INTEGRATION: 150, MAINTENANCE: 50}, taken
