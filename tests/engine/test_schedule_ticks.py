"""Scheduler ticks become jobs exactly once, on both stores: the schedule and
the nominal time are the key, misfires follow their policy (fire once late,
or skip), and a tick of a paused definition is stored and waits."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.engine.explain import explain
from coordinator.errors import InvalidArgument
from coordinator.model import (
    JobStatus,
    MisfirePolicy,
    PauseKind,
    PauseScope,
    ScheduleTick,
)
from wfj_engine import Harness, run
from wfj_testing import SECOND, T0, make_job


def _tick(at: int, policy: MisfirePolicy = MisfirePolicy.FIRE_ONCE_LATE, **kw) -> ScheduleTick:
    return ScheduleTick("nightly", at, policy, **kw)


async def _fire(h: Harness, tick: ScheduleTick, **fields):
    return await h.engine.enqueue_tick(make_job(due_at=0, **fields), tick)


def test_a_tick_fired_on_several_nodes_is_one_job_keyed_by_schedule_and_nominal_time(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        answers = await asyncio.gather(*(_fire(h, _tick(T0)) for _ in range(10)))
        assert len({row.id for row, _ in answers}) == 1
        assert sorted(existed for _, existed in answers) == [False] + [True] * 9
        row = answers[0][0]
        assert row.idempotency_key == "schedule:nightly@2027-01-15T08:00:00Z"
        # The next tick is another job; a node 30 s late (within the grace) still finds it.
        h.clock.advance(60)
        nxt, existed = await _fire(h, _tick(T0 + 60 * SECOND))
        assert not existed and nxt.id != row.id
        h.clock.advance(30)
        again, existed = await _fire(h, _tick(T0 + 60 * SECOND))
        assert existed and again.id == nxt.id
        # Another schedule's tick at the same time is its own.
        other, existed = await h.engine.enqueue_tick(make_job(due_at=0), ScheduleTick("hourly", T0))
        assert not existed and other.id not in (row.id, nxt.id)

    run(store_url, scenario)


def test_a_misfire_skipped_stores_nothing_unless_the_tick_has_a_job(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        on_time, _ = await _fire(h, _tick(T0, MisfirePolicy.SKIP))
        h.clock.advance(120)  # both ticks are now 60 s past their grace
        late_dup, existed = await _fire(h, _tick(T0, MisfirePolicy.SKIP))
        assert existed and late_dup.id == on_time.id
        assert await _fire(h, _tick(T0 + 1 * SECOND, MisfirePolicy.SKIP)) == (None, False)
        # A shorter grace makes a tick misfire sooner.
        h.clock.advance(0)
        skipped = await _fire(h, _tick(T0 + 110 * SECOND, MisfirePolicy.SKIP, grace_us=5 * SECOND))
        assert skipped == (None, False)

    run(store_url, scenario)


def test_late_ticks_fire_once_while_their_late_job_is_pending(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        h.clock.advance(3600)  # the scheduler comes back after an hour: a backlog of ticks
        first, existed = await _fire(h, _tick(T0))
        assert not existed and first.due_at == T0 + 3600 * SECOND
        for minute in range(1, 5):
            row, existed = await _fire(h, _tick(T0 + minute * 60 * SECOND))
            assert existed and row.id == first.id
        # Once the late job ran, the next late tick is a job of its own.
        await h.lease()
        row, existed = await _fire(h, _tick(T0 + 5 * 60 * SECOND))
        assert not existed and row.id != first.id
        # An on-time tick is unaffected by the schedule's pending late job.
        h.clock.advance(0)
        on_time, existed = await _fire(h, _tick(T0 + 3600 * SECOND))
        assert not existed and on_time.id not in (first.id, row.id)

    run(store_url, scenario)


def test_a_tick_of_a_paused_definition_is_stored_and_waits(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.pause(
            PauseScope(PauseKind.DEFINITION, value="def-1"), "ops", "maintenance", None
        )
        row, _ = await _fire(h, _tick(T0), definition_id="def-1")
        assert row.status == JobStatus.PENDING
        assert await h.lease() == []
        _, reasons = await explain(h.engine, row.id)
        assert "PAUSED" in [r.kind for r in reasons]
        again, existed = await _fire(h, _tick(T0), definition_id="def-1")
        assert existed and again.id == row.id

    run(store_url, scenario)


@pytest.mark.parametrize(
    ("tick", "fields", "message"),
    [
        (ScheduleTick("", T0), {}, "schedule_id is required"),
        (ScheduleTick("s", 0), {}, "nominal_time is required"),
        (ScheduleTick("s", T0), {"idempotency_key": "k"}, "leave idempotency_key empty"),
        (ScheduleTick("s", T0), {"due_at": T0 + SECOND}, "leave due_time empty"),
        (ScheduleTick("s", T0, grace_us=-1), {}, "misfire_grace"),
    ],
)
def test_bad_ticks_are_refused(
    store_url: str, tick: ScheduleTick, fields: dict, message: str
) -> None:
    async def scenario(h: Harness) -> None:
        fields.setdefault("due_at", 0)
        with pytest.raises(InvalidArgument, match=message):
            await h.engine.enqueue_tick(make_job(**fields), tick)

    run(store_url, scenario)
