"""Conformance of the operator queries (store/jobs.py, store/workers.py) on both stores."""

from __future__ import annotations

import sqlalchemy as sa

from coordinator.model import (
    AttemptEnd,
    AttemptOutcome,
    Claim,
    Completion,
    JobFilter,
    JobRecord,
    JobStatus,
    LeasedForFailure,
    RetryPolicy,
    WorkerRecord,
)
from coordinator.store import Store
from wfj_testing import SECOND, T0, make_job

LEASE_MS = 30_000


def _claim(store: Store, job_ids: list[str], token: str = "tok", now: int = T0) -> None:
    rows = store.job_claim([Claim(j, "w1") for j in job_ids], token, now, LEASE_MS)
    assert {r.id for r in rows} == set(job_ids)


def _end(store: Store, job_id: str, token: str, status: JobStatus, now: int = T0) -> None:
    def decide(row: LeasedForFailure) -> AttemptEnd:
        return AttemptEnd(row.id, AttemptOutcome.FAILED, status, error="boom", error_kind="E")

    assert job_id in store.job_end_attempts([(job_id, token)], decide, now)


def _faulted(store: Store, **fields) -> str:
    job = make_job(**fields)
    store.job_insert_many([job])
    _claim(store, [job.id], token=f"t-{job.id}")
    _end(store, job.id, f"t-{job.id}", JobStatus.FAULTED)
    return job.id


def test_retry_resets_the_budget_and_keeps_history_numbers_unique(store: Store) -> None:
    job_id = _faulted(store, max_attempts=1)
    change = store.job_retry(job_id, keep_attempts=False, now=T0 + SECOND)
    assert change.changed
    row = change.row
    assert (row.status, row.attempt, row.max_attempts) == (JobStatus.PENDING, 1, 2)
    assert row.due_at == T0 + SECOND and row.finished_at is None and row.lease_token is None
    assert RetryPolicy.from_json(row.retry_policy).max_attempts == 1
    # The next attempt is number 2 and fits the new budget.
    _claim(store, [job_id], token="again", now=T0 + SECOND)
    _end(store, job_id, "again", JobStatus.FAULTED, now=T0 + SECOND)
    assert [a.number for a in store.job_attempts(job_id)] == [1, 2]
    # A second reset gives the original budget (1) again, not a growing one.
    assert store.job_retry(job_id, False, T0 + 2 * SECOND).row.max_attempts == 3


def test_retry_keeping_attempts_grants_one_more_when_exhausted(store: Store) -> None:
    job_id = _faulted(store, max_attempts=1)
    row = store.job_retry(job_id, keep_attempts=True, now=T0).row
    assert (row.attempt, row.max_attempts) == (1, 2)


def test_retry_refuses_other_states_and_reports_them(store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    change = store.job_retry(job.id, False, T0)
    assert not change.changed and change.row.status == JobStatus.PENDING
    missing = store.job_retry("0190b6e2-5c1a-7d3e-8f00-123456789abc", False, T0)
    assert missing.row is None and not missing.changed


def test_cancel_pending_ends_it_and_running_requests_it(store: Store) -> None:
    pending, running = make_job(), make_job()
    store.job_insert_many([pending, running])
    _claim(store, [running.id])
    p = store.job_cancel(pending.id, "not needed", T0 + SECOND)
    assert p.changed and p.row.status == JobStatus.CANCELLED
    assert p.row.finished_at == T0 + SECOND and p.row.last_error == "cancelled: not needed"
    r = store.job_cancel(running.id, "", T0)
    assert r.changed and r.row.status == JobStatus.RUNNING and r.row.cancel_requested
    # The worker learns it from its heartbeat answer.
    [(_, _, cancel)] = store.lease_extend_many([(running.id, "tok")], T0, LEASE_MS)
    assert cancel is True
    again = store.job_cancel(pending.id, "", T0)
    assert not again.changed and again.row.status == JobStatus.CANCELLED


def test_a_cancel_s_reason_outlives_the_attempt_and_a_retry_clears_it(store: Store) -> None:
    running, failing, pending = make_job(), make_job(), make_job()
    store.job_insert_many([running, failing, pending])
    _claim(store, [running.id], token="t1")
    _claim(store, [failing.id], token="t2")
    store.job_cancel(running.id, "wrong customer", T0)
    store.job_cancel(pending.id, "duplicate", T0)
    bulk = JobFilter(job_types=("noop",))
    assert store.job_bulk_cancel(bulk, [JobStatus.RUNNING], "bulk: wrong batch", T0).changed == 2
    # The handler then returns (a completion) or fails: the reason stays.
    store.job_complete_many([Completion(running.id, "t1", b"r")], T0 + SECOND)
    _end(store, failing.id, "t2", JobStatus.CANCELLED, now=T0 + SECOND)
    done, failed = store.job_get(running.id), store.job_get(failing.id)
    assert done is not None and failed is not None
    assert (done.status, failed.status) == (JobStatus.CANCELLED, JobStatus.CANCELLED)
    assert done.last_error != "cancelled: wrong customer"  # the attempt's own error
    # A later request's reason is the one kept.
    assert (done.cancel_reason, failed.cancel_reason) == ("bulk: wrong batch", "bulk: wrong batch")
    assert store.job_get(pending.id).cancel_reason == "duplicate"  # type: ignore[union-attr]
    assert store.job_retry(pending.id, False, T0 + 2 * SECOND).row.cancel_reason is None


def test_unlock_fences_the_old_lease_and_records_the_attempt(store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    _claim(store, [job.id], token="old")
    change = store.job_unlock(job.id, T0 + 5 * SECOND)
    assert change.changed
    assert (change.row.status, change.row.lease_token) == (JobStatus.PENDING, None)
    assert change.row.due_at == T0 + 5 * SECOND
    [attempt] = store.job_attempts(job.id)
    assert (attempt.outcome, attempt.number, attempt.worker_id) == (
        AttemptOutcome.UNLOCKED,
        1,
        "w1",
    )
    assert store.lease_extend_many([(job.id, "old")], T0, LEASE_MS) == []
    assert store.job_end_attempts([(job.id, "old")], lambda r: None, T0) == {}  # type: ignore[arg-type,return-value]
    assert not store.job_unlock(job.id, T0).changed


def test_unlock_of_a_cancel_requested_job_cancels_it(store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    _claim(store, [job.id])
    store.job_cancel(job.id, "", T0)
    row = store.job_unlock(job.id, T0).row
    assert row.status == JobStatus.CANCELLED
    assert store.job_attempts(job.id)[0].outcome == AttemptOutcome.CANCELLED


def test_replay_copies_payload_and_context_and_links_the_original(store: Store) -> None:
    original = make_job(
        payload=b"\x01raw",
        correlation_id="corr",
        idempotency_key="once",
        priority=4,
        execution_timeout_ms=9000,
    )
    store.job_insert_many([original])
    _claim(store, [original.id])
    new_id = "0190b6e2-5c1a-7d3e-8f00-123456789abc"
    row = store.job_replay(original.id, new_id, T0 + SECOND)
    assert row.id == new_id and row.replay_of == original.id
    assert (row.status, row.attempt, row.created_at) == (JobStatus.PENDING, 0, T0 + SECOND)
    assert (row.payload, row.correlation_id, row.priority) == (b"\x01raw", "corr", 4)
    assert (row.instance_id, row.execution_timeout_ms) == (original.instance_id, 9000)
    assert row.idempotency_key is None and row.lease_owner is None
    assert store.job_replay("0190b6e2-5c1a-7d3e-8f00-000000000000", new_id, T0) is None


def test_single_job_writes_hand_out_the_job_as_every_read_does(store: Store) -> None:
    """Retry, cancel, unlock and replay answer with a ``JobRecord`` (the store's
    ``JobRow``), as ``job_get`` does, whether or not the write applied: a bare
    database row has none of its behaviour (``counted_attempts``)."""
    faulted = _faulted(store, max_attempts=1)
    pending, running = make_job(), make_job()
    store.job_insert_many([pending, running])
    _claim(store, [running.id])
    rows = {
        "retry": store.job_retry(faulted, keep_attempts=True, now=T0).row,
        "retry refused": store.job_retry(pending.id, False, T0).row,
        "cancel pending": store.job_cancel(pending.id, "", T0).row,
        "cancel running": store.job_cancel(running.id, "", T0).row,
        "unlock": store.job_unlock(running.id, T0).row,
        "unlock refused": store.job_unlock(running.id, T0).row,
        "replay": store.job_replay(faulted, "0190b6e2-5c1a-7d3e-8f00-123456789abc", T0),
    }
    counted = {write: row.counted_attempts for write, row in rows.items()}
    assert counted == {
        "retry": 1,
        "retry refused": 0,
        "cancel pending": 0,
        "cancel running": 1,
        "unlock": 1,
        "unlock refused": 1,
        "replay": 0,
    }
    assert all(isinstance(row, JobRecord) for row in rows.values())


def test_bulk_retry_counts_match_then_change(store: Store) -> None:
    ids = [_faulted(store, tenant_id="x", job_type="y") for _ in range(3)]
    _faulted(store, tenant_id="x", job_type="other")
    flt = JobFilter(tenant_id="x", job_type="y")
    statuses = [JobStatus.FAULTED, JobStatus.CANCELLED]
    assert store.job_count_matching(flt, statuses) == 3
    result = store.job_bulk_retry(flt, statuses, False, T0)
    assert (result.matched, result.changed) == (3, 3)
    assert {store.job_get(i).status for i in ids} == {JobStatus.PENDING}
    assert store.job_count_matching(flt, statuses) == 0


def test_bulk_cancel_pending_and_running(store: Store) -> None:
    jobs = [make_job(tenant_id="bulk") for _ in range(3)]
    store.job_insert_many(jobs)
    _claim(store, [jobs[0].id])
    result = store.job_bulk_cancel(
        JobFilter(tenant_id="bulk"), [JobStatus.PENDING, JobStatus.RUNNING], "cleanup", T0
    )
    assert (result.matched, result.changed) == (3, 3)
    rows = {j.id: store.job_get(j.id) for j in jobs}
    assert rows[jobs[0].id].status == JobStatus.RUNNING and rows[jobs[0].id].cancel_requested
    assert rows[jobs[1].id].status == rows[jobs[2].id].status == JobStatus.CANCELLED


def test_running_deadlines_and_purge(store: Store) -> None:
    timed, untimed, done = make_job(execution_timeout_ms=2000), make_job(), make_job()
    store.job_insert_many([timed, untimed, done])
    _claim(store, [timed.id, untimed.id, done.id])
    [deadline] = store.job_running_deadlines(10)
    assert (deadline.job_id, deadline.lease_token, deadline.deadline) == (
        timed.id,
        "tok",
        T0 + 2 * SECOND,
    )
    store.job_cancel(done.id, "", T0)
    _end(store, done.id, "tok", JobStatus.CANCELLED, now=T0 + SECOND)
    faulted = _faulted(store)
    cancelled = int(JobStatus.CANCELLED)
    assert store.job_purge_finished({cancelled: T0 + SECOND}, 10) == 0  # finished then: kept
    # A status without a cutoff is kept, however old.
    assert store.job_purge_finished({int(JobStatus.COMPLETED): T0 + 9 * SECOND}, 10) == 0
    assert store.job_purge_finished({cancelled: T0 + 2 * SECOND}, 10) == 1
    assert store.job_get(done.id) is None and store.job_attempts(done.id) == []
    assert store.job_get(faulted) is not None
    assert store.job_purge_finished({int(JobStatus.FAULTED): T0 + 9 * SECOND}, 10) == 1
    assert store.job_get(faulted) is None


def test_the_purge_finds_finished_jobs_through_their_index(store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    store.job_cancel(job.id, "", T0)
    issued: list[tuple[str, object]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().startswith("SELECT wfj_jobs.id"):
            issued.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", capture)
    try:
        cutoffs = {int(JobStatus.CANCELLED): T0 + SECOND, int(JobStatus.COMPLETED): T0}
        assert store.job_purge_finished(cutoffs, 10) == 1
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", capture)
    [(select, parameters)] = issued
    with store.engine.begin() as conn:
        if store.is_postgres:
            # The table is tiny: ask whether the index can serve, not whether it is cheaper.
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            plan = conn.exec_driver_sql(f"EXPLAIN {select}", parameters).scalars().all()
        else:
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {select}", parameters).all()
            plan = [row[-1] for row in rows]
    assert any("ix_wfj_jobs_finished" in line for line in plan), plan


def test_attempt_failure_counts_tell_retries_from_final_failures(store: Store) -> None:
    retried, final = make_job(), make_job()
    store.job_insert_many([retried, final])
    _claim(store, [retried.id, final.id])
    _end(store, retried.id, "tok", JobStatus.PENDING, now=T0 + SECOND)
    _end(store, final.id, "tok", JobStatus.FAULTED, now=T0 + SECOND)
    assert store.attempt_failure_counts(T0) == (2, 1)
    assert store.attempt_failure_counts(T0 + 2 * SECOND) == (0, 0)
    assert store.attempt_failure_counts(T0, tenant_id="nobody") == (0, 0)


def _worker(worker_id: str) -> WorkerRecord:
    return WorkerRecord(worker_id, "host", 42, "0.1.0", ["b", "a"], 8, T0)


def test_worker_registry_sync_per_coordinator(store: Store) -> None:
    store.worker_sync("c1", [_worker("w1"), _worker("w2")], T0)
    store.worker_sync("c2", [_worker("w3")], T0)
    rows = store.worker_list()
    assert [(r.worker_id, r.coordinator_id) for r in rows] == [
        ("w1", "c1"),
        ("w2", "c1"),
        ("w3", "c2"),
    ]
    assert rows[0].job_types == '["a", "b"]' and rows[0].slots == 8
    # w2 moved to c2; c1's next sync must not delete it.
    store.worker_sync("c2", [_worker("w2"), _worker("w3")], T0 + SECOND)
    store.worker_sync("c1", [], T0 + SECOND)
    assert [(r.worker_id, r.coordinator_id) for r in store.worker_list()] == [
        ("w2", "c2"),
        ("w3", "c2"),
    ]
    assert store.worker_list(seen_since=T0 + SECOND)[0].last_seen_at == T0 + SECOND
    store.worker_sync("c3", [_worker("w9")], T0 - 100 * SECOND)
    assert store.worker_delete_stale(T0) == 1
    assert "w9" not in {r.worker_id for r in store.worker_list()}


def test_cluster_flags(store: Store) -> None:
    assert store.cluster_flag_get("drain") is None
    store.cluster_flag_set("drain", "1", T0)
    store.cluster_flag_set("drain", "2", T0 + 1)
    store.cluster_flag_set("drain-worker:w_1", "c1", T0)
    assert store.cluster_flag_get("drain") == "2"
    assert store.cluster_flag_list("drain-worker:") == {"drain-worker:w_1": "c1"}
    store.cluster_flag_set("drain", None, T0)
    assert store.cluster_flag_list() == {"drain-worker:w_1": "c1"}
