"""Ordering keys end to end: two coordinators over one PostgreSQL, a worker on each,
one worker killed (SIGKILL) while it runs a key's head. Every key's jobs still
run one at a time, in enqueue order; other keys keep running meanwhile."""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from wfj_testing import read_records, wait_until
from worker_sdk import AdminClient, JobRequest, SchedulerClient


@pytest.fixture
def pg_url(pg_database):
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_ordering")
    yield url
    drop()


KEYS = ("order-a", "order-b", "order-c")
PER_KEY = 6


def test_ordering_holds_across_two_replicas_and_a_killed_worker(
    pg_url: str, processes: dict[str, Callable[..., Any]], tmp_path: Path
) -> None:
    first = processes["coordinator"](pg_url)
    second = processes["coordinator"](pg_url)
    doomed = processes["worker"](first.target, "--concurrency", "10")
    survivor = processes["worker"](second.target, "--concurrency", "10")
    gate = tmp_path / "gate"
    with SchedulerClient(first.target) as scheduler:
        # The head of order-a waits on a gate; whoever holds it is killed.
        held = scheduler.enqueue(
            "gate", {"path": str(gate)}, ordering_key="order-a", heartbeat_timeout=2
        )
        wait_until(
            lambda: (
                any(r[0] == "start" and r[1] == held.id for r in read_records(doomed.record))
                or any(r[0] == "start" and r[1] == held.id for r in read_records(survivor.record))
            ),
            30,
            "the gated head to start",
        )
        holder = doomed if any(r[1] == held.id for r in read_records(doomed.record)) else survivor
        other = survivor if holder is doomed else doomed
        order: dict[str, list[str]] = {key: [held.id] if key == "order-a" else [] for key in KEYS}
        # Enqueue through both replicas, keys interleaved.
        for n in range(PER_KEY):
            for i, key in enumerate(KEYS):
                target = first.target if (n + i) % 2 else second.target
                with SchedulerClient(target) as client:
                    [result] = client.enqueue_batch(
                        [
                            JobRequest(
                                "sleep",
                                {"seconds": 0.05},
                                ordering_key=key,
                                heartbeat_timeout=2,
                            )
                        ]
                    )
                order[key].append(result.job_id)
    with AdminClient(second.target) as admin:
        # Keys b and c finish while a's head is held.
        wait_until(
            lambda: all(
                admin.get_job(job_id).status.name == "COMPLETED"
                for key in ("order-b", "order-c")
                for job_id in order[key]
            ),
            120,
            "the other keys to finish",
        )
        assert all(admin.get_job(j).status.name == "PENDING" for j in order["order-a"][1:])
        explained = admin.explain_job(order["order-a"][1])
        assert any(
            f"behind job {held.id} in ordering key order-a" in r.message for r in explained.reasons
        ), explained.reasons
        holder.kill()
        gate.touch()
        # The lease of the killed worker's attempt runs out; the head runs again
        # on the other worker, and only then does the rest of the key follow.
        wait_until(
            lambda: all(admin.get_job(j).status.name == "COMPLETED" for j in order["order-a"]),
            180,
            "order-a to finish after the kill",
        )
        head = admin.get_job(held.id)
        assert [str(a.outcome) for a in head.attempts] == ["LEASE_EXPIRED", "COMPLETED"]
    records = read_records(holder.record, other.record)
    by_job: dict[str, list[tuple[str, float]]] = collections.defaultdict(list)
    for event, job_id, _worker, when in records:
        by_job[job_id].append((event, float(when)))
    for key, ids in order.items():
        # The run that completed each job, in the key's order, never overlap.
        runs = []
        for job_id in ids:
            events = sorted(by_job[job_id], key=lambda e: e[1])
            ends = [t for e, t in events if e == "end"]
            assert len(ends) == 1, (key, job_id, events)
            last_start = max(t for e, t in events if e == "start" and t <= ends[0])
            runs.append((last_start, ends[0]))
        for (_, previous_end), (start, _) in zip(runs, runs[1:], strict=False):
            assert start >= previous_end, (key, runs)
        # Every attempt of a later job started after every earlier job ended.
        starts_in_order = [
            job_id
            for _, job_id in sorted(
                (t, job_id) for job_id in ids for e, t in by_job[job_id] if e == "start"
            )
        ]
        assert starts_in_order == sorted(starts_in_order, key=ids.index), (key, starts_in_order)
