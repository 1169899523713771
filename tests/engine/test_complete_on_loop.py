"""Completions of plain jobs go in one statement on the event loop
(``store.job_complete_on_loop``, called by ``Outcomes._complete``); the rest
take the store's threads (``store.job_complete_many``). On both stores:

- plain leased jobs completed on PostgreSQL make no thread call, and end
  COMPLETED (or CANCELLED when a cancel was requested) with their final
  event; on SQLite the loop statement answers None and the threads do it all;
- a job with an ordering key goes through the threads and its key's next
  job becomes runnable: on the replica that leased it (ordering keys seen,
  ``attempts.wake_replicas``: every completion takes the threads) and on one
  that has seen no ordered work, where only the keyed and grouped jobs of a
  report take the threads (the group's completion job is stored) and the
  plain one goes on the loop;
- under a concurrency limit every completion takes the threads;
- a completion under a stale lease token is refused (lease lost) and
  changes nothing;
- ``WFJOBS_STORE_ON_LOOP=0`` makes ``job_complete_on_loop`` answer None, and
  completions take the threads.

Each test counts the calls of both store methods (wrapped on the engine's
store) and reads back the jobs and their events.
"""

from __future__ import annotations

import asyncio

import pytest

from coordinator.errors import LeaseLost
from coordinator.model import (
    Completion,
    ConcurrencyLimit,
    EventFilter,
    GroupStatus,
    JobEventKind,
    JobStatus,
    LimitKind,
)
from coordinator.store import open_store
from coordinator.store.base import LOOP_COMPLETIONS
from coordinator.store.groups import completion_key
from wfj_engine import Harness, run
from wfj_races import Gate
from wfj_testing import T0, make_job


class _Calls:
    """The completions each store method was called with (job ids), and what
    the loop statement answered."""

    def __init__(self, h: Harness) -> None:
        self.threads: list[list[str]] = []
        self.loop: list[list[str]] = []
        self.loop_answers: list[dict[str, JobStatus] | None] = []
        store = h.engine.store
        threaded, on_loop = store.job_complete_many, store.job_complete_on_loop

        def complete_many(completions, *args, **kwargs):
            self.threads.append([c.job_id for c in completions])
            return threaded(completions, *args, **kwargs)

        async def complete_on_loop(completions, *args, **kwargs):
            self.loop.append([c.job_id for c in completions])
            answer = await on_loop(completions, *args, **kwargs)
            self.loop_answers.append(answer)
            return answer

        store.job_complete_many = complete_many  # type: ignore[method-assign]
        store.job_complete_on_loop = complete_on_loop  # type: ignore[method-assign]


def _events_of(h: Harness, job_id: str) -> list[int]:
    page = h.engine.store.event_read(EventFilter(job_id=job_id), None, 100)
    return [event.kind for event in page.events]


async def _leased(h: Harness, n: int = 10) -> dict[str, str]:
    return {row.id: token for row, token in await h.lease(n)}


def test_plain_completions_take_no_thread_on_postgresql(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        ids = [await h.enqueue() for _ in range(3)]
        leased = await _leased(h)
        assert set(leased) == set(ids)
        assert not h.engine.attempts.wake_replicas
        calls = _Calls(h)
        results = await h.engine.report(
            [Completion(i, leased[i], b'{"n": 1}', "application/json") for i in ids]
        )
        assert [(r.accepted, r.status, r.error) for r in results] == [
            (True, JobStatus.COMPLETED, None)
        ] * 3
        assert calls.loop == [ids]
        if h.engine.store.is_postgres:
            assert calls.loop_answers == [dict.fromkeys(ids, JobStatus.COMPLETED)]
            assert calls.threads == []
        else:
            assert calls.loop_answers == [None]
            assert calls.threads == [ids]
        for job_id in ids:
            row, _ = await h.job(job_id)
            assert row.status == JobStatus.COMPLETED
            assert (row.result, row.result_content_type) == (b'{"n": 1}', "application/json")
            assert (row.finished_at, row.lease_expires_at) == (T0, None)
            assert _events_of(h, job_id)[-1] == JobEventKind.COMPLETED
        assert h.engine.dispatcher.token_of(ids[0]) is None

    run(store_url, scenario)


def test_a_completion_whose_cancel_was_requested_ends_the_job_cancelled(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(row, token)] = await h.lease(1)
        await h.engine.ops.cancel_job(job_id, "not needed")  # running: requested
        calls = _Calls(h)
        [result] = await h.engine.report([Completion(job_id, token)])
        assert (result.accepted, result.status) == (True, JobStatus.CANCELLED)
        assert calls.threads == ([] if h.engine.store.is_postgres else [[job_id]])
        stored, _ = await h.job(job_id)
        assert stored.status == JobStatus.CANCELLED
        assert _events_of(h, job_id)[-1] == JobEventKind.CANCELLED

    run(store_url, scenario)


def test_a_keyed_completion_on_the_replica_that_leased_it_takes_the_threads(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        head, nxt = [await h.enqueue(ordering_key="k") for _ in range(2)]
        plain = await h.enqueue()
        leased = await _leased(h)
        assert set(leased) == {head, plain}
        # Ordering keys are in use here: every ended attempt wakes the replicas.
        assert h.engine.attempts.wake_replicas
        calls = _Calls(h)
        results = await h.engine.report([Completion(i, leased[i]) for i in (plain, head)])
        assert [(r.accepted, r.status) for r in results] == [(True, JobStatus.COMPLETED)] * 2
        assert (calls.loop, calls.threads) == ([], [[plain, head]])
        assert list(await _leased(h)) == [nxt]

    run(store_url, scenario)


def test_on_a_replica_without_ordered_work_only_keyed_and_grouped_jobs_take_the_threads(
    store_url: str,
) -> None:
    async def main() -> None:
        first = Harness(store_url)
        other = None
        try:
            head, nxt = [await first.enqueue(ordering_key="k") for _ in range(2)]
            plain = await first.enqueue()
            fan_in = make_job(job_type="fan-in", payload=b"", content_type="")
            group, [(member, _, _)], _ = await first.engine.groups.create(
                fan_in, [make_job()], close=True
            )
            leased = await _leased(first)
            assert set(leased) == {head, plain, member}
            # Another replica (or this one restarted): it has seen no ordered work.
            other = Harness(store_url)
            assert not other.engine.attempts.wake_replicas
            calls = _Calls(other)
            ids = [plain, head, member]
            results = await other.engine.report([Completion(i, leased[i]) for i in ids])
            assert [(r.accepted, r.status) for r in results] == [(True, JobStatus.COMPLETED)] * 3
            assert calls.loop == [ids]
            if other.engine.store.is_postgres:
                # The loop statement skips jobs with an ordering key or a group.
                assert calls.loop_answers == [{plain: JobStatus.COMPLETED}]
                assert calls.threads == [[head, member]]
            else:
                assert calls.threads == [ids]
            for job_id in ids:
                assert (await other.job(job_id))[0].status == JobStatus.COMPLETED
                assert _events_of(other, job_id)[-1] == JobEventKind.COMPLETED
            # The key's next job is runnable, and the group's completion job stored.
            assert (await other.engine.groups.get(group.id)).status == GroupStatus.COMPLETED
            done = await other.engine.run_store(
                other.engine.store.job_get_by_idempotency_key, "tenant-a", completion_key(group.id)
            )
            assert done is not None and done.status == JobStatus.PENDING
            assert list(await _leased(other)) == [nxt]
        finally:
            await first.engine.stop()
            if other is not None:
                await other.engine.stop()

    asyncio.run(main())


def test_under_a_concurrency_limit_completions_take_the_threads(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_limit(ConcurrencyLimit(LimitKind.JOB_TYPE, "noop", 5))
        ids = [await h.enqueue() for _ in range(2)]
        leased = await _leased(h)
        assert h.engine.attempts.wake_replicas
        calls = _Calls(h)
        results = await h.engine.report([Completion(i, leased[i]) for i in ids])
        assert [(r.accepted, r.status) for r in results] == [(True, JobStatus.COMPLETED)] * 2
        assert (calls.loop, calls.threads) == ([], [ids])

    run(store_url, scenario)


def test_a_completion_under_a_stale_lease_token_is_refused_and_changes_nothing(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, stale)] = await h.lease(1)
        assert (await h.engine.ops.unlock_job(job_id)).status == JobStatus.PENDING
        [(again, token)] = await h.lease(1)
        assert token != stale
        before = _events_of(h, job_id)
        calls = _Calls(h)
        [result] = await h.engine.report([Completion(job_id, stale, b"stale")])
        assert not result.accepted and isinstance(result.error, LeaseLost)
        if h.engine.store.is_postgres:
            assert calls.loop_answers == [{}]  # the loop statement changed no row
        row, _ = await h.job(job_id)
        assert (row.status, row.attempt, row.lease_token) == (JobStatus.RUNNING, 2, token)
        assert (row.result, row.finished_at) == (again.result, None)
        assert _events_of(h, job_id) == before
        # The current lease still completes the job.
        [result] = await h.engine.report([Completion(job_id, token, b"current")])
        assert (result.accepted, result.status) == (True, JobStatus.COMPLETED)
        row, _ = await h.job(job_id)
        assert (row.status, row.result) == (JobStatus.COMPLETED, b"current")

    run(store_url, scenario)


def test_store_on_loop_switch_sends_completions_to_the_threads(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WFJOBS_STORE_ON_LOOP", "0")

    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, token)] = await h.lease(1)
        calls = _Calls(h)
        [result] = await h.engine.report([Completion(job_id, token)])
        assert (result.accepted, result.status) == (True, JobStatus.COMPLETED)
        assert (calls.loop_answers, calls.threads) == ([None], [[job_id]])
        assert (await h.job(job_id))[0].status == JobStatus.COMPLETED

    run(store_url, scenario)
    # The store's own answer, asked directly (nothing is leased: nothing would change).
    store = open_store(store_url)
    try:
        answer = asyncio.run(store.job_complete_on_loop([Completion("no-such-job", "t")], T0))
        assert answer is None
    finally:
        store.dispose()


def test_completions_beyond_the_loops_share_take_the_threads_and_enqueues_go_on(
    store_url: str,
) -> None:
    """``LOOP_COMPLETIONS`` completions blocked on the loop's connections (rows
    locked by another transaction) leave the next completion to the store's
    threads and a connection to the group-commit insert: an enqueue is stored
    on the loop meanwhile, and every completion lands once the rows are free."""

    async def scenario(h: Harness) -> None:
        if not h.engine.store.is_postgres:
            pytest.skip("SQLite has no loop statement")
        for _ in range(LOOP_COMPLETIONS + 1):
            await h.enqueue()
        tokens = await _leased(h, LOOP_COMPLETIONS + 1)
        calls = _Calls(h)
        with Gate(store_url) as gate:
            for job_id in tokens:
                gate.lock_job(job_id)
            racers = []
            for job_id, token in tokens.items():
                racers.append(
                    asyncio.create_task(h.engine.report([Completion(job_id, token, b"done")]))
                )
                await asyncio.sleep(0.05)  # each reaches its statement in turn
            await asyncio.to_thread(gate.wait_blocked, LOOP_COMPLETIONS + 1)
            # Two wait on the loop's connections, the third on a store thread.
            assert len(calls.loop) == LOOP_COMPLETIONS + 1
            assert calls.loop_answers == [None]
            assert len(calls.threads) == 1
            row, _ = await h.engine.enqueue_one(make_job())
            assert (await h.job(row.id))[0].status == JobStatus.PENDING
            await asyncio.to_thread(gate.open, waiting=LOOP_COMPLETIONS + 1)
            results = [result for [result] in await asyncio.gather(*racers)]
        assert [r.accepted for r in results] == [True] * (LOOP_COMPLETIONS + 1)
        for job_id in tokens:
            assert (await h.job(job_id))[0].status == JobStatus.COMPLETED

    run(store_url, scenario)
