"""Pause and concurrency limits with real processes."""

from __future__ import annotations

import collections
import time

import psycopg
import pytest

from wfj_testing import read_records, wait_until
from worker_sdk import AdminClient, JobRequest, SchedulerClient, WorkflowRef


def test_unpause_wakes_waiting_workers(e2e_database, processes) -> None:
    coordinator = processes["coordinator"](e2e_database)
    worker = processes["worker"](coordinator.target)
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        admin.pause("definition", "billing", tenant_id="acme", reason="incident 7", actor="ops")
        held = [
            scheduler.enqueue(
                "noop", {}, tenant_id="acme", workflow=WorkflowRef(definition_id="billing")
            ).id
            for _ in range(5)
        ]
        free = scheduler.enqueue(
            "noop", {}, tenant_id="acme", workflow=WorkflowRef(definition_id="other")
        )
        wait_until(lambda: admin.get_job(free.id).status == "COMPLETED", 30, "the free job")
        assert {admin.get_job(j).status for j in held} == {"PENDING"}
        explained = admin.explain_job(held[0])
        assert any("incident 7" in r.message for r in explained.reasons)
        admin.unpause("definition", "billing", tenant_id="acme", actor="ops")
        # No poll delay: the worker is woken by the unpause itself.
        wait_until(
            lambda: all(admin.get_job(j).status == "COMPLETED" for j in held),
            3,
            "paused jobs to run after unpause",
        )
    assert len(read_records(worker.record)) == 12  # start+end for 6 jobs


@pytest.fixture
def pg_url(pg_database):
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_limits")
    yield url
    drop()


def test_limits_hold_across_two_coordinators(pg_url, processes) -> None:
    first = processes["coordinator"](pg_url)
    second = processes["coordinator"](pg_url)
    for target in (first.target, second.target, first.target, second.target):
        processes["worker"](target, "--concurrency", "20")
    with AdminClient(first.target) as admin, SchedulerClient(second.target) as scheduler:
        admin.set_concurrency_limit("tenant", "*", 3)
        admin.set_concurrency_limit("concurrency_key", "*", 1)
        jobs = [
            JobRequest(
                "sleep", {"seconds": 0.05}, tenant_id=f"t{i % 2}", concurrency_key=f"k{i % 5}"
            )
            for i in range(80)
        ]
        scheduler.enqueue_batch(jobs)
        dsn = "postgresql://" + pg_url.split("://", 1)[1]
        samples = 0
        worst: collections.Counter[str] = collections.Counter()
        deadline = time.monotonic() + 90
        with psycopg.connect(dsn, autocommit=True) as conn:
            while time.monotonic() < deadline:
                rows = conn.execute(
                    "SELECT tenant_id, concurrency_key, count(*) FROM wfj_jobs WHERE status = 2 "
                    "GROUP BY GROUPING SETS ((tenant_id), (concurrency_key))"
                ).fetchall()
                samples += 1
                for tenant, key, n in rows:
                    scope = f"tenant {tenant}" if tenant is not None else f"key {key}"
                    worst[scope] = max(worst[scope], n)
                done = conn.execute("SELECT count(*) FROM wfj_jobs WHERE status = 3").fetchone()[0]
                if done == 80:
                    break
        assert done == 80, f"only {done} of 80 completed"
        assert samples > 20
        assert all(n <= 3 for s, n in worst.items() if s.startswith("tenant")), worst
        assert all(n <= 1 for s, n in worst.items() if s.startswith("key")), worst
        assert max(worst.values()) >= 1
