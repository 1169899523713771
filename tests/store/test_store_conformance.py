"""One conformance suite for every store dialect (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from coordinator.model import (
    AttemptEnd,
    AttemptOutcome,
    Claim,
    Completion,
    JobStatus,
    LeasedForFailure,
    PauseKind,
    PauseScope,
)
from coordinator.store import Store
from wfj_testing import SECOND, T0, make_job

LEASE_MS = 30_000


def claim_all(store: Store, owner: str = "w1", now: int = T0, token: str = "tok-1"):
    cands = store.job_candidates(["noop"], 100, now)
    return store.job_claim([Claim(c.id, owner) for c in cands], token, now, LEASE_MS)


def test_insert_and_get_round_trip(store: Store) -> None:
    job = make_job(payload=b"\x00\x01binary", priority=7, correlation_id="corr-9")
    [(job_id, dedup, status)] = store.job_insert_many([job])
    assert (job_id, dedup, status) == (job.id, False, JobStatus.PENDING)
    row = store.job_get(job.id)
    assert row is not None
    assert row.payload == b"\x00\x01binary"
    assert row.priority == 7
    assert row.correlation_id == "corr-9"
    assert row.status == JobStatus.PENDING
    assert row.attempt == 0


def test_idempotency_key_returns_the_same_job(store: Store) -> None:
    first = make_job(idempotency_key="order-42")
    store.job_insert_many([first])
    again = make_job(idempotency_key="order-42")
    other_tenant = make_job(idempotency_key="order-42", tenant_id="tenant-b")
    results = store.job_insert_many([again, other_tenant])
    assert results[0] == (first.id, True, JobStatus.PENDING)
    assert results[1] == (other_tenant.id, False, JobStatus.PENDING)
    assert store.job_get(again.id) is None


def test_duplicate_keys_inside_one_batch_make_one_job(store: Store) -> None:
    a, b = make_job(idempotency_key="k"), make_job(idempotency_key="k")
    results = store.job_insert_many([a, b])
    assert results == [(a.id, False, 1), (a.id, True, 1)]


def test_acquisition_returns_only_due_pending_jobs_of_served_types(store: Store) -> None:
    due = make_job()
    later = make_job(due_at=T0 + 60 * SECOND)
    other_type = make_job(job_type="other")
    store.job_insert_many([due, later, other_type])
    rows = claim_all(store)
    assert [r.id for r in rows] == [due.id]
    assert rows[0].status == JobStatus.RUNNING
    assert rows[0].lease_owner == "w1"
    assert rows[0].lease_token == "tok-1"
    assert rows[0].lease_expires_at == T0 + LEASE_MS * 1000
    assert rows[0].attempt == 1
    # Leased jobs are not handed out again.
    assert claim_all(store, owner="w2", token="tok-2") == []


def test_claim_is_guarded_against_double_leasing(store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    first = store.job_claim([Claim(job.id, "w1")], "t1", T0, LEASE_MS)
    second = store.job_claim([Claim(job.id, "w2")], "t2", T0, LEASE_MS)
    assert len(first) == 1
    assert second == []


def _priority_jobs() -> tuple[list, list[str]]:
    """Jobs of one lane in scrambled insert order, and the order they must run in."""
    low_old = make_job(priority=0, due_at=T0 - 10 * SECOND)
    high = make_job(priority=5, due_at=T0)
    low_newer_same_due = make_job(priority=0, due_at=T0 - 10 * SECOND)
    low_due_later = make_job(priority=0, due_at=T0 - 5 * SECOND)
    highest_not_due = make_job(priority=9, due_at=T0 + 60 * SECOND)
    jobs = [low_due_later, highest_not_due, low_newer_same_due, high, low_old]
    return jobs, [high.id, low_old.id, low_newer_same_due.id, low_due_later.id]


def test_acquisition_leases_in_priority_then_due_then_age_order(store: Store) -> None:
    jobs, expected = _priority_jobs()
    store.job_insert_many(jobs)
    leased: list[str] = []
    # One job per acquisition: what the store hands out first is what it ranks first.
    for n in range(len(jobs)):
        cands = store.job_candidates(["noop"], 1, T0)
        rows = store.job_claim([Claim(c.id, "w1") for c in cands], f"tok-{n}", T0, LEASE_MS)
        leased.extend(r.id for r in rows)
    assert leased == expected


def test_one_statement_acquisition_leases_in_priority_then_due_then_age_order(
    store: Store,
) -> None:
    if not store.is_postgres:
        pytest.skip("the one-statement claim is the PostgreSQL path")
    jobs, expected = _priority_jobs()
    store.job_insert_many(jobs)
    leased: list[str] = []
    for n in range(len(jobs)):
        claimed = store.job_claim_fair(
            ["noop"], None, ["w1"], ([], [], [], 0.0), f"tok-{n}", T0, LEASE_MS
        )
        assert claimed is not None and claimed.skipped == 0
        leased.extend(r.id for r in claimed.rows)
    assert leased == expected


def test_stale_lease_token_completion_changes_nothing(store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    claim_all(store)
    before = store.job_get(job.id)
    applied = store.job_complete_many([Completion(job.id, "stale-token", b"r")], T0 + SECOND)
    assert applied == {}
    assert store.job_get(job.id) == before
    assert store.job_attempts(job.id) == []


# Content types the database cannot store: a lone surrogate is no valid text
# on either store; PostgreSQL text cannot hold NUL either.
REFUSED_CONTENT_TYPES = {"surrogate": "text/\ud800"}


@pytest.mark.parametrize("ctype", ["surrogate", "nul"])
@pytest.mark.parametrize("batch", [1, 3])
def test_a_completion_the_database_refuses_is_set_aside_alone(
    store: Store, ctype: str, batch: int
) -> None:
    if ctype == "nul" and not store.is_postgres:
        pytest.skip("SQLite text holds NUL: nothing to refuse")
    refused_type = REFUSED_CONTENT_TYPES.get(ctype, "text/\x00plain")
    jobs = [make_job() for _ in range(batch)]
    store.job_insert_many(jobs)
    claim_all(store)
    bad, *good = jobs
    completions = [Completion(bad.id, "tok-1", b"r", refused_type)] + [
        Completion(j.id, "tok-1", b"r", "application/json") for j in good
    ]
    refused: list[tuple[str, BaseException]] = []
    applied = store.job_complete_many(
        completions, T0 + SECOND, set_aside=lambda job_id, e: refused.append((job_id, e))
    )
    assert applied == {j.id: JobStatus.COMPLETED for j in good}
    assert [job_id for job_id, _ in refused] == [bad.id]
    # The refused one changed nothing: still running under its lease.
    row = store.job_get(bad.id)
    assert (row.status, row.lease_token) == (JobStatus.RUNNING, "tok-1")
    assert store.job_attempts(bad.id) == []
    for j in good:
        assert [a.outcome for a in store.job_attempts(j.id)] == [AttemptOutcome.COMPLETED]


def test_completion_is_recorded_exactly_once(store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    claim_all(store)
    done = Completion(job.id, "tok-1", b'{"ok":true}', "application/json")
    assert store.job_complete_many([done], T0 + SECOND) == {job.id: JobStatus.COMPLETED}
    assert store.job_complete_many([done], T0 + 2 * SECOND) == {}
    row = store.job_get(job.id)
    assert row.status == JobStatus.COMPLETED
    assert row.result == b'{"ok":true}'
    assert row.finished_at == T0 + SECOND
    attempts = store.job_attempts(job.id)
    assert [(a.number, a.outcome, a.worker_id) for a in attempts] == [(1, 1, "w1")]


def _retry_in(seconds: int):
    def decide(row: LeasedForFailure) -> AttemptEnd:
        return AttemptEnd(
            job_id=row.id,
            outcome=AttemptOutcome.FAILED,
            new_status=JobStatus.PENDING,
            due_at=T0 + seconds * SECOND,
            error="boom",
            error_kind="ValueError",
        )

    return decide


def test_failed_attempt_is_rescheduled_with_history(store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    claim_all(store)
    ends = store.job_end_attempts([(job.id, "tok-1")], _retry_in(10), T0 + SECOND)
    assert ends[job.id].new_status == JobStatus.PENDING
    row = store.job_get(job.id)
    assert row.status == JobStatus.PENDING
    assert row.due_at == T0 + 10 * SECOND
    assert row.last_error == "boom"
    assert row.lease_token is None
    assert claim_all(store, now=T0 + 9 * SECOND) == []
    again = claim_all(store, now=T0 + 10 * SECOND, token="tok-2")
    assert [r.attempt for r in again] == [2]
    # The old token cannot end the new attempt.
    assert store.job_end_attempts([(job.id, "tok-1")], _retry_in(20), T0 + 11 * SECOND) == {}


def test_reaper_reclaims_only_expired_leases(store: Store) -> None:
    short = make_job(heartbeat_timeout_ms=2_000)
    long = make_job(heartbeat_timeout_ms=60_000)
    store.job_insert_many([short, long])
    claim_all(store)
    assert store.lease_next_expiry() == T0 + 2 * SECOND
    ends = store.lease_reclaim_expired(_retry_in(3), T0 + 3 * SECOND, 100)
    assert [e.job_id for e in ends] == [short.id]
    assert store.job_get(short.id).status == JobStatus.PENDING
    assert store.job_get(long.id).status == JobStatus.RUNNING
    assert store.job_attempts(short.id)[0].outcome == AttemptOutcome.FAILED


def test_heartbeat_extends_valid_leases_and_reports_lost_ones(store: Store) -> None:
    a, b = make_job(), make_job()
    store.job_insert_many([a, b])
    claim_all(store)
    extended = store.lease_extend_many(
        [(a.id, "tok-1"), (b.id, "wrong")], T0 + 10 * SECOND, LEASE_MS
    )
    assert extended == [(a.id, T0 + 10 * SECOND + LEASE_MS * 1000, False)]
    assert store.job_get(b.id).lease_expires_at == T0 + LEASE_MS * 1000


def test_paused_definition_is_skipped_and_untouched(store: Store) -> None:
    paused = [make_job(definition_id="def-paused") for _ in range(20)]
    free = make_job(definition_id="def-free")
    store.job_insert_many([*paused, free])
    before = {j.id: store.job_get(j.id) for j in paused}
    store.pause_create(
        "p1", PauseScope(PauseKind.DEFINITION, "", "def-paused"), "ops", "incident", None, T0
    )
    rows = claim_all(store)
    assert [r.id for r in rows] == [free.id]
    assert {j.id: store.job_get(j.id) for j in paused} == before
    store.pause_lift(PauseScope(PauseKind.DEFINITION, "", "def-paused"), "ops", T0 + SECOND)
    assert len(claim_all(store, now=T0 + SECOND, token="t2")) == 20


def test_claim_rechecks_pauses_taken_after_candidates_were_read(store: Store) -> None:
    job = make_job(tenant_id="tenant-x")
    store.job_insert_many([job])
    cands = store.job_candidates(["noop"], 10, T0)
    store.pause_create("p1", PauseScope(PauseKind.TENANT, "tenant-x"), "ops", "", None, T0)
    assert store.job_claim([Claim(c.id, "w1") for c in cands], "t", T0, LEASE_MS) == []


def test_instance_and_job_type_pauses(store: Store) -> None:
    in_paused_instance = make_job(instance_id="inst-stop")
    other = make_job(job_type="mail")
    fine = make_job()
    store.job_insert_many([in_paused_instance, other, fine])
    store.pause_create("p1", PauseScope(PauseKind.INSTANCE, "", "inst-stop"), "", "", None, T0)
    store.pause_create("p2", PauseScope(PauseKind.JOB_TYPE, "", "mail"), "", "", None, T0)
    cands = store.job_candidates(["noop", "mail"], 10, T0)
    assert [c.id for c in cands] == [fine.id]


def test_pause_expiry_lifts_by_itself(store: Store) -> None:
    job = make_job(tenant_id="tenant-e")
    store.job_insert_many([job])
    store.pause_create("p1", PauseScope(PauseKind.TENANT, "tenant-e"), "", "", T0 + 5 * SECOND, T0)
    assert store.job_candidates(["noop"], 10, T0 + 4 * SECOND) == []
    assert len(store.job_candidates(["noop"], 10, T0 + 6 * SECOND)) == 1
    history = store.pause_list(T0 + 6 * SECOND, include_lifted=True)
    assert [p.id for p in history] == ["p1"]
    assert store.pause_list(T0 + 6 * SECOND, include_lifted=False) == []


def test_list_jobs_filters_and_pages(store: Store) -> None:
    from coordinator.model import JobFilter

    jobs = [make_job(tenant_id="t-list", correlation_id="c1" if i % 2 else "c2") for i in range(7)]
    store.job_insert_many(jobs)
    page1 = store.job_list(JobFilter(tenant_id="t-list", correlation_id="c1"), None, 2)
    page2 = store.job_list(JobFilter(tenant_id="t-list", correlation_id="c1"), page1[-1].id, 2)
    ids = [r.id for r in page1 + page2]
    assert ids == sorted(j.id for j in jobs if j.correlation_id == "c1")[:4]


def test_list_jobs_newest_first_pages_back_from_the_newest(store: Store) -> None:
    from coordinator.model import JobFilter

    jobs = [make_job(tenant_id="t-order") for _ in range(5)]
    store.job_insert_many(jobs)
    flt = JobFilter(tenant_id="t-order")
    newest = sorted((j.id for j in jobs), reverse=True)
    page1 = store.job_list(flt, None, 2, newest_first=True)
    page2 = store.job_list(flt, page1[-1].id, 2, newest_first=True)
    page3 = store.job_list(flt, page2[-1].id, 2, newest_first=True)
    assert [r.id for r in page1 + page2 + page3] == newest
    assert store.job_count(flt) == 5
    assert store.job_count(JobFilter(tenant_id="t-order", job_type="other")) == 0


def test_scheduled_jobs_are_counted_apart_from_due_ones(store: Store) -> None:
    due = [make_job(tenant_id="t-sched", job_type="a") for _ in range(2)]
    later = [make_job(tenant_id="t-sched", job_type=t, due_at=T0 + 60 * SECOND) for t in "aab"]
    keyed = make_job(tenant_id="t-sched", job_type="b", due_at=T0 + 60 * SECOND)
    store.job_insert_many([*due, *later, keyed])
    counts = [(r.tenant_id, r.job_type, r.n) for r in store.job_count_scheduled(T0, "t-sched")]
    assert counts == [("t-sched", "a", 2), ("t-sched", "b", 2)]
    assert store.job_count_scheduled(T0 + 61 * SECOND, "t-sched") == []
    assert store.job_count_scheduled(T0, "another-tenant") == []


def test_list_jobs_filters_by_any_of_several_job_types(store: Store) -> None:
    from coordinator.model import JobFilter

    jobs = [make_job(tenant_id="t-types", job_type=t) for t in ("mail", "sms", "push", "mail")]
    store.job_insert_many(jobs)

    def listed(flt: JobFilter) -> list[str]:
        return [r.id for r in store.job_list(flt, None, 100)]

    by_type = {t: sorted(j.id for j in jobs if j.job_type == t) for t in ("mail", "sms", "push")}
    either = listed(JobFilter(tenant_id="t-types", job_types=("mail", "sms")))
    assert either == sorted(by_type["mail"] + by_type["sms"])
    assert listed(JobFilter(tenant_id="t-types", job_types=("push",))) == by_type["push"]
    # With job_type too, a job matches both.
    both = JobFilter(tenant_id="t-types", job_type="sms", job_types=("mail", "sms"))
    assert listed(both) == by_type["sms"]
    assert listed(JobFilter(tenant_id="t-types", job_type="push", job_types=("mail",))) == []
    # Bulk actions take the same filter.
    result = store.job_bulk_cancel(
        JobFilter(tenant_id="t-types", job_types=("sms", "push")), [JobStatus.PENDING], "x", T0
    )
    assert (result.matched, result.changed) == (2, 2)
    assert {store.job_get(i).status for i in by_type["mail"]} == {JobStatus.PENDING}


def test_completion_after_a_cancel_request_ends_the_job_cancelled(store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    claim_all(store)
    assert store.job_cancel(job.id, "stop", T0 + SECOND).changed
    done = Completion(job.id, "tok-1", b'{"ok":true}', "application/json")
    assert store.job_complete_many([done], T0 + 2 * SECOND) == {job.id: JobStatus.CANCELLED}
    row = store.job_get(job.id)
    assert row.status == JobStatus.CANCELLED
    assert row.finished_at == T0 + 2 * SECOND
    # Nothing is hidden: the attempt is recorded as it ended, with its result.
    assert row.result == b'{"ok":true}'
    assert row.last_error_kind == "Cancelled"
    [attempt] = store.job_attempts(job.id)
    assert attempt.outcome == AttemptOutcome.COMPLETED
