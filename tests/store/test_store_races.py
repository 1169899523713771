"""Races at the store, forced into a known interleaving on both dialects.

Each test holds what the racing writers need in another connection (see
``wfj_races.Gate``), waits until every racer is blocked on it, then lets them
go at once. The guarded writes must give one clean answer whatever the order.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa

from coordinator.engine.admission import Admission
from coordinator.engine.concurrency_limits import LimitBook
from coordinator.model import (
    AttemptEnd,
    AttemptOutcome,
    Claim,
    Completion,
    ConcurrencyLimit,
    JobFilter,
    JobStatus,
    LeasedForFailure,
    LimitKind,
)
from coordinator.store import Store, open_store
from wfj_races import Gate, outcome_of
from wfj_testing import SECOND, T0, make_job

LEASE_MS = 30_000
RACERS = 8


def _lease(store: Store, job_id: str, token: str, now: int = T0, owner: str = "w1") -> None:
    [row] = store.job_claim([Claim(job_id, owner)], token, now, LEASE_MS)
    assert row.lease_token == token


def _fail(row: LeasedForFailure) -> AttemptEnd:
    return AttemptEnd(
        job_id=row.id,
        outcome=AttemptOutcome.FAILED,
        new_status=JobStatus.FAULTED,
        error="boom",
        error_kind="ValueError",
    )


def _expire(row: LeasedForFailure) -> AttemptEnd:
    return AttemptEnd(
        job_id=row.id,
        outcome=AttemptOutcome.LEASE_EXPIRED,
        new_status=JobStatus.PENDING,
        due_at=T0 + 60 * SECOND,
        error="lease expired",
        error_kind="LeaseExpired",
    )


def _history(store: Store, job_id: str) -> list[tuple[int, int]]:
    return [(a.number, a.outcome) for a in store.job_attempts(job_id)]


# -- idempotent enqueue --------------------------------------------------------


def _keyed_jobs_of(store: Store, tenant: str, key: str) -> list[str]:
    with store.engine.connect() as conn:
        return list(
            conn.execute(
                sa.text("SELECT id FROM wfj_jobs WHERE tenant_id = :t AND idempotency_key = :k"),
                {"t": tenant, "k": key},
            ).scalars()
        )


def test_enqueues_racing_an_uncommitted_insert_of_their_key_get_that_job(
    store_url: str, store: Store
) -> None:
    # The tenant already has jobs of this type: no lane insert serialises the racers.
    store.job_insert_many([make_job(tenant_id="t-idem")])
    winner = make_job(tenant_id="t-idem", idempotency_key="order-1")
    with Gate(store_url) as gate:
        gate.insert(winner)  # another caller's enqueue of the key, not committed yet
        racers = [
            gate.race(
                gate.store().job_insert_many,
                [make_job(tenant_id="t-idem", idempotency_key="order-1")],
            )
            for _ in range(RACERS)
        ]
        gate.open(waiting=RACERS)
        outcomes = [outcome_of(f) for f in racers]
    assert outcomes == [[(winner.id, True, JobStatus.PENDING)]] * RACERS
    assert _keyed_jobs_of(store, "t-idem", "order-1") == [winner.id]


def test_enqueues_racing_an_insert_that_rolls_back_store_one_job(
    store_url: str, store: Store
) -> None:
    store.job_insert_many([make_job(tenant_id="t-idem")])
    loser = make_job(tenant_id="t-idem", idempotency_key="order-2")
    mine = [make_job(tenant_id="t-idem", idempotency_key="order-2") for _ in range(RACERS)]
    with Gate(store_url) as gate:
        gate.insert(loser)
        racers = [gate.race(gate.store().job_insert_many, [job]) for job in mine]
        gate.open(waiting=RACERS, commit=False)
        outcomes = [outcome_of(f) for f in racers]
    assert all(isinstance(o, list) for o in outcomes), outcomes
    answers = [o[0] for o in outcomes]
    [stored] = _keyed_jobs_of(store, "t-idem", "order-2")
    assert stored in {j.id for j in mine}
    assert {job_id for job_id, _, _ in answers} == {stored}
    assert sorted(dedup for _, dedup, _ in answers) == [False] + [True] * (RACERS - 1)


def test_a_key_conflict_in_a_batch_does_not_fail_its_neighbours(
    store_url: str, store: Store
) -> None:
    store.job_insert_many([make_job(tenant_id="t-idem")])
    winner = make_job(tenant_id="t-idem", idempotency_key="order-3")
    batch = [
        make_job(tenant_id="t-idem"),
        make_job(tenant_id="t-idem", idempotency_key="order-3"),
        make_job(tenant_id="t-idem", idempotency_key="order-4"),
        make_job(tenant_id="t-idem", idempotency_key="order-3"),
    ]
    with Gate(store_url) as gate:
        gate.insert(winner)
        racer = gate.race(gate.store().job_insert_many, batch)
        gate.open(waiting=1)
        outcome = outcome_of(racer)
    assert outcome == [
        (batch[0].id, False, JobStatus.PENDING),
        (winner.id, True, JobStatus.PENDING),
        (batch[2].id, False, JobStatus.PENDING),
        (winner.id, True, JobStatus.PENDING),
    ]
    assert store.job_get(batch[0].id) is not None
    assert store.job_get(batch[2].id) is not None
    assert store.job_get(batch[1].id) is None


def test_inline_enqueues_racing_an_insert_of_their_key_get_that_job(
    store_url: str, store: Store
) -> None:
    store.job_insert_many([make_job(tenant_id="t-idem")])
    winner = make_job(tenant_id="t-idem", idempotency_key="order-5")
    with Gate(store_url) as gate:
        gate.insert(winner)
        racers = [
            gate.race(
                gate.store().job_insert_leased,
                make_job(tenant_id="t-idem", idempotency_key="order-5"),
                f"inline-{i}",
                f"tok-{i}",
                T0,
                LEASE_MS,
                False,
            )
            for i in range(RACERS)
        ]
        gate.open(waiting=RACERS)
        outcomes = [outcome_of(f) for f in racers]
    for outcome in outcomes:
        assert not isinstance(outcome, Exception), outcome
        row, dedup, held = outcome
        assert (row.id, row.status, dedup, held) == (winner.id, JobStatus.PENDING, True, None)
    assert _keyed_jobs_of(store, "t-idem", "order-5") == [winner.id]


def test_fifty_threads_enqueueing_one_key_get_one_job(store_url: str, store: Store) -> None:
    store.job_insert_many([make_job(tenant_id="t-idem")])
    stores = [open_store(store_url) for _ in range(4)]
    try:
        for key in ("k1", "k2", "k3"):
            start = threading.Barrier(50)

            def enqueue(s: Store, key: str = key, start: threading.Barrier = start) -> object:
                start.wait()
                return s.job_insert_many([make_job(tenant_id="t-idem", idempotency_key=key)])

            with ThreadPoolExecutor(max_workers=50) as pool:
                futures = [pool.submit(enqueue, stores[i % len(stores)]) for i in range(50)]
                answers = [outcome_of(f) for f in futures]
            [stored] = _keyed_jobs_of(store, "t-idem", key)
            assert all(isinstance(a, list) and a[0][0] == stored for a in answers), answers
    finally:
        for s in stores:
            s.dispose()


# -- outcomes racing on one job ------------------------------------------------


def test_stale_and_live_holders_completing_at_once(store_url: str, store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    _lease(store, job.id, "stale")
    assert [e.job_id for e in store.lease_reclaim_expired(_retry_now, T0 + 31 * SECOND, 10)] == [
        job.id
    ]
    _lease(store, job.id, "live", now=T0 + 31 * SECOND, owner="w2")
    with Gate(store_url) as gate:
        gate.lock_job(job.id)
        stale = gate.race(
            gate.store().job_complete_many, [Completion(job.id, "stale", b"old")], T0 + 32 * SECOND
        )
        live = gate.race(
            gate.store().job_complete_many, [Completion(job.id, "live", b"new")], T0 + 32 * SECOND
        )
        # PostgreSQL: the stale write matches no row version, so it does not even wait.
        gate.open(waiting=1 if store.is_postgres else 2)
        assert (set(outcome_of(stale)), set(outcome_of(live))) == (set(), {job.id})
    row = store.job_get(job.id)
    assert (row.status, row.result, row.lease_token) == (JobStatus.COMPLETED, b"new", None)
    assert _history(store, job.id) == [
        (1, AttemptOutcome.LEASE_EXPIRED),
        (2, AttemptOutcome.COMPLETED),
    ]


def _retry_now(row: LeasedForFailure) -> AttemptEnd:
    return AttemptEnd(
        job_id=row.id,
        outcome=AttemptOutcome.LEASE_EXPIRED,
        new_status=JobStatus.PENDING,
        due_at=T0,
        error="lease expired",
    )


def test_two_completes_and_a_fail_on_one_token_record_one_outcome(
    store_url: str, store: Store
) -> None:
    job = make_job()
    store.job_insert_many([job])
    _lease(store, job.id, "tok")
    with Gate(store_url) as gate:
        gate.lock_job(job.id)
        completes = [
            gate.race(
                gate.store().job_complete_many, [Completion(job.id, "tok", b"r%d" % i)], T0 + SECOND
            )
            for i in range(2)
        ]
        fail = gate.race(gate.store().job_end_attempts, [(job.id, "tok")], _fail, T0 + SECOND)
        gate.open(waiting=3)
        applied_completes = [set(outcome_of(f)) for f in completes]
        applied_fail = outcome_of(fail)
    winners = [c for c in applied_completes if c == {job.id}]
    assert all(c in (set(), {job.id}) for c in applied_completes), applied_completes
    assert len(winners) + (1 if applied_fail else 0) == 1, (applied_completes, applied_fail)
    row = store.job_get(job.id)
    if winners:
        assert row.status == JobStatus.COMPLETED and row.result in (b"r0", b"r1")
        assert _history(store, job.id) == [(1, AttemptOutcome.COMPLETED)]
    else:
        assert applied_fail[job.id].new_status == JobStatus.FAULTED
        assert row.status == JobStatus.FAULTED and row.last_error == "boom"
        assert _history(store, job.id) == [(1, AttemptOutcome.FAILED)]


# -- the reaper against a completion -------------------------------------------


class _HeldDecision:
    """A reaper decision that stops between the reaper's select and its update."""

    def __init__(self) -> None:
        self.selected = threading.Event()
        self.release = threading.Event()

    def __call__(self, row: LeasedForFailure) -> AttemptEnd:
        self.selected.set()
        assert self.release.wait(30), "the test never released the reaper"
        return _expire(row)


def test_completion_during_a_held_reclaim_loses_cleanly(store_url: str, store: Store) -> None:
    job = make_job(heartbeat_timeout_ms=2_000)
    store.job_insert_many([job])
    _lease(store, job.id, "tok")
    held = _HeldDecision()
    with Gate(store_url) as gate:
        gate.open(waiting=0)  # nothing held: the reaper itself is the gate
        reaper_store, completer = gate.store(), gate.store()
        reaper = gate.race(reaper_store.lease_reclaim_expired, held, T0 + 3 * SECOND, 10)
        assert held.selected.wait(30)
        completion = gate.race(
            completer.job_complete_many, [Completion(job.id, "tok", b"late")], T0 + 3 * SECOND
        )
        # The completion waits for the reaper's transaction (row lock / write lock).
        gate.wait_blocked(1 if store.is_postgres else 2)
        assert not completion.done()
        held.release.set()
        ends = outcome_of(reaper)
        assert set(outcome_of(completion)) == set()
    assert [e.job_id for e in ends] == [job.id]
    row = store.job_get(job.id)
    assert (row.status, row.result, row.lease_token) == (JobStatus.PENDING, None, None)
    assert _history(store, job.id) == [(1, AttemptOutcome.LEASE_EXPIRED)]


def test_reaper_and_completion_released_together_end_the_attempt_once(
    store_url: str, store: Store
) -> None:
    job = make_job(heartbeat_timeout_ms=2_000)
    store.job_insert_many([job])
    _lease(store, job.id, "tok")
    with Gate(store_url) as gate:
        gate.lock_job(job.id)
        completion = gate.race(
            gate.store().job_complete_many, [Completion(job.id, "tok", b"done")], T0 + 3 * SECOND
        )
        gate.wait_blocked(1)
        reaper = gate.race(gate.store().lease_reclaim_expired, _expire, T0 + 3 * SECOND, 10)
        if store.is_postgres:
            # SKIP LOCKED: the reaper leaves a row someone is writing to.
            assert outcome_of(reaper) == []
        gate.open(waiting=2 if not store.is_postgres else 1)
        applied = set(outcome_of(completion))
        ends = outcome_of(reaper)
    # Whichever went first, exactly one of them ended the attempt.
    row = store.job_get(job.id)
    if applied == {job.id}:
        assert ends == []
        assert (row.status, row.result) == (JobStatus.COMPLETED, b"done")
        assert _history(store, job.id) == [(1, AttemptOutcome.COMPLETED)]
    else:
        assert applied == set() and [e.job_id for e in ends] == [job.id]
        assert row.status == JobStatus.PENDING
        assert _history(store, job.id) == [(1, AttemptOutcome.LEASE_EXPIRED)]
    if store.is_postgres:
        assert applied == {job.id}


def _admission_of(claims: list[Claim], jobs: list) -> object:
    """The engine's admission of ``claims``, built from the limits as stored."""

    def build(rows, rate_rows):
        book = LimitBook(ConcurrencyLimit(LimitKind(r.kind), r.value, r.max_running) for r in rows)
        return Admission(book, claims, jobs)

    return build


def test_claims_racing_a_limit_change_wait_for_it_and_obey_it(store_url: str, store: Store) -> None:
    """A claim that starts while SetLimit is committing waits for it and then
    sees the new limit, though its own snapshot predates the change."""
    if not store.is_postgres:
        pytest.skip("SQLite serialises every write; one coordinator per file")
    store.limit_gate_ensure(T0)
    pending = [make_job() for _ in range(3)]
    store.job_insert_many(pending)
    cands = store.job_candidates(["noop"], 10, T0)
    claims = [Claim(c.id, "w1") for c in cands]
    with Gate(store_url) as gate:
        gate.change_limit(int(LimitKind.JOB_TYPE), "noop", 1, T0)
        one_statement = gate.race(
            gate.store().job_claim_fair,
            ["noop"],
            None,
            ["w1", "w1", "w1"],
            ([], [], [], 0.0),
            "tok-fair",
            T0,
            LEASE_MS,
        )
        counting = gate.race(
            gate.store().job_claim,
            claims,
            "tok-count",
            T0,
            LEASE_MS,
            _admission_of(claims, cands),
        )
        gate.open(waiting=2)
        # The one-statement claim leases nothing and says a limit exists; the
        # counting claim admits one job under it.
        assert outcome_of(one_statement) is None
        assert len(outcome_of(counting)) == 1
    running = store.job_list(JobFilter(statuses=[JobStatus.RUNNING]), None, 10)
    assert len(running) == 1


def test_a_limit_change_waits_for_claims_in_flight(store_url: str, store: Store) -> None:
    if not store.is_postgres:
        pytest.skip("SQLite serialises every write; one coordinator per file")
    store.limit_gate_ensure(T0)
    with Gate(store_url) as gate:
        gate.share_limit_gate()  # a claim in flight
        change = gate.race(gate.store().limit_set, int(LimitKind.JOB_TYPE), "noop", 1, T0)
        gate.open(waiting=1)
        assert outcome_of(change) is None
    assert [(r.value, r.max_running) for r in store.limit_list()] == [("noop", 1)]
