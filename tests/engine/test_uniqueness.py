"""Uniqueness keys on both stores: unique while, unique for a period, debounce
(with its max wait), batches repeating a key, what ExplainJob says of a
debounced job, and bad rules refused before anything is stored."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.clock import US_PER_SECOND as SECOND
from coordinator.engine.explain import explain, unique_key
from coordinator.errors import InvalidArgument
from coordinator.model import (
    Completion,
    JobStatus,
    Uniqueness,
    UniqueOutcome,
    UniqueRule,
)
from wfj_engine import Harness, run
from wfj_testing import T0, make_job

CREATED, EXISTING, DEBOUNCED = (
    UniqueOutcome.CREATED,
    UniqueOutcome.EXISTING,
    UniqueOutcome.DEBOUNCED,
)


def _while(key: str, *statuses: JobStatus) -> Uniqueness:
    if statuses:
        return Uniqueness(key, UniqueRule.WHILE, statuses)
    return Uniqueness(key, UniqueRule.WHILE)


def _debounce(key: str, delay_s: int, max_wait_s: int = 0) -> Uniqueness:
    return Uniqueness(
        key, UniqueRule.DEBOUNCE, delay_us=delay_s * SECOND, max_wait_us=max_wait_s * SECOND
    )


async def _put(h: Harness, rule: Uniqueness, payload: bytes = b"{}", **fields):
    [answer] = await h.engine.enqueue_unique([make_job(payload=payload, **fields)], [rule])
    return answer


async def _finish(h: Harness, job_id: str) -> None:
    leased = dict((row.id, token) for row, token in await h.lease())
    await h.engine.report([Completion(job_id, leased[job_id])])


def test_unique_while_returns_the_live_job_and_admits_a_new_one_once_it_ended(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        first, outcome, status = await _put(h, _while("sync-42"))
        assert (outcome, status) == (CREATED, JobStatus.PENDING)
        assert await _put(h, _while("sync-42")) == (first, EXISTING, JobStatus.PENDING)
        # Another tenant's key of the same name is another key.
        other, outcome, _ = await _put(h, _while("sync-42"), tenant_id="tenant-b")
        assert outcome == CREATED and other != first
        [(row, token)] = [(r, t) for r, t in await h.lease() if r.id == first]
        assert await _put(h, _while("sync-42")) == (first, EXISTING, JobStatus.RUNNING)
        await h.engine.report([Completion(first, token)])
        assert (await unique_key(h.engine, (await h.job(first))[0])).job_id == first
        second, outcome, _ = await _put(h, _while("sync-42"))
        assert outcome == CREATED and second != first
        assert (await h.job(second))[0].status == JobStatus.PENDING
        # The key's row names the newest job: the first is no longer named by it.
        key = await unique_key(h.engine, (await h.job(second))[0])
        assert key is not None and (key.unique_key, key.rule) == ("sync-42", UniqueRule.WHILE)
        assert await unique_key(h.engine, (await h.job(first))[0]) is None

    run(store_url, scenario)


def test_unique_while_pending_only_lets_a_running_job_have_a_successor(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        rule = _while("refresh", JobStatus.PENDING)
        first, _, _ = await _put(h, rule)
        assert (await _put(h, rule))[:2] == (first, EXISTING)
        await h.lease()  # first runs now
        second, outcome, _ = await _put(h, rule)
        assert outcome == CREATED and second != first
        assert (await _put(h, rule))[:2] == (second, EXISTING)

    run(store_url, scenario)


def test_unique_for_a_period_holds_whatever_the_state_until_the_window_ends(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        rule = Uniqueness("digest", UniqueRule.PERIOD, period_us=600 * SECOND)
        first, outcome, _ = await _put(h, rule)
        assert outcome == CREATED
        await _finish(h, first)
        h.clock.advance(599)
        assert await _put(h, rule) == (first, EXISTING, JobStatus.COMPLETED)
        h.clock.advance(1)
        second, outcome, _ = await _put(h, rule)
        assert outcome == CREATED and second != first
        h.clock.advance(599)
        assert (await _put(h, rule))[:2] == (second, EXISTING)

    run(store_url, scenario)


def test_debounce_keeps_the_latest_payload_and_moves_the_due_time_up_to_the_max_wait(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        rule = _debounce("reindex", delay_s=10, max_wait_s=30)
        job_id, outcome, _ = await _put(h, rule, b'{"n":1}', due_at=0)
        assert outcome == CREATED
        row, _ = await h.job(job_id)
        assert row.due_at == T0 + 10 * SECOND
        for n, at in ((2, 8), (3, 16)):
            h.clock.advance(8)
            assert await _put(h, rule, f'{{"n":{n}}}'.encode(), due_at=0) == (
                job_id,
                DEBOUNCED,
                JobStatus.PENDING,
            )
            row, _ = await h.job(job_id)
            assert (row.payload, row.due_at) == (f'{{"n":{n}}}'.encode(), T0 + (at + 10) * SECOND)
        h.clock.advance(8)  # T0 + 24 s: now + 10 s is past the max wait (T0 + 30 s)
        assert (await _put(h, rule, b'{"n":4}', due_at=0))[:2] == (job_id, DEBOUNCED)
        row, _ = await h.job(job_id)
        assert (row.payload, row.due_at) == (b'{"n":4}', T0 + 30 * SECOND)
        _, reasons = await explain(h.engine, job_id)
        [reason] = [r for r in reasons if r.kind == "DEBOUNCED"]
        assert reason.count == 3 and reason.until == T0 + 30 * SECOND
        assert "3 later enqueue(s) of uniqueness key 'reindex'" in reason.message
        assert "max wait" in reason.message
        # Due now: the job fires with the latest payload; the next trigger is a new job.
        h.clock.advance(6)
        [(leased, _)] = await h.lease()
        assert (leased.id, leased.payload) == (job_id, b'{"n":4}')
        second, outcome, _ = await _put(h, rule, b'{"n":5}', due_at=0)
        assert outcome == CREATED and second != job_id
        _, reasons = await explain(h.engine, second)
        assert [r.kind for r in reasons if r.kind == "DEBOUNCED"] == []

    run(store_url, scenario)


def test_a_due_debounced_job_is_not_rewritten_a_new_trigger_gets_its_own(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        rule = _debounce("ping", delay_s=5)
        first, _, _ = await _put(h, rule, b"a", due_at=0)
        h.clock.advance(5)  # due, no worker has taken it yet
        second, outcome, _ = await _put(h, rule, b"b", due_at=0)
        assert outcome == CREATED and second != first
        assert (await h.job(first))[0].payload == b"a"

    run(store_url, scenario)


def test_a_batch_repeating_a_key_stores_one_job(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        jobs = [make_job(payload=p, due_at=0) for p in (b"1", b"2", b"3")] + [make_job()]
        rules = [_debounce("k", 10), _debounce("k", 10), _debounce("k", 10), None]
        results = await h.engine.enqueue_unique(jobs, rules)
        first = results[0][0]
        assert [o for _, o, _ in results] == [CREATED, DEBOUNCED, DEBOUNCED, CREATED]
        assert {i for i, _, _ in results[:3]} == {first}
        assert all(s == JobStatus.PENDING for _, _, s in results)
        assert (await h.job(first))[0].payload == b"3"
        results = await h.engine.enqueue_unique(
            [make_job(), make_job()], [_while("w"), _while("w")]
        )
        assert results[1] == (results[0][0], EXISTING, JobStatus.PENDING)

    run(store_url, scenario)


def test_fifty_concurrent_enqueues_of_one_key_store_one_job(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.enqueue()  # the lane exists: no lane insert orders the racers
        for rule in (_while("one"), _debounce("two", delay_s=60)):
            payloads = [f"p{i}".encode() for i in range(50)]
            answers = await asyncio.gather(
                *(_put(h, rule, p, due_at=0) for p in payloads), return_exceptions=True
            )
            assert all(isinstance(a, tuple) for a in answers), answers
            ids = {a[0] for a in answers}  # type: ignore[index]
            assert len(ids) == 1
            [job_id] = ids
            outcomes = sorted(a[1] for a in answers)  # type: ignore[index]
            then = EXISTING if rule.rule == UniqueRule.WHILE else DEBOUNCED
            assert outcomes == [CREATED] + [then] * 49
            row, _ = await h.job(job_id)
            created = next(p for p, a in zip(payloads, answers, strict=True) if a[1] == CREATED)  # type: ignore[index]
            if rule.rule == UniqueRule.WHILE:
                assert row.payload == created
            else:
                key = await h.engine.run_store(h.engine.store.unique_key_of_job, job_id)
                assert key is not None and key.debounced == 49
                assert row.payload in payloads
                # The next enqueue, after all of them, is the one whose payload stays.
                assert (await _put(h, rule, b"last", due_at=0))[:2] == (job_id, DEBOUNCED)
                assert (await h.job(job_id))[0].payload == b"last"

    run(store_url, scenario)


@pytest.mark.parametrize(
    ("rule", "fields", "message"),
    [
        (Uniqueness("", UniqueRule.WHILE), {}, "uniqueness.key is required"),
        (Uniqueness("k", UniqueRule.WHILE, ()), {}, "statuses names no status"),
        (Uniqueness("k", UniqueRule.PERIOD), {}, "uniqueness.period must be more than 0"),
        (_debounce("k", 0), {"due_at": 0}, "uniqueness.debounce.delay must be more than 0"),
        (_debounce("k", 10, 5), {"due_at": 0}, "max_wait must be at least its delay"),
        (_debounce("k", 10), {"due_at": T0 + SECOND}, "cannot have a due_time"),
        (_while("k"), {"ordering_key": "o"}, "both uniqueness and an ordering_key"),
    ],
)
def test_bad_rules_are_refused_and_store_nothing(
    store_url: str, rule: Uniqueness, fields: dict, message: str
) -> None:
    async def scenario(h: Harness) -> None:
        plain = make_job()
        with pytest.raises(InvalidArgument, match=message):
            await h.engine.enqueue_unique([plain, make_job(**fields)], [None, rule])
        with pytest.raises(Exception, match="not found|no job"):
            await h.job(plain.id)

    run(store_url, scenario)


def test_retention_purging_the_keys_job_frees_and_forgets_the_key(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        rule = Uniqueness("digest", UniqueRule.PERIOD, period_us=3600 * SECOND)
        first, _, _ = await _put(h, rule)
        await _finish(h, first)
        store = h.engine.store
        purged = await h.engine.run_store(
            store.job_purge_finished, {int(JobStatus.COMPLETED): T0 + 10 * SECOND}, 100
        )
        assert purged == 1
        assert await h.engine.run_store(store.unique_key_of_job, first) is None
        second, outcome, _ = await _put(h, rule)
        assert outcome == CREATED and second != first

    run(store_url, scenario)
