"""Job groups on both stores: the completion job is stored exactly once, when
the group is closed and every member has ended (completed, faulted or
cancelled), with the summary as its payload; groups extend while open,
refuse members once closed, and cancelling one cancels its pending members."""

from __future__ import annotations

import json
import time

import pytest
import sqlalchemy as sa

from coordinator.api import convert
from coordinator.engine.events import event_matches
from coordinator.errors import FailedPrecondition, InvalidArgument, NotFound
from coordinator.model import (
    Completion,
    EventFilter,
    Failure,
    GroupStatus,
    JobEventKind,
    JobStatus,
)
from coordinator.store.groups import completion_key
from wfj_engine import Harness, run
from wfj_testing import make_job
from workflowjobs.v1 import scheduler_service_pb2 as spb


def _completion(**fields):
    return make_job(**{"job_type": "fan-in", "payload": b"", "content_type": "", **fields})


async def _leased(h: Harness, types=("noop",)) -> dict[str, str]:
    return {row.id: token for row, token in await h.lease(types=types)}


async def _completions(h: Harness, group_id: str) -> list:
    rows = await h.engine.run_store(
        h.engine.store.job_get_by_idempotency_key, "tenant-a", completion_key(group_id)
    )
    return [rows] if rows is not None else []


def test_the_completion_is_stored_once_the_last_member_ends_with_the_summary(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        members = [make_job(max_attempts=1) for _ in range(3)]
        group, results, _ = await h.engine.groups.create(_completion(), members, close=True)
        assert group.status == GroupStatus.CLOSED and group.total == 3
        ids = [r[0] for r in results]
        leased = await _leased(h)
        assert set(leased) == set(ids)
        await h.engine.report([Completion(ids[0], leased[ids[0]])])
        await h.engine.report([Failure(ids[1], leased[ids[1]], "boom", non_retryable=True)])
        assert await _completions(h, group.id) == []
        assert (await h.engine.groups.get(group.id)).status == GroupStatus.CLOSED
        await h.engine.ops.cancel_job(ids[2], "not needed")  # running: cancel requested
        await h.engine.report([Failure(ids[2], leased[ids[2]], "stopped")])
        [done] = await _completions(h, group.id)
        got = await h.engine.groups.get(group.id)
        assert (got.status, got.completion_job_id) == (GroupStatus.COMPLETED, done.id)
        assert got.counts == {
            int(JobStatus.COMPLETED): 1,
            int(JobStatus.FAULTED): 1,
            int(JobStatus.CANCELLED): 1,
        }
        assert (done.job_type, done.status) == ("fan-in", JobStatus.PENDING)
        assert json.loads(done.payload) == {
            "group_id": group.id,
            "total": 3,
            "completed": 1,
            "faulted": 1,
            "cancelled": 1,
        }
        # The completion job is leasable at once (the engine was woken).
        [(row, _)] = await h.lease(types=("fan-in",))
        assert row.id == done.id

    run(store_url, scenario)


def test_an_open_group_extends_and_completes_when_closed_after_its_members_ended(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        group, _, _ = await h.engine.groups.create(
            _completion(payload=b'{"mine":1}', content_type="application/json"), [], close=False
        )
        [(first, _, _)] = await h.engine.groups.enqueue([make_job(group_id=group.id)])
        leased = await _leased(h)
        await h.engine.report([Completion(first, leased[first])])
        assert await _completions(h, group.id) == []  # open: more may come
        [(second, _, _), _] = await h.engine.groups.enqueue(
            [make_job(group_id=group.id), make_job()]
        )
        assert (await h.engine.groups.get(group.id)).total == 2
        leased = await _leased(h)
        await h.engine.report([Completion(second, leased[second])])
        assert await _completions(h, group.id) == []
        closed = await h.engine.groups.close(group.id)
        assert closed.status == GroupStatus.COMPLETED
        [done] = await _completions(h, group.id)
        assert done.payload == b'{"mine":1}'  # a payload of its own is kept
        # Closing again changes nothing; joining is refused.
        assert (await h.engine.groups.close(group.id)).completion_job_id == done.id
        with pytest.raises(FailedPrecondition, match="COMPLETED: it takes no more members"):
            await h.engine.groups.enqueue([make_job(group_id=group.id)])
        assert len(await _completions(h, group.id)) == 1

    run(store_url, scenario)


def test_an_empty_closed_group_completes_at_once(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        group, _, _ = await h.engine.groups.create(_completion(), [], close=True)
        assert group.status == GroupStatus.COMPLETED
        [done] = await _completions(h, group.id)
        assert json.loads(done.payload)["total"] == 0

    run(store_url, scenario)


def test_cancelling_a_group_cancels_its_pending_members_and_running_ones_finish(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        group, results, _ = await h.engine.groups.create(
            _completion(), [make_job(), make_job(job_type="later")], close=False
        )
        running, pending = results[0][0], results[1][0]
        leased = await _leased(h)
        assert list(leased) == [running]
        row, cancelled = await h.engine.groups.cancel(group.id, "deploy")
        assert cancelled == [pending]
        assert row.status == GroupStatus.CLOSED
        job, _ = await h.job(pending)
        assert job.status == JobStatus.CANCELLED and "group" in (job.last_error or "")
        with pytest.raises(FailedPrecondition):
            await h.engine.groups.enqueue([make_job(group_id=group.id)])
        assert await _completions(h, group.id) == []
        await h.engine.report([Completion(running, leased[running])])
        [done] = await _completions(h, group.id)
        assert json.loads(done.payload)["cancelled"] == 1

    run(store_url, scenario)


def test_bad_groups_and_members_are_refused(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        group, _, _ = await h.engine.groups.create(_completion(), [], close=False)
        with pytest.raises(NotFound):
            await h.engine.groups.enqueue([make_job(group_id=group.id, tenant_id="tenant-b")])
        with pytest.raises(NotFound):
            await h.engine.groups.get("0190b6e2-5c1a-7d3e-8f00-123456789abc")
        with pytest.raises(InvalidArgument, match="group_id 'nope' is malformed"):
            await h.engine.groups.enqueue([make_job(group_id="nope")])
        with pytest.raises(InvalidArgument, match="members\\[1\\]: tenant_id 'tenant-b'"):
            await h.engine.groups.create(
                _completion(), [make_job(), make_job(tenant_id="tenant-b")], close=True
            )
        with pytest.raises(InvalidArgument, match="ordering_key"):
            await h.engine.groups.create(_completion(), [make_job(ordering_key="o")], close=True)
        with pytest.raises(InvalidArgument, match="completion: job_type is required"):
            await h.engine.groups.create(_completion(job_type=""), [], close=True)
        # Nothing of the refused calls was stored.
        assert (await h.engine.groups.get(group.id)).total == 0

    run(store_url, scenario)


def test_the_completion_job_links_to_its_members_enqueue_contexts(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        parents = [f"00-{i:032x}-{i:016x}-01" for i in range(1, 4)]
        members = [make_job(traceparent=tp) for tp in parents] + [make_job()]
        group, results, _ = await h.engine.groups.create(_completion(), members, close=True)
        leased = await _leased(h)
        await h.engine.report([Completion(job_id, leased[job_id]) for job_id, _, _ in results])
        [done] = await _completions(h, group.id)
        order = [tp for _, tp in sorted(zip((r[0] for r in results), [*parents, ""], strict=True))]
        assert json.loads(done.trace_links or "[]") == [tp for tp in order if tp]
        assert list(convert.job_to_proto(done).trace_links) == [tp for tp in order if tp]
        # A job of no group links to nothing.
        assert (await h.job(results[0][0]))[0].trace_links is None

    run(store_url, scenario)


def test_members_events_carry_the_group_id_and_a_filter_by_group_reads_only_theirs(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        group, results, _ = await h.engine.groups.create(
            _completion(), [make_job(max_attempts=1), make_job(job_type="later")], close=False
        )
        first, waiting = results[0][0], results[1][0]
        [(joined, _, _)] = await h.engine.groups.enqueue([make_job(group_id=group.id)])
        outside = await h.enqueue()
        leased = await _leased(h)
        assert set(leased) == {first, joined, outside}
        await h.engine.report([Completion(first, leased[first])])
        await h.engine.report([Failure(joined, leased[joined], "boom", non_retryable=True)])
        await h.engine.groups.cancel(group.id, "enough")  # cancels the waiting member
        [done] = await _completions(h, group.id)

        def read(flt: EventFilter) -> list:
            """Every event matching ``flt``, paged as a watcher pages."""
            seen, after = [], None
            deadline = time.monotonic() + 30
            while True:
                page = h.engine.store.event_read(flt, after, 1000)
                if page.held_back and time.monotonic() < deadline:  # PostgreSQL: not released
                    time.sleep(0.01)
                    continue
                seen.extend(page.events)
                if not page.more:
                    return seen
                after = page.scanned_to

        every = read(EventFilter())
        by_job = {e.job_id: e.group_id for e in every}
        assert by_job == {
            first: group.id,
            waiting: group.id,
            joined: group.id,
            outside: None,
            done.id: None,  # the completion job is no member
        }
        grouped = read(EventFilter(group_id=group.id))
        assert [(e.job_id, e.kind) for e in grouped] == [
            (e.job_id, e.kind) for e in every if e.group_id == group.id
        ]
        assert {e.kind for e in grouped} == {
            JobEventKind.ENQUEUED,
            JobEventKind.STARTED,
            JobEventKind.COMPLETED,
            JobEventKind.ATTEMPT_FAILED,
            JobEventKind.FAULTED,
            JobEventKind.CANCELLED,
        }
        assert all(event_matches(EventFilter(group_id=group.id), e) for e in grouped)
        assert not event_matches(EventFilter(group_id=group.id), _event_of(every, outside))
        kinds = read(EventFilter(group_id=group.id, kinds=(JobEventKind.CANCELLED,)))
        assert [e.job_id for e in kinds] == [waiting]
        # On the wire: the event names its group, and the filter reaches the store.
        wire = spb.WatchJobEventsResponse()
        convert.add_event(wire.events, grouped[0])
        convert.add_event(wire.events, _event_of(every, outside))
        assert [e.group_id for e in wire.events] == [group.id, ""]
        assert convert.event_filter_from_proto(spb.JobEventFilter(group_id=group.id)) == (
            EventFilter(group_id=group.id)
        )

    run(store_url, scenario)


def _event_of(events: list, job_id: str):
    return next(e for e in events if e.job_id == job_id)


def test_retention_deletes_a_completed_group_with_its_completion_job(store_url: str) -> None:
    day = 86_400 * 1_000_000

    async def scenario(h: Harness) -> None:
        group, results, _ = await h.engine.groups.create(
            _completion(), [make_job(), make_job()], close=True
        )
        leased = await _leased(h)
        await h.engine.report([Completion(job_id, leased[job_id]) for job_id, _, _ in results])
        [done] = await _completions(h, group.id)
        [(row, token)] = await h.lease(types=("fan-in",))
        await h.engine.report([Completion(row.id, token)])
        # An open group's finished member is kept while the group may complete.
        waiting, [(ended, _, _)], _ = await h.engine.groups.create(
            _completion(), [make_job(job_type="later")], close=False
        )
        await h.engine.ops.cancel_job(ended, "not needed")
        retention = h.chores.retention
        later = h.clock.now_us() + 8 * day
        while (await retention.run_once(later)).purged:
            pass
        with pytest.raises(NotFound, match=f"job group {group.id} not found"):
            await h.engine.groups.get(group.id)
        with pytest.raises(NotFound):
            await h.job(done.id)
        kept = await h.engine.groups.get(waiting.id)
        assert (kept.status, kept.counts) == (GroupStatus.OPEN, {int(JobStatus.CANCELLED): 1})
        # Once it completes, it goes with its completion job at that job's time.
        closed = await h.engine.groups.close(waiting.id)
        assert closed.status == GroupStatus.COMPLETED and closed.total == 1
        await h.engine.ops.cancel_job(closed.completion_job_id, "not needed")
        while (await retention.run_once(h.clock.now_us() + 8 * day)).purged:
            pass
        with pytest.raises(NotFound):
            await h.engine.groups.get(waiting.id)
        with h.engine.store.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM wfj_groups")).scalar_one() == 0

    run(store_url, scenario)
