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
