"""WaitForJob's waiters: an entry lives only while a caller waits (both stores)."""

from __future__ import annotations

import asyncio

from coordinator.model import Completion, JobStatus
from wfj_engine import Harness, run


async def _entries(waiters, n: int) -> None:
    """Until ``n`` jobs have waiters (the waits read their jobs first)."""
    for _ in range(3000):
        if len(waiters) >= n:
            break
        await asyncio.sleep(0.01)
    assert len(waiters) == n


def test_waits_leave_no_entry_when_the_deadline_passes_or_another_replica_finishes(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        waiters = h.engine.attempts.waiters
        jobs = [await h.enqueue() for _ in range(20)]
        # Callers whose deadline passes while their jobs stay pending.
        for job_id in jobs[:10]:
            try:
                await asyncio.wait_for(h.engine.wait_for_finish(job_id), 0.05)
            except TimeoutError:
                pass
        assert len(waiters) == 0
        # Several callers on one job, one leaving early: the entry stays for the
        # others, and goes with the last.
        shared = jobs[10]
        long_waits = [asyncio.ensure_future(h.engine.wait_for_finish(shared)) for _ in range(2)]
        await _entries(waiters, 1)
        try:
            await asyncio.wait_for(h.engine.wait_for_finish(shared), 0.05)
        except TimeoutError:
            pass
        assert len(waiters) == 1
        # Another replica (an engine of its own on the same database) runs and
        # completes the jobs: this replica is never told, its waits re-read.
        other = Harness(h.engine.store.url)
        try:
            waits = [asyncio.ensure_future(h.engine.wait_for_finish(j)) for j in jobs[11:]]
            await _entries(waiters, 10)
            leased = await other.lease(n=100)
            for row, token in leased:
                await other.engine.report_one(Completion(row.id, token, b"{}", ""))
            finished = await asyncio.wait_for(asyncio.gather(*waits, *long_waits), 30)
        finally:
            await other.engine.stop()
        assert {r.status for r in finished} == {JobStatus.COMPLETED}
        assert len(waiters) == 0

    run(store_url, scenario)
