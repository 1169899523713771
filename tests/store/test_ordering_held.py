"""Only the head of an ordering key is a candidate, on both stores.

Jobs queued behind their key's head are stored held (out of the ready index);
every path that ends or revives a key's job releases the key's next job in
the same transaction (``coordinator/store/ordering.py``). Each test checks
what acquisition sees (``job_candidates``) and the stored held state.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from coordinator.model import (
    FINISHED_STATUSES,
    AttemptEnd,
    AttemptOutcome,
    Claim,
    Completion,
    JobStatus,
    LeasedForFailure,
)
from coordinator.store import Store
from wfj_races import Gate, outcome_of
from wfj_testing import SECOND, T0, make_job

LEASE_MS = 30_000
KEY = "instance-1"


def _enqueue(store: Store, n: int, *, key: str = KEY, **fields: object) -> list[str]:
    jobs = [make_job(ordering_key=key, **fields) for _ in range(n)]
    store.job_insert_many(jobs)
    return [j.id for j in jobs]


def _candidates(store: Store, now: int = T0) -> list[str]:
    return [c.id for c in store.job_candidates(["noop"], 1000, now)]


def _held(store: Store, ids: list[str]) -> list[bool]:
    rows = {r.id: r for r in store.job_get_many(ids)}
    return [rows[i].ordering_held for i in ids]


def _lease(store: Store, job_id: str, token: str = "tok") -> None:
    [row] = store.job_claim([Claim(job_id, "w1")], token, T0, LEASE_MS)
    assert row.id == job_id


def _ended(new_status: JobStatus, outcome: AttemptOutcome = AttemptOutcome.FAILED):
    def decide(row: LeasedForFailure) -> AttemptEnd:
        return AttemptEnd(
            job_id=row.id,
            outcome=outcome,
            new_status=new_status,
            error="boom",
            error_kind="Boom",
        )

    return decide


def test_a_key_queued_at_once_offers_only_its_head(store: Store) -> None:
    ids = _enqueue(store, 50)
    other = _enqueue(store, 3, key="instance-2")
    assert _held(store, ids) == [False] + [True] * 49
    assert _candidates(store) == [ids[0], other[0]]
    # Enqueued one by one behind a running head: held too.
    _lease(store, ids[0])
    later = _enqueue(store, 1)
    assert _held(store, later) == [True]


def test_the_head_completing_releases_the_next_in_order(store: Store) -> None:
    ids = _enqueue(store, 3)
    for i, job_id in enumerate(ids):
        assert _candidates(store) == [job_id]
        _lease(store, job_id, f"t{i}")
        assert _candidates(store) == []
        assert store.job_complete_many([Completion(job_id, f"t{i}")], T0) == {
            job_id: JobStatus.COMPLETED
        }
    assert _candidates(store) == []


def test_two_unheld_jobs_of_a_key_still_lease_one_at_a_time(store: Store) -> None:
    """Candidate reads leave the order check to the lease statements."""
    ids = _enqueue(store, 2)
    # As after two enqueues that raced: the second job left unheld.
    with store.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE wfj_jobs SET ordering_held = false WHERE id = :id"), {"id": ids[1]}
        )
    assert sorted(_candidates(store)) == sorted(ids)
    rows = store.job_claim([Claim(ids[1], "w1"), Claim(ids[0], "w2")], "tok", T0, LEASE_MS)
    assert [r.id for r in rows] == [ids[0]]
    assert store.job_claim([Claim(ids[1], "w1")], "tok2", T0, LEASE_MS) == []
    if store.capabilities.one_statement_claim:
        fair = store.job_claim_fair(
            ["noop"], None, ["w1", "w2"], ([], [], [], 0.0), "t3", T0, LEASE_MS
        )
        assert fair is not None and fair.rows == []
    store.job_complete_many([Completion(ids[0], "tok")], T0)
    [row] = store.job_claim([Claim(ids[1], "w1")], "tok4", T0, LEASE_MS)
    assert row.id == ids[1]


def test_a_job_enqueued_after_its_key_drained_is_not_held(store: Store) -> None:
    [first] = _enqueue(store, 1)
    _lease(store, first)
    store.job_complete_many([Completion(first, "tok")], T0)
    [second] = _enqueue(store, 1)
    assert _held(store, [second]) == [False]
    assert _candidates(store) == [second]


def test_cancelling_the_pending_head_releases_the_next_and_a_held_job_leaves_it(
    store: Store,
) -> None:
    head, second, third = _enqueue(store, 3)
    assert store.job_cancel(third, "not needed", T0).changed
    assert _candidates(store) == [head]
    assert store.job_cancel(head, "not needed", T0).changed
    assert _candidates(store) == [second]
    assert _held(store, [head, second, third]) == [False, False, False]


def test_bulk_cancel_of_a_head_releases_the_next(store: Store) -> None:
    from coordinator.model import JobFilter

    head, second = _enqueue(store, 2)
    [other] = _enqueue(store, 1, key="instance-2", instance_id="cancel-me")
    store.job_cancel(head, "", T0)  # head gone: second is the key's head
    assert _candidates(store) == [second, other]
    flt = JobFilter(instance_id="cancel-me")
    assert store.job_bulk_cancel(flt, [JobStatus.PENDING], "", T0).changed == 1
    assert _candidates(store) == [second]


@pytest.mark.parametrize("skip", [False, True])
def test_a_faulted_head_releases_the_next_only_with_the_skip_policy(
    store: Store, skip: bool
) -> None:
    head, second, third = _enqueue(store, 3, ordering_skip_failed=skip)
    _lease(store, head)
    ends = store.job_end_attempts([(head, "tok")], _ended(JobStatus.FAULTED), T0)
    assert ends[head].new_status == JobStatus.FAULTED
    assert _candidates(store) == ([second] if skip else [])
    assert _held(store, [second, third]) == [not skip, True]


def test_an_operator_retry_of_a_blocking_faulted_head_keeps_it_first(store: Store) -> None:
    head, second = _enqueue(store, 2)
    _lease(store, head, "t1")
    store.job_end_attempts([(head, "t1")], _ended(JobStatus.FAULTED), T0)
    assert store.job_retry(head, False, T0).changed
    assert _held(store, [head, second]) == [False, True]
    assert _candidates(store) == [head]
    _lease(store, head, "t2")
    store.job_complete_many([Completion(head, "t2")], T0)
    assert _candidates(store) == [second]


def test_a_retried_job_waits_behind_the_running_head_then_runs_before_later_ones(
    store: Store,
) -> None:
    first, second, third = _enqueue(store, 3, ordering_skip_failed=True)
    _lease(store, first, "t1")
    store.job_end_attempts([(first, "t1")], _ended(JobStatus.FAULTED), T0)
    _lease(store, second, "t2")
    # The skipped job comes back while the key's head runs: it waits, held.
    assert store.job_retry(first, False, T0).changed
    assert _held(store, [first, third]) == [True, True]
    assert _candidates(store) == []
    store.job_complete_many([Completion(second, "t2")], T0)
    # Released in id order: the retried job, then the rest.
    assert _candidates(store) == [first]


def test_bulk_retry_revives_a_cancelled_key_in_order(store: Store) -> None:
    from coordinator.model import JobFilter

    ids = _enqueue(store, 3, instance_id="bulk")
    flt = JobFilter(instance_id="bulk")
    assert store.job_bulk_cancel(flt, [JobStatus.PENDING], "", T0).changed == 3
    assert store.job_bulk_retry(flt, [JobStatus.CANCELLED], False, T0).changed == 3
    assert _held(store, ids) == [False, True, True]
    assert _candidates(store) == [ids[0]]


def test_a_replay_is_held_behind_a_live_key_and_not_behind_a_finished_one(
    store: Store,
) -> None:
    head, second = _enqueue(store, 2)
    replay = store.job_replay(head, "replay-1", T0)
    assert replay is not None and replay.ordering_held
    for job_id, token in ((head, "t1"), (second, "t2"), ("replay-1", "t3")):
        assert _candidates(store) == [job_id]
        _lease(store, job_id, token)
        store.job_complete_many([Completion(job_id, token)], T0)
    again = store.job_replay(head, "replay-2", T0)
    assert again is not None and not again.ordering_held
    assert _candidates(store) == ["replay-2"]


def test_unlocking_a_head_whose_cancel_was_requested_releases_the_next(store: Store) -> None:
    head, second = _enqueue(store, 2)
    _lease(store, head)
    store.job_cancel(head, "stop", T0)  # RUNNING: cancel requested
    assert _candidates(store) == []
    change = store.job_unlock(head, T0)
    assert change.row.status == JobStatus.CANCELLED
    assert _candidates(store) == [second]


def test_an_unlocked_head_stays_first(store: Store) -> None:
    head, second = _enqueue(store, 2)
    _lease(store, head)
    assert store.job_unlock(head, T0).row.status == JobStatus.PENDING
    assert _candidates(store) == [head]
    assert _held(store, [second]) == [True]


def test_an_expired_lease_that_cancels_its_head_releases_the_next(store: Store) -> None:
    head, second = _enqueue(store, 2)
    _lease(store, head)
    ended = store.lease_reclaim_expired(
        _ended(JobStatus.CANCELLED, AttemptOutcome.LEASE_EXPIRED), T0 + 60 * SECOND, 10
    )
    assert [e.job_id for e in ended] == [head]
    assert _candidates(store) == [second]


def test_purging_a_blocking_faulted_head_releases_the_next(store: Store) -> None:
    head, second = _enqueue(store, 2)
    _lease(store, head)
    store.job_end_attempts([(head, "tok")], _ended(JobStatus.FAULTED), T0)
    assert _candidates(store) == []
    cutoffs = {int(s): T0 + SECOND for s in FINISHED_STATUSES}
    assert store.job_purge_finished(cutoffs, 10) == 1
    assert _candidates(store) == [second]


def test_a_deduplicated_head_in_a_batch_does_not_hold_the_next(store: Store) -> None:
    first = make_job(ordering_key=KEY, idempotency_key="step-1")
    store.job_insert_many([first])
    _lease(store, first.id)
    store.job_complete_many([Completion(first.id, "tok")], T0)
    # The batch is resent with one more job: the first is the stored one, finished.
    again = make_job(ordering_key=KEY, idempotency_key="step-1")
    second = make_job(ordering_key=KEY, idempotency_key="step-2")
    result = store.job_insert_many([again, second])
    assert result[0] == (first.id, True, JobStatus.COMPLETED)
    assert _candidates(store) == [second.id]


def test_backlog_counts_include_held_jobs(store: Store) -> None:
    _enqueue(store, 4)
    [(tenant, job_type, _category, n, oldest)] = store.job_backlog_by_tenant_type(T0)
    assert (tenant, job_type, n, oldest) == ("tenant-a", "noop", 4, T0)
    assert store.job_oldest_pending_due(T0) == T0


# -- races ---------------------------------------------------------------------


def _lock_key(gate: Gate, key: str = KEY) -> None:
    """Hold the key's lock in the gate's transaction, as a writer of the key does."""
    from coordinator.store.ordering import lock_keys

    lock_keys(gate._conn, gate.is_postgres, [("tenant-a", key)])


@pytest.mark.parametrize("enqueue_first", [True, False])
def test_a_job_enqueued_while_its_head_completes_is_never_stuck(
    store_url: str, store: Store, enqueue_first: bool
) -> None:
    [head] = _enqueue(store, 1)
    _lease(store, head)
    new = make_job(ordering_key=KEY)
    with Gate(store_url) as gate:
        _lock_key(gate)
        racers = []
        for step in ("enqueue", "complete") if enqueue_first else ("complete", "enqueue"):
            if step == "enqueue":
                racers.append(gate.race(gate.store().job_insert_many, [new]))
            else:
                racers.append(
                    gate.race(gate.store().job_complete_many, [Completion(head, "tok")], T0)
                )
            gate.wait_blocked(len(racers))
        gate.open(waiting=2)
        outcomes = [outcome_of(f) for f in racers]
    assert not any(isinstance(o, Exception) for o in outcomes), outcomes
    assert store.job_get(head).status == JobStatus.COMPLETED
    assert _candidates(store) == [new.id]


def test_a_job_enqueued_while_its_head_is_cancelled_is_never_stuck(
    store_url: str, store: Store
) -> None:
    head, second = _enqueue(store, 2)
    new = make_job(ordering_key=KEY)
    with Gate(store_url) as gate:
        _lock_key(gate)
        cancel = gate.race(gate.store().job_cancel, head, "", T0)
        gate.wait_blocked(1)
        enqueue = gate.race(gate.store().job_insert_many, [new])
        gate.open(waiting=2)
        outcomes = [outcome_of(cancel), outcome_of(enqueue)]
    assert not any(isinstance(o, Exception) for o in outcomes), outcomes
    assert _candidates(store) == [second]
    assert _held(store, [new.id]) == [True]


def test_heads_of_two_keys_completing_in_one_batch_release_both(store: Store) -> None:
    a = _enqueue(store, 2, key="a")
    b = _enqueue(store, 2, key="b")
    _lease(store, a[0], "ta")
    _lease(store, b[0], "tb")
    store.job_complete_many([Completion(a[0], "ta"), Completion(b[0], "tb")], T0)
    assert sorted(_candidates(store)) == sorted([a[1], b[1]])


# -- migration -----------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_mig_held")
    try:
        yield url
    finally:
        drop()


def test_migration_holds_every_job_queued_behind_a_live_job_of_its_key(fresh_url: str) -> None:
    from coordinator.store import open_store
    from coordinator.store.migrate import upgrade

    store = open_store(fresh_url)
    try:
        upgrade(store, "0012")
        rows = [
            # key a: a running job, then two pending ones (held).
            ("a1", "a", JobStatus.RUNNING, False),
            ("a2", "a", JobStatus.PENDING, False),
            ("a3", "a", JobStatus.PENDING, False),
            # key b: a blocking FAULTED head, then a pending job (held).
            ("b1", "b", JobStatus.FAULTED, False),
            ("b2", "b", JobStatus.PENDING, False),
            # key c: a skipped FAULTED job, then the head and one held behind it.
            ("c1", "c", JobStatus.FAULTED, True),
            ("c2", "c", JobStatus.PENDING, True),
            ("c3", "c", JobStatus.PENDING, True),
            # key d: finished jobs only, then the head.
            ("d1", "d", JobStatus.COMPLETED, False),
            ("d2", "d", JobStatus.PENDING, False),
            # no key
            ("e1", None, JobStatus.PENDING, False),
        ]
        with store.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO wfj_lanes (tenant_id, job_type, definition_id)"
                    " VALUES ('tenant-a', 'noop', '')"
                )
            )
            for job_id, key, status, skip in rows:
                conn.execute(
                    sa.text(
                        "INSERT INTO wfj_jobs (id, job_type, tenant_id, payload, status,"
                        " max_attempts, created_at, due_at, ordering_key, ordering_skip_failed)"
                        " VALUES (:id, 'noop', 'tenant-a', :p, :s, 3, 0, 0, :k, :skip)"
                    ),
                    {"id": job_id, "p": b"{}", "s": int(status), "k": key, "skip": skip},
                )
        upgrade(store)
        store.check_schema()
        held = {r.id for r in store.job_get_many([r[0] for r in rows]) if r.ordering_held}
        assert held == {"a2", "a3", "b2", "c3"}
        assert sorted(_candidates(store, now=1)) == ["c2", "d2", "e1"]
    finally:
        store.dispose()


def _id_at(ms: int) -> str:
    """A UUIDv7 as a replica whose host clock reads ``ms`` would make it."""
    rand = 0x8000_0000_0000_0000 | 0x1234_5678_9ABC
    h = f"{(ms << 80) | (0x7 << 76) | rand:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def test_a_keys_jobs_run_in_the_order_they_were_stored_not_their_ids(store: Store) -> None:
    # B is enqueued through a replica with a correct clock, then C through
    # one whose clock is 5 s behind: C's id sorts before B's.
    now_ms = T0 // 1000
    [head] = _enqueue(store, 1)
    b = make_job(id=_id_at(now_ms), ordering_key=KEY)
    c = make_job(id=_id_at(now_ms - 5000), ordering_key=KEY)
    store.job_insert_many([b])
    store.job_insert_many([c])
    assert c.id < b.id
    assert _held(store, [b.id, c.id]) == [True, True]
    _lease(store, head)
    store.job_complete_many([Completion(head, "tok", b"{}", "application/json")], T0)
    # B was stored first: it is released first, and C waits behind it.
    assert _held(store, [b.id, c.id]) == [False, True]
    assert _candidates(store) == [b.id]
    assert store.job_ordering_blocker("tenant-a", KEY, c.id).id == b.id
    _lease(store, b.id, "tok-b")
    store.job_complete_many([Completion(b.id, "tok-b", b"{}", "application/json")], T0)
    assert _candidates(store) == [c.id]


def test_two_jobs_of_a_key_left_unheld_run_in_the_order_they_were_stored(
    store_url: str, store: Store
) -> None:
    # Stored unheld side by side (as concurrent enqueues that raced can leave
    # them), the one stored first is the head whatever the ids say.
    now_ms = T0 // 1000
    b = make_job(id=_id_at(now_ms), ordering_key=KEY)
    c = make_job(id=_id_at(now_ms - 5000), ordering_key=KEY)
    store.job_insert_many([b])
    with Gate(store_url) as gate:
        gate.insert(c)  # stored unheld, bypassing the enqueue's check
        gate.open(waiting=0)
    assert _held(store, [b.id, c.id]) == [False, False]
    claimed = store.job_claim([Claim(c.id, "w1"), Claim(b.id, "w1")], "tok", T0, LEASE_MS)
    assert [r.id for r in claimed] == [b.id]
