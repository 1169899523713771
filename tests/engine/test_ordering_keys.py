"""Ordering keys on both stores: one job of a tenant's key at a time, in enqueue
order, through failures (per job type policy), pauses, cancels and retries."""

from __future__ import annotations

import pytest

from coordinator.clock import US_PER_SECOND as SECOND
from coordinator.engine.explain import explain
from coordinator.errors import InvalidArgument
from coordinator.model import (
    Completion,
    Failure,
    JobCategory,
    JobStatus,
    JobTypeDefaults,
    OrderingFailure,
    PauseKind,
    PauseScope,
)
from wfj_engine import Harness, run
from wfj_testing import make_job


async def _ids(h: Harness, n: int = 20) -> list[tuple[str, str]]:
    return [(row.id, token) for row, token in await h.lease(n, types=("noop", "step"))]


def test_one_job_of_a_key_at_a_time_in_enqueue_order(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        ordered = [(await h.enqueue(ordering_key="order-1", instance_id="i")) for _ in range(3)]
        other_key = await h.enqueue(ordering_key="order-2")
        same_key_other_tenant = await h.enqueue(ordering_key="order-1", tenant_id="tenant-b")
        plain = [await h.enqueue() for _ in range(2)]
        leased = dict(await _ids(h))
        assert set(leased) == {ordered[0], other_key, same_key_other_tenant, *plain}
        assert await _ids(h) == []
        _, reasons = await explain(h.engine, ordered[1])
        [reason] = [r for r in reasons if r.kind == "ORDERING"]
        assert reason.message.startswith(f"behind job {ordered[0]} in ordering key order-1")
        assert "running" in reason.message
        _, reasons = await explain(h.engine, ordered[2])
        assert f"behind job {ordered[0]} in ordering key order-1" in reasons[0].message
        for expected in ordered[1:]:
            [(head, token)] = [(i, t) for i, t in leased.items() if i in ordered]
            await h.engine.report([Completion(head, token)])
            leased = dict(await _ids(h))
            assert list(leased) == [expected]
        [(last, token)] = leased.items()
        await h.engine.report([Completion(last, token)])
        assert await _ids(h) == []

    run(store_url, scenario)


def test_a_faulted_head_blocks_its_key_until_retried_or_cancelled(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        first, second, third = [await h.enqueue(ordering_key="k") for _ in range(3)]
        [(head, token)] = await _ids(h)
        assert head == first
        await h.engine.report([Failure(first, token, "boom", "Boom", non_retryable=True)])
        assert (await h.job(first))[0].status == JobStatus.FAULTED
        assert await _ids(h) == []
        _, reasons = await explain(h.engine, second)
        [reason] = [r for r in reasons if r.kind == "ORDERING"]
        assert f"behind job {first} in ordering key k: it FAULTED" in reason.message
        assert f"wfjobs jobs retry {first}" in reason.message
        # An operator retry puts the head back first in line.
        await h.engine.ops.retry_job(first, False)
        [(head, token)] = await _ids(h)
        assert head == first
        await h.engine.report([Failure(first, token, "again", "Boom", non_retryable=True)])
        # Cancelling the faulted head sets it aside without running it: the key moves on.
        assert f"wfjobs jobs cancel {first}" in reason.message
        cancelled = await h.engine.ops.cancel_job(first, "give up")
        assert cancelled.status == JobStatus.CANCELLED
        assert cancelled.cancel_reason == "give up"
        [(head, _)] = await _ids(h)
        assert head == second
        assert (await h.job(third))[0].status == JobStatus.PENDING

    run(store_url, scenario)


def test_skip_policy_lets_the_key_move_on_past_a_faulted_job(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_job_type_defaults(
            "step", JobTypeDefaults(ordering_failure=OrderingFailure.SKIP)
        )
        listed = await h.engine.run_store(h.engine.store.job_type_defaults_list)
        assert [r.ordering_failure for r in listed] == [int(OrderingFailure.SKIP)]
        first, second = [await h.enqueue(job_type="step", ordering_key="k") for _ in range(2)]
        [(head, token)] = await _ids(h)
        await h.engine.report([Failure(head, token, "boom", "Boom", non_retryable=True)])
        [(nxt, token)] = await _ids(h)
        assert nxt == second
        # A retried earlier job waits for the running one, then goes first again.
        await h.engine.ops.retry_job(first, False)
        assert await _ids(h) == []
        await h.engine.report([Completion(second, token)])
        [(again, _)] = await _ids(h)
        assert again == first

    run(store_url, scenario)


def test_a_paused_head_holds_its_key_and_nothing_else(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        head = await h.enqueue(ordering_key="k", instance_id="paused-instance")
        behind = await h.enqueue(ordering_key="k", instance_id="free-instance")
        free = await h.enqueue(ordering_key="k2")
        scope = PauseScope(PauseKind.INSTANCE, "", "paused-instance")
        await h.engine.pause(scope, "ops", "", None)
        assert [i for i, _ in await _ids(h)] == [free]
        await h.engine.unpause(scope, "ops")
        assert [i for i, _ in await _ids(h)] == [head]
        assert (await h.job(behind))[0].status == JobStatus.PENDING

    run(store_url, scenario)


def test_cancelling_a_pending_head_lets_the_next_run(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        first, second = [await h.enqueue(ordering_key="k") for _ in range(2)]
        await h.engine.ops.cancel_job(first, "not needed")
        assert [i for i, _ in await _ids(h)] == [second]

    run(store_url, scenario)


def test_stats_count_the_pending_jobs_held_behind_their_key(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        a_head = [await h.enqueue(ordering_key="k") for _ in range(3)][0]
        await h.enqueue(ordering_key="k", tenant_id="tenant-b")
        await h.enqueue(ordering_key="k2", tenant_id="tenant-b", category=JobCategory.INTEGRATION)
        await h.enqueue(ordering_key="k2", tenant_id="tenant-b", category=JobCategory.INTEGRATION)
        await h.enqueue()
        everyone = await h.engine.ops.stats("", SECOND)
        assert (everyone.totals[JobStatus.PENDING], everyone.held) == (7, 3)
        assert (await h.engine.ops.stats("tenant-a", SECOND)).held == 2
        b = await h.engine.ops.stats("tenant-b", SECOND, int(JobCategory.INTEGRATION))
        assert (b.totals[JobStatus.PENDING], b.held) == (2, 1)
        # Only the heads (and the unkeyed job) start; when tenant-a's head
        # completes, the next job of its key is released: one fewer is held.
        leased = dict(await _ids(h))
        assert len(leased) == 4 and a_head in leased
        await h.engine.report([Completion(a_head, leased[a_head], b"{}")])
        assert (await h.engine.ops.stats("tenant-a", SECOND)).held == 1
        assert (await h.engine.ops.stats("", SECOND)).held == 2

    run(store_url, scenario)


def test_an_ordered_job_cannot_run_inline_and_a_long_key_is_refused(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        with pytest.raises(InvalidArgument, match="cannot have an ordering_key"):
            await h.engine.enqueue_inline(
                make_job(ordering_key="k"), "w-inline", enqueue_if_paused=False
            )
        with pytest.raises(InvalidArgument, match="ordering_key is 513 characters long"):
            await h.engine.enqueue([make_job(ordering_key="k" * 513)])

    run(store_url, scenario)


def test_the_ordering_check_is_one_index_probe_however_long_the_key(store_url: str) -> None:
    """The plan of the rule on a key with 3,000 queued jobs (among 18,000) reads both partial
    indexes by (tenant, key[, id]): its cost does not depend on the key's length."""
    import sqlalchemy as sa

    from coordinator.store import open_store
    from coordinator.store.ordering import ordering_allows

    store = open_store(store_url)
    try:
        jobs = [make_job(ordering_key="long") for _ in range(3_000)]
        store.job_insert_many(jobs)
        for k in range(40):
            store.job_insert_many([make_job(ordering_key=f"key-{k}") for _ in range(250)])
        store.job_insert_many([make_job() for _ in range(5_000)])
        if store.is_postgres:
            with store.engine.begin() as conn:
                conn.execute(sa.text("ANALYZE wfj_jobs"))
            explain_sql = "EXPLAIN (FORMAT TEXT) "
        else:
            explain_sql = "EXPLAIN QUERY PLAN "
        sql = f"{explain_sql}SELECT {ordering_allows('x')} FROM wfj_jobs x WHERE x.id = :id"
        with store.engine.begin() as conn:
            plan = "\n".join(
                str(row[-1]) for row in conn.execute(sa.text(sql), {"id": jobs[-1].id})
            )
        assert "ix_wfj_jobs_ordering_running" in plan, plan
        assert "ix_wfj_jobs_ordering_ahead" in plan, plan
    finally:
        store.dispose()


def test_a_replay_joins_the_end_of_its_key(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        first = await h.enqueue(ordering_key="k")
        [(head, token)] = await _ids(h)
        await h.engine.report([Completion(head, token)])
        second = await h.enqueue(ordering_key="k")
        replay = await h.engine.ops.replay_job(first)
        assert replay.ordering_key == "k"
        [(nxt, token)] = await _ids(h)
        assert nxt == second
        _, reasons = await explain(h.engine, replay.id)
        assert any(f"behind job {second} in ordering key k" in r.message for r in reasons)
        await h.engine.report([Completion(second, token)])
        assert [i for i, _ in await _ids(h)] == [replay.id]

    run(store_url, scenario)


def test_keys_queued_key_by_key_leave_their_heads_alone_in_the_ready_index(
    store_url: str,
) -> None:
    """Jobs behind their key's head are held: the lane read of acquisition (the ready
    index's terms) finds the heads alone, and the release reads the held index."""
    import sqlalchemy as sa

    from coordinator.store import open_store
    from coordinator.store.schema import ready_job

    store = open_store(store_url)
    try:
        keys = {k: [make_job(ordering_key=f"key-{k}") for _ in range(100)] for k in range(30)}
        for queued in keys.values():  # key by key
            store.job_insert_many(queued)
        store.job_insert_many([make_job() for _ in range(2_000)])
        if store.is_postgres:
            with store.engine.begin() as conn:
                conn.execute(sa.text("ANALYZE wfj_jobs"))
            explain_sql = "EXPLAIN (FORMAT TEXT) "
        else:
            explain_sql = "EXPLAIN QUERY PLAN "
        lane_read = (
            "SELECT x.id, x.ordering_key FROM wfj_jobs x WHERE x.tenant_id = 'tenant-a' "
            f"AND x.job_type = 'noop' AND x.definition_id = 'def-1' AND {ready_job('x')} "
            "ORDER BY x.priority DESC, x.due_at, x.id LIMIT 100"
        )
        # What is checked is that the terms match the partial indexes: on a
        # table this small the planner may prefer a sequential scan.
        no_seqscan = "SET LOCAL enable_seqscan = off"
        with store.engine.begin() as conn:
            if store.is_postgres:
                conn.execute(sa.text(no_seqscan))
            read = [r for r in conn.execute(sa.text(lane_read)) if r.ordering_key is not None]
            plan = "\n".join(str(r[-1]) for r in conn.execute(sa.text(explain_sql + lane_read)))
            assert [r.id for r in read] == [queued[0].id for queued in keys.values()]
            assert "ix_wfj_jobs_ready" in plan, plan
        # The release's read of a key's first held job (``ordering.release_next``).
        first_held = (
            "SELECT h.id FROM wfj_jobs h WHERE h.tenant_id = 'tenant-a' "
            "AND h.ordering_key = 'key-20' AND h.ordering_held ORDER BY h.ordering_seq LIMIT 1"
        )
        with store.engine.begin() as conn:
            if store.is_postgres:
                conn.execute(sa.text(no_seqscan))
            assert conn.execute(sa.text(first_held)).scalar() == keys[20][1].id
            plan = "\n".join(str(r[-1]) for r in conn.execute(sa.text(explain_sql + first_held)))
        assert "ix_wfj_jobs_ordering_held" in plan, plan
    finally:
        store.dispose()


def test_an_ordered_job_in_a_batch_with_a_group_member_is_held_behind_its_key(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        head = await h.enqueue(ordering_key="acct-9")
        group, _, _ = await h.engine.groups.create(make_job(job_type="fan-in"), [], close=False)
        [(member, _, _), (behind, _, _)] = await h.engine.groups.enqueue(
            [make_job(group_id=group.id), make_job(ordering_key="acct-9")]
        )
        row, _ = await h.job(behind)
        assert row.ordering_held  # stored held, never a candidate while its head lives
        _, reasons = await explain(h.engine, behind)
        assert any(r.kind == "ORDERING" and head in r.message for r in reasons)
        leased = dict(await _ids(h))
        assert set(leased) == {head, member}
        await h.engine.report([Completion(head, leased[head])])
        assert [i for i, _ in await _ids(h)] == [behind]

    run(store_url, scenario)
