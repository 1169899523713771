"""Two coordinators over one PostgreSQL, with workers on each."""

from __future__ import annotations

import collections

import pytest

from wfj_testing import read_records, wait_until
from worker_sdk import AdminClient, JobRequest, SchedulerClient


@pytest.fixture
def pg_url(pg_database):
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_replicas")
    yield url
    drop()


def test_two_coordinators_run_every_job_once(pg_url, processes) -> None:
    first = processes["coordinator"](pg_url)
    second = processes["coordinator"](pg_url)
    workers = [
        processes["worker"](first.target, "--concurrency", "50"),
        processes["worker"](first.target, "--concurrency", "50"),
        processes["worker"](second.target, "--concurrency", "50"),
        processes["worker"](second.target, "--concurrency", "50"),
    ]
    total = 2000
    ids: list[str] = []
    # Enqueue half through each replica: the other replica's workers are woken by NOTIFY.
    for target in (first.target, second.target):
        with SchedulerClient(target) as scheduler:
            for start in range(0, total // 2, 250):
                batch = [JobRequest("noop", {"n": start + i}) for i in range(250)]
                ids.extend(r.job_id for r in scheduler.enqueue_batch(batch))
    with AdminClient(second.target) as admin:
        wait_until(lambda: admin.get_stats().completed == total, 120, "all jobs to complete")
    records = read_records(*(w.record for w in workers))
    starts = collections.Counter(job_id for event, job_id, *_ in records if event == "start")
    assert set(starts) == set(ids)
    assert max(starts.values()) == 1
    per_worker = collections.Counter(w for event, _, w, _ in records if event == "start")
    assert len(per_worker) == 4, f"every worker should take jobs: {per_worker}"


def test_in_flight_bookkeeping_stays_bounded_when_outcomes_go_through_another_replica(
    pg_url, processes
) -> None:
    """A long stream on one replica, every outcome reported through the other (a
    round-robin load balancer): the leasing replica's per-stream entries stay
    near what is really in flight instead of growing for the life of the stream."""
    import asyncio

    import grpc

    from workflowjobs.v1 import admin_service_pb2 as apb
    from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
    from workflowjobs.v1 import worker_service_pb2 as wpb
    from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

    leasing = processes["coordinator"](pg_url)
    reporting = processes["coordinator"](pg_url)
    total, slots = 2000, 10
    with SchedulerClient(reporting.target) as scheduler:
        for start in range(0, total, 500):
            scheduler.enqueue_batch([JobRequest("long", {"n": start + i}) for i in range(500)])

    async def run() -> tuple[int, list[int]]:
        async with (
            grpc.aio.insecure_channel(leasing.target) as to_leasing,
            grpc.aio.insecure_channel(reporting.target) as to_reporting,
        ):
            admin = apb_grpc.AdminServiceStub(to_leasing)
            report = wpb_grpc.WorkerServiceStub(to_reporting).ReportOutcomes
            requests: asyncio.Queue = asyncio.Queue()
            requests.put_nowait(
                wpb.AcquireJobsRequest(
                    hello=wpb.WorkerHello(worker_id="long-stream", job_types=["long"], slots=slots)
                )
            )

            async def outgoing():
                while True:
                    yield await requests.get()

            async def entries() -> int:
                listed = await admin.ListWorkers(apb.ListWorkersRequest(), timeout=30)
                [me] = [w for w in listed.workers if w.worker_id == "long-stream"]
                return len(me.in_flight_job_ids)

            call = wpb_grpc.WorkerServiceStub(to_leasing).AcquireJobs(outgoing())
            done, sizes = 0, []
            async for response in call:
                kind = response.WhichOneof("kind")
                if kind == "accepted":
                    requests.put_nowait(
                        wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=slots))
                    )
                elif kind == "jobs":
                    leased = list(response.jobs.jobs)
                    answer = await report(
                        wpb.ReportOutcomesRequest(
                            outcomes=[
                                wpb.JobOutcome(
                                    job_id=j.job.id,
                                    lease_token=j.lease_token,
                                    completed=wpb.Completion(),
                                )
                                for j in leased
                            ]
                        ),
                        timeout=30,
                    )
                    assert all(r.accepted for r in answer.results)
                    done += len(leased)
                    sizes.append(await entries())
                    if done >= total:
                        break
                    requests.put_nowait(
                        wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=len(leased)))
                    )
            # Idle now: the periodic audit forgets what is left.
            for _ in range(600):
                if await entries() == 0:
                    break
                await asyncio.sleep(0.1)
            last = await entries()
            call.cancel()
            return last, sizes

    last, sizes = asyncio.run(run())
    print(f"in-flight entries on the leasing replica: max {max(sizes)} over {len(sizes)} batches")
    assert len(sizes) >= total // slots
    # Without the audit the entries reach `total`; with it they stay near the
    # early-audit threshold (64) plus what arrives during one audit.
    assert max(sizes) <= total // 4, f"entries grew to {max(sizes)}"
    assert last == 0


def test_workers_with_one_id_on_two_replicas_are_both_listed(pg_url, processes) -> None:
    """The worker registry is keyed by (coordinator, worker id): a worker id
    announced on each replica is two workers in ListWorkers, on either replica."""
    first = processes["coordinator"](pg_url)
    second = processes["coordinator"](pg_url)
    processes["worker"](first.target, "--worker-id", "twin", "--concurrency", "5")
    leaving = processes["worker"](second.target, "--worker-id", "twin", "--concurrency", "3")

    def listed(target: str) -> list[tuple[str, str, int]]:
        with AdminClient(target) as admin:
            return sorted((w.worker_id, w.coordinator_id, w.slots) for w in admin.list_workers())

    def both_everywhere() -> bool:
        views = [listed(t) for t in (first.target, second.target)]
        return views[0] == views[1] and len(views[0]) == 2

    wait_until(both_everywhere, 60, "each replica to list both workers named twin")
    [one, other] = listed(first.target)
    assert one[0] == other[0] == "twin" and one[1] != other[1]
    assert sorted((one[2], other[2])) == [3, 5]  # each replica's own worker, not one twice
    leaving.stop()
    wait_until(
        lambda: [len(listed(t)) for t in (first.target, second.target)] == [1, 1],
        60,
        "the worker that left to be gone from both replicas, the other kept",
    )


def test_a_worker_of_a_killed_replica_is_listed_stale_until_it_goes(pg_url, processes) -> None:
    """A replica SIGKILLed leaves its registry rows: the surviving replica lists
    its worker with stale set once the rows go unrefreshed, its own worker not."""
    doomed = processes["coordinator"](pg_url)
    kept = processes["coordinator"](pg_url)
    processes["worker"](doomed.target, "--worker-id", "orphan")
    processes["worker"](kept.target, "--worker-id", "steady")

    def listed() -> dict[str, bool]:
        with AdminClient(kept.target) as admin:
            return {w.worker_id: w.stale for w in admin.list_workers()}

    wait_until(lambda: listed() == {"orphan": False, "steady": False}, 60, "both workers")
    doomed.kill()
    wait_until(lambda: listed().get("orphan"), 120, "the killed replica's worker to be stale")
    assert listed().get("steady") is False
