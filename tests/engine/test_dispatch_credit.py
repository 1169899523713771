"""Credit alone starts no acquisition pass (``Dispatcher.grant``), and no job
is stranded by it.

A pass that finds nothing for a stream notes the dispatcher's wake count on
it; credit the stream grants afterwards (a handler ended) starts a pass only
when something woke since, or when a wake-up time is queued while the loop
sleeps without one. These tests prove, on both stores:

- credit granted after a pass found nothing starts no pass, and leases
  nothing, not even a due job the dispatcher was never told of;
- a job enqueued after that (or any wake) is leased to that stream, at insert
  on PostgreSQL or by a pass;
- a job that became eligible while the stream had no credit is leased when
  the stream grants credit;
- a job that fell due while the stream had no credit is leased when the
  stream grants credit after its due time, not at the 15 s idle poll;
- a job another replica stored for later (its notification's due time,
  rounded up, is all this coordinator hears) is leased at the stream's
  first grant after that time, even when the pass at that time ran only
  for a stream of other job types;
- a job whose due time passed during a pass in which no stream had credit
  is leased at the next grant;
- a job whose due time passed during a pass that ran only for streams of
  other job types (a reached due time counts as a wake) is leased at the
  next grant;
- (PostgreSQL) a job whose row another claim held when a pass picked it is
  leased once the row is free, with no grant or wake: a pass whose picks
  were taken elsewhere notes nothing and runs again shortly, backing off
  while the row stays held.

Only the dispatcher's loop runs (the engine is not started: no wake listener,
no chores), on the harness's manual clock, so every wake is one the test
makes. Each test waits until the loop sleeps with nothing left to wake it
(``_settled``), then asserts on what it decided: passes counted, jobs leased
and delivered. The idle poll stays at 15 s, far beyond any of these tests.
"""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from coordinator.engine import LeaseBatch, WorkerSession
from coordinator.engine.dispatch import Dispatcher
from coordinator.model import JobStatus
from coordinator.store import open_store
from wfj_engine import Harness, run
from wfj_testing import SECOND, make_job

# Bounds a wait for the loop to settle; it only turns a loop that never
# settles into a failure (a settled loop takes milliseconds).
SETTLE_BOUND_S = 10.0


def _run(url: str, scenario) -> None:
    async def with_loop(h: Harness) -> None:
        assert h.engine.config.idle_poll_s >= 15.0
        h.engine.dispatcher.start()
        try:
            await scenario(h)
        finally:
            await h.engine.dispatcher.stop()

    run(url, with_loop)


async def _settled(dispatcher: Dispatcher) -> None:
    """Wait until the loop sleeps on its wake event and nothing has set it:
    every pass a wake or a grant asked for has run."""
    wake = dispatcher._wake
    async with asyncio.timeout(SETTLE_BOUND_S):
        await asyncio.sleep(0)
        # asyncio keeps an Event's waiters in ``_waiters``: someone waits = the loop sleeps.
        while wake.is_set() or not getattr(wake, "_waiters", ()):
            await asyncio.sleep(0.002)


async def _leased_by_the_pass_of_a_grant(h: Harness, session: WorkerSession, job_id: str) -> None:
    """One credit granted to ``session`` (a handler of its ended) starts a pass
    that leases ``job_id`` to it."""
    dispatcher = h.engine.dispatcher
    passes = dispatcher.passes
    h.engine.grant(session, 1)
    await _settled(dispatcher)
    assert dispatcher.passes > passes
    assert _delivered(session) == [job_id]
    row, _ = await h.job(job_id)
    assert (row.status, row.lease_owner) == (JobStatus.RUNNING, session.worker_id)


def _delivered(session: WorkerSession) -> list[str]:
    """Ids of the jobs queued on the stream so far (taken off its outbox)."""
    ids: list[str] = []
    while not session.outbox.empty():
        item = session.outbox.get_nowait()
        if isinstance(item, LeaseBatch):
            ids.extend(row.id for row in item.jobs)
    return ids


def _open(h: Harness, worker_id: str, credits: int) -> WorkerSession:
    session = WorkerSession(worker_id, frozenset({"noop"}), max_batch_size=100)
    h.engine.open_session(session)
    h.engine.grant(session, credits)
    return session


async def _found_nothing(h: Harness, credits: int = 1) -> WorkerSession:
    """A stream holding ``credits`` whose pass found nothing, with no wake since."""
    dispatcher = h.engine.dispatcher
    session = _open(h, "w1", credits)
    await _settled(dispatcher)
    assert dispatcher.passes >= 1 and session.credits == credits
    assert session.found_nothing_at == dispatcher._wakes
    return session


async def _spent_after_finding_nothing(h: Harness) -> WorkerSession:
    """A stream with no credit left whose last pass found nothing, with no wake since.

    Two workers of one credit each share a pass that finds one job: the pass
    found less than it wanted (nothing more is eligible for either), and one
    of them spent its credit on the job. The other leaves.
    """
    dispatcher = h.engine.dispatcher
    first, second = _open(h, "w1", 1), _open(h, "w2", 1)
    await _settled(dispatcher)
    job = make_job()
    await h.engine.enqueue([job])
    await _settled(dispatcher)
    got = {s: _delivered(s) for s in (first, second)}
    [(session, _)] = [(s, ids) for s, ids in got.items() if ids == [job.id]]
    other = second if session is first else first
    h.engine.close_session(other)
    await _settled(dispatcher)
    assert session.credits == 0
    assert session.found_nothing_at == dispatcher._wakes
    return session


async def _other_type_stream_with_credit(h: Harness) -> WorkerSession:
    """A stream of another job type that keeps its credit: the loop sleeps
    until the next due time it knows of, and that pass runs for this stream alone."""
    other = WorkerSession("w-other", frozenset({"other-type"}), max_batch_size=100)
    h.engine.open_session(other)
    h.engine.grant(other, 1)
    await _settled(h.engine.dispatcher)
    assert not h.engine.dispatcher._sleeps_untimed
    return other


async def _pass_after_due_time(h: Harness) -> None:
    """Move the clock past every queued due time and wait for the timed pass
    the loop runs then, and for the loop to settle after it."""
    dispatcher = h.engine.dispatcher
    h.clock.advance(1)
    passes = dispatcher.passes
    async with asyncio.timeout(SETTLE_BOUND_S):
        while dispatcher.passes == passes:
            await asyncio.sleep(0.005)
    await _settled(dispatcher)


async def _store_unannounced(h: Harness) -> str:
    """Store a due job without telling the dispatcher (no wake): a pass, if
    one ran, would lease it."""
    job = h.engine.prepare(make_job(), h.clock.now_us())
    await h.engine.run_store(h.engine.store.job_insert_many, [job])
    return job.id


def test_credit_granted_after_a_pass_found_nothing_starts_no_pass(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        dispatcher = h.engine.dispatcher
        session = await _found_nothing(h)
        hidden = await _store_unannounced(h)
        passes = dispatcher.passes
        h.engine.grant(session, 1)  # as a worker does when one of its handlers ends
        await _settled(dispatcher)
        assert dispatcher.passes == passes
        assert session.credits == 2
        assert _delivered(session) == []
        row, _ = await h.job(hidden)
        assert (row.status, row.lease_owner) == (JobStatus.PENDING, None)

    _run(store_url, scenario)


@pytest.mark.parametrize("event", ["enqueue_one", "enqueue", "wake"])
def test_a_job_that_becomes_eligible_after_that_is_leased_to_the_stream(
    store_url: str, event: str
) -> None:
    async def scenario(h: Harness) -> None:
        dispatcher = h.engine.dispatcher
        # The tenant's lane exists (leasing at insert serves known lanes only).
        await h.engine.ops.cancel_job(await h.enqueue(), "creates the lane")
        session = await _found_nothing(h)
        h.engine.grant(session, 1)
        await _settled(dispatcher)
        passes = dispatcher.passes
        if event == "enqueue_one":
            job_id = (await h.engine.enqueue_one(make_job()))[0].id
        elif event == "enqueue":
            job_id = await h.enqueue()
        else:
            # Stored unannounced, then a wake (as another replica's NOTIFY would be).
            job_id = await _store_unannounced(h)
            dispatcher.wake()
        await _settled(dispatcher)
        assert _delivered(session) == [job_id]
        row, _ = await h.job(job_id)
        assert (row.status, row.lease_owner) == (JobStatus.RUNNING, "w1")
        assert session.credits == 1
        assert session.in_flight.keys() == {job_id}
        if event == "enqueue_one" and h.engine.store.capabilities.lease_at_insert:
            assert dispatcher.passes == passes  # leased at insert, no pass needed
        else:
            assert dispatcher.passes > passes

    _run(store_url, scenario)


def test_a_job_that_became_eligible_while_the_stream_had_no_credit_is_leased_at_its_grant(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        dispatcher = h.engine.dispatcher
        session = await _spent_after_finding_nothing(h)
        job_id = await h.enqueue()  # a wake; no stream has credit to lease it
        await _settled(dispatcher)
        assert (await h.job(job_id))[0].status == JobStatus.PENDING
        await _leased_by_the_pass_of_a_grant(h, session, job_id)

    _run(store_url, scenario)


def test_a_job_that_fell_due_while_the_stream_had_no_credit_is_leased_at_its_grant(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        dispatcher = h.engine.dispatcher
        session = await _spent_after_finding_nothing(h)
        job_id = await h.enqueue(due_at=h.clock.now_us() + SECOND)
        await _settled(dispatcher)
        # Nothing woke (a due time is no wake), and the loop sleeps without a
        # timeout: no stream had credit. Only the queued due time can start a pass.
        assert session.found_nothing_at == dispatcher._wakes
        assert dispatcher._sleeps_untimed
        h.clock.advance(2)
        await _leased_by_the_pass_of_a_grant(h, session, job_id)

    _run(store_url, scenario)


def test_a_job_another_replica_stored_for_later_is_leased_at_the_grant_after_its_due_time(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        dispatcher = h.engine.dispatcher
        session = await _spent_after_finding_nothing(h)
        await _other_type_stream_with_credit(h)
        due = h.clock.now_us() + 15_000
        job = h.engine.prepare(make_job(due_at=due), h.clock.now_us())
        await h.engine.run_store(h.engine.store.job_insert_many, [job])
        # Another replica stored it; its notification carries the due time
        # rounded up to 10 ms, and the wake listener hands that to ``wake``.
        dispatcher.wake(-(-due // 10_000) * 10_000)
        await _settled(dispatcher)
        assert session.found_nothing_at == dispatcher._wakes
        await _pass_after_due_time(h)
        assert (await h.job(job.id))[0].status == JobStatus.PENDING
        await _leased_by_the_pass_of_a_grant(h, session, job.id)

    _run(store_url, scenario)


def test_a_job_whose_due_time_passed_in_a_pass_without_credit_is_leased_at_the_next_grant(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        dispatcher = h.engine.dispatcher
        first, second = _open(h, "w1", 1), _open(h, "w2", 1)
        await _settled(dispatcher)
        leased_now = make_job()
        later = make_job(due_at=h.clock.now_us() + 20_000)
        await h.engine.enqueue([leased_now, later])
        await _settled(dispatcher)
        # One stream spent its credit on the job due now; the pass found less
        # than it wanted, so both noted the wake count. The loop sleeps until
        # ``later`` falls due (the other stream still had credit) ...
        [session] = [s for s in (first, second) if _delivered(s) == [leased_now.id]]
        assert session.found_nothing_at == dispatcher._wakes
        # ... but that stream leaves, and the due time passes: the timed pass
        # finds no stream with credit.
        h.engine.close_session(second if session is first else first)
        await _pass_after_due_time(h)
        assert (await h.job(later.id))[0].status == JobStatus.PENDING
        h.engine.grant(session, 1)  # the handler of its job ended
        await _settled(dispatcher)
        assert _delivered(session) == [later.id]

    _run(store_url, scenario)


def test_a_job_that_fell_due_in_a_pass_for_other_streams_is_leased_at_the_next_grant(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        dispatcher = h.engine.dispatcher
        session = await _spent_after_finding_nothing(h)
        await _other_type_stream_with_credit(h)
        job_id = await h.enqueue(due_at=h.clock.now_us() + 20_000)
        await _settled(dispatcher)
        await _pass_after_due_time(h)
        assert not dispatcher._sleeps_untimed
        assert (await h.job(job_id))[0].status == JobStatus.PENDING
        await _leased_by_the_pass_of_a_grant(h, session, job_id)

    _run(store_url, scenario)


def test_a_job_whose_row_another_claim_held_is_leased_when_it_lets_go(store_url: str) -> None:
    """A pass skips a pick whose row another transaction holds (a replica's
    claim, SKIP LOCKED). The jobs behind it may be eligible, and no one tells
    this replica when the row is free: the pass must not count as one that
    found nothing, or the stream would wait for the idle poll (15 s) with
    credit in hand while the job waits with it."""
    if store_url.startswith("sqlite"):
        pytest.skip("SQLite serialises every write: no claim skips a held row")

    async def scenario(h: Harness) -> None:
        dispatcher = h.engine.dispatcher
        session = await _found_nothing(h, credits=2)
        held, free = await _store_unannounced(h), await _store_unannounced(h)
        holder = open_store(store_url)
        conn = holder.engine.connect()
        try:
            tx = conn.begin()
            conn.execute(sa.text("SELECT id FROM wfj_jobs WHERE id = :id FOR UPDATE"), {"id": held})
            dispatcher.wake()  # as another replica's NOTIFY of the two jobs would
            delivered: list[str] = []
            async with asyncio.timeout(SETTLE_BOUND_S):
                while free not in delivered:
                    await asyncio.sleep(0.005)
                    delivered += _delivered(session)
            assert delivered == [free]
            # Passes keep skipping the held row; none noted that it found
            # nothing. They back off: 10 ms, doubling up to 1 s (at most 7
            # passes in 0.6 s; 60 without the backoff).
            passes = dispatcher.passes
            await asyncio.sleep(0.6)
            assert 1 <= dispatcher.passes - passes <= 7
            assert session.found_nothing_at != dispatcher._wakes
            assert (await h.job(held))[0].status == JobStatus.PENDING
            tx.rollback()  # the other claim let go of the row, and tells no one
        finally:
            conn.close()
            holder.dispose()
        # No grant, no wake: the stream's remaining credit takes the job.
        async with asyncio.timeout(SETTLE_BOUND_S):
            while held not in delivered:
                await asyncio.sleep(0.005)
                delivered += _delivered(session)
        row, _ = await h.job(held)
        assert (row.status, row.lease_owner) == (JobStatus.RUNNING, session.worker_id)
        assert session.credits == 0
        # With no credit left, the loop sleeps until woken: no retry is left queued.
        await _settled(dispatcher)
        assert dispatcher._sleeps_untimed

    _run(store_url, scenario)
