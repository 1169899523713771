"""Every way a job ends, on both stores: its group completes and its ordering
key moves on to the next job, whichever statement ended it (store/job_end.py).

Each case ends, one way, a job that is the last member of a closed group (a
group's members have no ordering key), then a job with an ordering key that
a second job waits behind, and checks that the group's completion job is
stored and that the second job is the one leased next.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from coordinator.clock import US_PER_SECOND as SECOND
from coordinator.model import (
    Completion,
    Failure,
    GroupStatus,
    JobFilter,
    JobStatus,
    JobTypeDefaults,
    OrderingFailure,
)
from wfj_engine import Harness, run
from wfj_testing import make_job


async def _lease_one(h: Harness, job_id: str) -> str:
    [(row, token)] = await h.lease(types=("noop",))
    assert row.id == job_id
    return token


# Each ends job ``member`` (PENDING, the head of its key) and returns the
# status it ended with.
Ending = Callable[[Harness, str], Awaitable[JobStatus]]


async def _complete(h: Harness, member: str) -> JobStatus:
    await h.engine.report([Completion(member, await _lease_one(h, member))])
    return JobStatus.COMPLETED


async def _dead_letter(h: Harness, member: str) -> JobStatus:
    token = await _lease_one(h, member)
    await h.engine.report([Failure(member, token, "boom", "Boom", non_retryable=True)])
    return JobStatus.FAULTED


async def _attempts_used_up(h: Harness, member: str) -> JobStatus:
    await h.engine.report([Failure(member, await _lease_one(h, member), "boom", "Boom")])
    return JobStatus.FAULTED


async def _lease_expires(h: Harness, member: str) -> JobStatus:
    await _lease_one(h, member)
    h.clock.advance(31)
    assert (await h.chores.lease_reaper.run_once(h.clock.now_us())).reclaimed == 1
    return JobStatus.FAULTED


async def _execution_timeout(h: Harness, member: str) -> JobStatus:
    await _lease_one(h, member)
    chore = h.chores.execution_timeouts
    h.clock.advance(1 + chore.config.grace_s + 0.1)
    assert (await chore.run_once()).ended == 1
    return JobStatus.FAULTED


async def _cancel_pending(h: Harness, member: str) -> JobStatus:
    await h.engine.ops.cancel_job(member, "not needed")
    return JobStatus.CANCELLED


async def _cancel_running(h: Harness, member: str) -> JobStatus:
    token = await _lease_one(h, member)
    await h.engine.ops.cancel_job(member, "not needed")
    await h.engine.report([Failure(member, token, "stopped", "Cancelled")])
    return JobStatus.CANCELLED


async def _bulk_cancel(h: Harness, member: str) -> JobStatus:
    (row, _) = await h.job(member)
    count = await h.engine.ops.bulk_cancel(JobFilter(instance_id=row.instance_id), False, "tidy")
    assert count.changed == 1
    return JobStatus.CANCELLED


async def _unlock_cancelled(h: Harness, member: str) -> JobStatus:
    await _lease_one(h, member)
    await h.engine.ops.cancel_job(member, "not needed")  # running: cancel requested
    await h.engine.ops.unlock_job(member)
    return JobStatus.CANCELLED


async def _cancel_group(h: Harness, member: str) -> JobStatus:
    (row, _) = await h.job(member)
    assert row.group_id is not None
    _, cancelled = await h.engine.groups.cancel(row.group_id, "called off")
    assert cancelled == [member]
    return JobStatus.CANCELLED


ENDINGS: dict[str, Ending] = {
    "complete": _complete,
    "fail-to-dead-letter": _dead_letter,
    "end-of-attempts": _attempts_used_up,
    "lease-reaper": _lease_expires,
    "execution-timeout": _execution_timeout,
    "cancel-pending": _cancel_pending,
    "cancel-running": _cancel_running,
    "bulk-cancel": _bulk_cancel,
    "unlock-after-cancel": _unlock_cancelled,
    "cancel-group": _cancel_group,
}


@pytest.mark.parametrize("how", sorted(ENDINGS))
def test_each_way_a_job_ends_completes_its_group_and_moves_its_key_on(
    store_url: str, how: str
) -> None:
    async def scenario(h: Harness) -> None:
        # A FAULTED job lets its key move on under the skip policy.
        await h.engine.set_job_type_defaults(
            "noop", JobTypeDefaults(ordering_failure=OrderingFailure.SKIP)
        )
        member = make_job(max_attempts=1, execution_timeout_ms=1000)
        group, _, _ = await h.engine.groups.create(
            make_job(job_type="fan-in"), [member], close=True
        )

        ended = await ENDINGS[how](h, member.id)

        assert (await h.job(member.id))[0].status == ended
        got = await h.engine.groups.get(group.id)
        assert got.status == GroupStatus.COMPLETED, f"group left {got.status.name}"
        assert got.completion_job_id is not None
        assert (await h.job(got.completion_job_id))[0].job_type == "fan-in"
        if how == "cancel-group":
            return  # only a group's members end this way
        head = await h.enqueue(ordering_key="k", max_attempts=1, execution_timeout_ms=1000)
        behind = await h.enqueue(ordering_key="k")
        assert (await h.job(behind))[0].ordering_held

        assert await ENDINGS[how](h, head) == ended

        assert (await h.job(head))[0].status == ended
        [(row, _)] = await h.lease(types=("noop",))
        assert row.id == behind

    run(store_url, scenario)


def test_purging_a_faulted_job_that_held_its_key_lets_the_next_run(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        head = await h.enqueue(ordering_key="k", max_attempts=1)
        behind = await h.enqueue(ordering_key="k")
        token = await _lease_one(h, head)
        await h.engine.report([Failure(head, token, "boom", "Boom", non_retryable=True)])
        assert await h.lease(types=("noop",)) == []  # the FAULTED head blocks its key
        purged = await h.engine.run_store(
            h.engine.store.job_purge_finished,
            {int(JobStatus.FAULTED): h.clock.now_us() + SECOND},
            100,
        )
        assert purged == 1
        [(row, _)] = await h.lease(types=("noop",))
        assert row.id == behind

    run(store_url, scenario)
