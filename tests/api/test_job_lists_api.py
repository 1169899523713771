"""ListJobs' order, pages before and after, the last page and the total, and
GetStats' scheduled count, over real gRPC on both stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from faults.harness import CoordinatorProcess

from wfj_testing import REPO
from worker_sdk import AdminClient, InvalidArgumentError, JobFilter, JobStatus, SchedulerClient

pytestmark = pytest.mark.e2e


@pytest.fixture
def target(database: str, tmp_path: Path) -> Iterator[str]:
    process = CoordinatorProcess(database, tmp_path)
    try:
        yield process.target
    finally:
        process.stop()


def test_lists_page_both_ways_in_either_order_with_their_total(target: str) -> None:
    with SchedulerClient(target) as scheduler, AdminClient(target) as admin:
        ids = [scheduler.enqueue("noop", {"n": n}, tenant_id="lists").id for n in range(7)]
        only = JobFilter(tenant_id="lists")

        def listed(**kwargs: object) -> tuple[list[str], str, str, int]:
            page = admin.list_jobs(only, page_size=3, **kwargs)  # type: ignore[arg-type]
            return (
                [j.id for j in page.jobs],
                page.prev_page_token,
                page.next_page_token,
                (page.total_count),
            )

        newest = ids[::-1]
        first, prev, nxt, total = listed(newest_first=True, include_total=True)
        assert (first, prev, total) == (newest[:3], "", 7)
        second, prev, nxt2, _ = listed(newest_first=True, page_token=nxt)
        assert second == newest[3:6] and prev and nxt2
        assert listed(newest_first=True, page_token=prev)[0] == newest[:3]
        third, prev3, nxt3, total = listed(newest_first=True, page_token=nxt2)
        assert (third, nxt3, total) == (newest[6:], "", 0)  # total only when asked
        assert listed(newest_first=True, page_token=prev3)[0] == newest[3:6]
        # The last page: the oldest three, with the way back and none onward.
        last, prev, nxt, _ = listed(newest_first=True, last_page=True)
        assert (last, nxt) == (newest[4:], "")
        assert listed(newest_first=True, page_token=prev)[0] == newest[1:4]
        # Oldest first is the default, as before.
        assert listed()[0] == ids[:3]
        assert listed(last_page=True)[0] == ids[4:]
        # A token belongs to its order.
        with pytest.raises(InvalidArgumentError, match="belongs to a list in the other order"):
            listed(page_token=nxt2)
        with pytest.raises(InvalidArgumentError, match="without page_token"):
            listed(page_token=nxt2, newest_first=True, last_page=True)


def test_stats_split_scheduled_from_due_pending_jobs(target: str) -> None:
    with SchedulerClient(target) as scheduler, AdminClient(target) as admin:
        for _ in range(2):
            scheduler.enqueue("noop", {}, tenant_id="sched")
        for _ in range(3):
            scheduler.enqueue("noop", {}, tenant_id="sched", delay=timedelta(hours=1))
        scheduler.enqueue("other", {}, tenant_id="sched", delay=timedelta(hours=1))
        stats = admin.get_stats(tenant_id="sched")
        assert (stats.pending, stats.scheduled) == (6, 4)
        rows = {(c.job_type, c.status): (c.count, c.scheduled) for c in stats.counts}
        assert rows == {("noop", JobStatus.PENDING): (5, 3), ("other", JobStatus.PENDING): (1, 1)}
        # The time they were counted at: a microsecond past it, due_before lists
        # the due ones and due_after the scheduled ones, exactly.
        assert stats.read_time is not None
        past = stats.read_time + timedelta(microseconds=1)
        pending = ["PENDING"]
        due = admin.list_jobs(JobFilter(statuses=pending, tenant_id="sched", due_before=past))
        later = admin.list_jobs(JobFilter(statuses=pending, tenant_id="sched", due_after=past))
        assert (len(due.jobs), len(later.jobs)) == (2, 4)


def wfjobs(target: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), WFJOBS_TARGET=target)
    env.pop("WFJOBS_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-m", "worker_sdk.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_cli_lists_newest_first_unless_sorted_oldest_and_splits_stats(target: str) -> None:
    with SchedulerClient(target) as scheduler:
        ids = [scheduler.enqueue("noop", {}, tenant_id="cli-sort").id for _ in range(4)]
        scheduler.enqueue("noop", {}, tenant_id="cli-sort", delay=timedelta(hours=1))

    def listed(*args: str) -> list[str]:
        out = wfjobs(target, "--json", "jobs", "list", "--tenant", "cli-sort", *args)
        return [j["id"] for j in json.loads(out)["jobs"]]

    later = listed("--limit", "1")[0]
    assert listed("--limit", "3")[1:] == ids[::-1][:2]
    assert listed("--sort", "oldest", "--limit", "3") == ids[:3]
    assert later not in ids
    stats = wfjobs(target, "stats", "--tenant", "cli-sort")
    # No worker is connected: the four that could start wait for one.
    assert "of the pending, 0 ready (runnable now), 4 held and 1 scheduled (not due yet)" in stats
    assert "held: 4 with no worker serving them" in stats


def test_stats_answer_the_attempt_counts_of_several_windows_in_one_call(target: str) -> None:
    with SchedulerClient(target) as scheduler, AdminClient(target) as admin:
        job = scheduler.enqueue("noop", {}, tenant_id="windows")
        admin.cancel_job(job.id)
        windows = [timedelta(minutes=5 * k) for k in range(1, 13)]
        stats = admin.get_stats(tenant_id="windows", windows=windows)
        assert [w.window for w in stats.windows] == windows
        assert all(w.completions == 0 and w.failures == 0 for w in stats.windows)
        assert admin.get_stats(tenant_id="windows").windows == []
        with pytest.raises(InvalidArgumentError, match="at most 24 windows"):
            admin.get_stats(windows=[timedelta(minutes=1)] * 25)
