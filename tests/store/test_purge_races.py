"""Retention's purges racing the writes that make a row worth keeping, on both stores.

A purge reads its candidates without locks and deletes them after; a writer
that commits in between (an operator's retry of a finished job, a claim that
advances a rate bucket) changes a row the purge already chose. Each test holds
that writer's transaction open at its commit (``PausedCommit``) or holds its
uncommitted write (``Gate``), lets the purge run into it, then commits: the
row must survive as the writer left it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from coordinator.model import (
    AttemptEnd,
    AttemptOutcome,
    Claim,
    JobStatus,
    LeasedForFailure,
    LimitKind,
)
from coordinator.store import Store, open_store
from wfj_races import Gate, PausedCommit, outcome_of
from wfj_testing import SECOND, T0, make_job

LEASE_MS = 30_000


def _faulted(store: Store) -> str:
    job = make_job(max_attempts=1)
    store.job_insert_many([job])
    [row] = store.job_claim([Claim(job.id, "w1")], "tok", T0, LEASE_MS)
    assert row.lease_token == "tok"

    def fail(leased: LeasedForFailure) -> AttemptEnd:
        return AttemptEnd(leased.id, AttemptOutcome.FAILED, JobStatus.FAULTED, error="boom")

    assert job.id in store.job_end_attempts([(job.id, "tok")], fail, T0 + SECOND)
    return job.id


def test_a_retry_committed_while_the_purge_runs_keeps_the_job(store_url: str, store: Store) -> None:
    job_id = _faulted(store)
    cutoffs = {int(JobStatus.FAULTED): T0 + 10 * SECOND}  # the job finished before: purgeable
    retrier, purger = open_store(store_url), open_store(store_url)
    paused = PausedCommit(retrier, store_url)
    paused.watch(purger)
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            retry = pool.submit(retrier.job_retry, job_id, False, T0 + 20 * SECOND)
            paused.wait_reached()  # the retry did its work; its commit is held
            purge = pool.submit(purger.job_purge_finished, cutoffs, 10)
            paused.racer_blocked()  # the purge chose the job and waits for the retry
            paused.release()
            change = outcome_of(retry)
            purged = outcome_of(purge)
    finally:
        paused.release()
        retrier.dispose()
        purger.dispose()
    assert change.changed, change
    assert purged == 0, "the purge deleted a job the operator had just retried"
    row = store.job_get(job_id)
    assert row is not None and row.status == JobStatus.PENDING and row.finished_at is None
    assert [a.number for a in store.job_attempts(job_id)] == [1]
    # A later pass leaves it too: it is PENDING, not finished.
    assert store.job_purge_finished(cutoffs, 10) == 0


def test_the_bucket_purge_keeps_a_bucket_a_claim_just_advanced(
    store_url: str, store: Store
) -> None:
    kind = int(LimitKind.JOB_TYPE)
    # An idle bucket: due (tat <= now) and not slowed, a candidate for the purge.
    with store.tx() as conn:
        store._settings.rate_buckets_write(conn, {(kind, "send"): (T0 - SECOND, 0, 0)})
    advanced = T0 + 5 * SECOND
    with Gate(store_url) as gate:
        gate.advance_bucket(kind, "send", advanced)  # a claim's charge, not committed yet
        purger = gate.store()
        purge = gate.race(purger.rate_bucket_purge, T0, 10)
        gate.open(waiting=1)
        purged = outcome_of(purge)
    assert purged == 0, "the purge deleted a bucket a claim had just advanced"
    assert store.rate_bucket_list([kind]) == {(kind, "send"): (advanced, 0, 0)}
    # Once due again it is idle and purged.
    assert store.rate_bucket_purge(advanced, 10) == 1
