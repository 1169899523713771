"""A first attempt that completes its job is recorded by the job row alone (both stores).

The completion writes no ``wfj_job_attempts`` row for it; the history
(``job_attempts``, what ``GetJob`` shows) and the outcome counts of the stats
read it from the job row, so what callers see is unchanged. Every other ended
attempt keeps its own row.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from coordinator.api.convert import job_to_proto
from coordinator.model import AttemptEnd, AttemptOutcome, Claim, Completion, JobStatus
from coordinator.store import Store, open_store
from coordinator.store.migrate import MIGRATIONS_DIR, upgrade
from wfj_testing import SECOND, T0, make_job

LEASE_MS = 30_000


def _raw_attempts(store: Store, job_id: str) -> list[tuple[int, int]]:
    with store.engine.connect() as conn:
        return [
            (number, outcome)
            for number, outcome in conn.execute(
                sa.text(
                    "SELECT number, outcome FROM wfj_job_attempts WHERE job_id = :id ORDER BY number"
                ),
                {"id": job_id},
            )
        ]


def _lease(store: Store, job_id: str, token: str, now: int, owner: str = "w1") -> None:
    [row] = store.job_claim([Claim(job_id, owner)], token, now, LEASE_MS)
    assert row.lease_token == token


def _fail_and_retry(row) -> AttemptEnd:
    return AttemptEnd(
        job_id=row.id,
        outcome=AttemptOutcome.FAILED,
        new_status=JobStatus.PENDING,
        due_at=T0,
        error="boom",
        error_kind="ValueError",
    )


def test_a_completed_first_attempt_has_no_row_and_the_history_shows_it(store: Store) -> None:
    job = make_job()
    store.job_insert_many([job])
    _lease(store, job.id, "tok-1", T0)
    done = Completion(job.id, "tok-1", b"r")
    assert store.job_complete_many([done], T0 + SECOND) == {job.id: JobStatus.COMPLETED}
    assert _raw_attempts(store, job.id) == []
    [attempt] = store.job_attempts(job.id)
    assert (
        attempt.job_id,
        attempt.number,
        attempt.worker_id,
        attempt.started_at,
        attempt.ended_at,
        attempt.outcome,
        attempt.error,
        attempt.error_kind,
        attempt.traceback,
    ) == (job.id, 1, "w1", T0, T0 + SECOND, AttemptOutcome.COMPLETED, None, None, None)
    # The same completion again is refused and records nothing more.
    assert store.job_complete_many([done], T0 + 2 * SECOND) == {}
    assert len(store.job_attempts(job.id)) == 1
    wire = job_to_proto(store.job_get(job.id), store.job_attempts(job.id))
    assert [(a.number, a.worker_id) for a in wire.attempts] == [(1, "w1")]


def test_a_resent_first_attempt_completion_is_recognised_by_its_token(store: Store) -> None:
    job, other = make_job(), make_job()
    store.job_insert_many([job, other])
    _lease(store, job.id, "tok-1", T0)
    _lease(store, other.id, "tok-2", T0)
    assert store.attempt_reported_many([(job.id, "tok-1")]) == {}
    store.job_complete_many([Completion(job.id, "tok-1", b"r")], T0 + SECOND)
    assert _raw_attempts(store, job.id) == []
    recorded = store.attempt_reported_many([(job.id, "tok-1"), (other.id, "tok-2")])
    assert recorded == {job.id: int(AttemptOutcome.COMPLETED)}
    # Another token was never the completing report's.
    assert store.attempt_reported_many([(job.id, "tok-2")]) == {}
    # The token left on the job row fences nothing: no write guarded by it applies.
    assert store.lease_extend_many([(job.id, "tok-1")], T0 + 2 * SECOND, LEASE_MS) == []
    assert store.lease_held_many([(job.id, "tok-1")]) == set()
    assert store.job_end_attempts([(job.id, "tok-1")], _fail_and_retry, T0 + 2 * SECOND) == {}
    assert store.job_get(job.id).status == JobStatus.COMPLETED


def test_running_pending_and_failed_jobs_show_only_their_recorded_attempts(
    store: Store,
) -> None:
    pending, running = make_job(), make_job()
    store.job_insert_many([pending, running])
    _lease(store, running.id, "tok-1", T0)
    assert store.job_attempts(pending.id) == []
    assert store.job_attempts(running.id) == []
    assert store.job_attempts("no-such-job") == []


def test_later_and_cancelled_completions_keep_their_rows(store: Store) -> None:
    retried, cancelled = make_job(), make_job()
    store.job_insert_many([retried, cancelled])
    _lease(store, retried.id, "tok-1", T0)
    store.job_end_attempts([(retried.id, "tok-1")], _fail_and_retry, T0 + SECOND)
    _lease(store, retried.id, "tok-2", T0 + 2 * SECOND)
    _lease(store, cancelled.id, "tok-3", T0)
    store.job_cancel(cancelled.id, "no longer needed", T0 + SECOND)
    applied = store.job_complete_many(
        [Completion(retried.id, "tok-2", b"r"), Completion(cancelled.id, "tok-3", b"r")],
        T0 + 3 * SECOND,
    )
    assert applied == {retried.id: JobStatus.COMPLETED, cancelled.id: JobStatus.CANCELLED}
    completed, failed = int(AttemptOutcome.COMPLETED), int(AttemptOutcome.FAILED)
    assert _raw_attempts(store, retried.id) == [(1, failed), (2, completed)]
    assert _raw_attempts(store, cancelled.id) == [(1, completed)]
    assert [(a.number, a.outcome) for a in store.job_attempts(retried.id)] == [
        (1, failed),
        (2, completed),
    ]
    # A retried cancelled job keeps the completed attempt in its history.
    store.job_retry(cancelled.id, True, T0 + 4 * SECOND)
    _lease(store, cancelled.id, "tok-4", T0 + 4 * SECOND)
    assert [(a.number, a.outcome) for a in store.job_attempts(cancelled.id)] == [(1, completed)]


def test_outcome_counts_include_completed_first_attempts_of_the_window(store: Store) -> None:
    early, first, second, failing = (make_job() for _ in range(4))
    store.job_insert_many([early, first, second, failing])
    for job in (early, first, second, failing):
        _lease(store, job.id, f"tok-{job.id}", T0)
    # Before the window: one completion.
    store.job_complete_many([Completion(early.id, f"tok-{early.id}", b"")], T0 + SECOND)
    # In the window: a first-attempt completion, a failure, and a second attempt
    # that completes after failing once.
    store.job_complete_many([Completion(first.id, f"tok-{first.id}", b"")], T0 + 10 * SECOND)
    store.job_end_attempts(
        [(second.id, f"tok-{second.id}"), (failing.id, f"tok-{failing.id}")],
        _fail_and_retry,
        T0 + 10 * SECOND,
    )
    _lease(store, second.id, "tok-again", T0 + 11 * SECOND)
    store.job_complete_many([Completion(second.id, "tok-again", b"")], T0 + 12 * SECOND)
    counts = store.attempt_outcome_counts(T0 + 5 * SECOND)
    assert counts == {int(AttemptOutcome.COMPLETED): 2, int(AttemptOutcome.FAILED): 2}
    everything = store.attempt_outcome_counts(T0)
    assert everything == {int(AttemptOutcome.COMPLETED): 3, int(AttemptOutcome.FAILED): 2}
    assert store.attempt_outcome_counts(T0 + 13 * SECOND) == {}
    # Counted per category too.
    other = make_job(category=2)
    store.job_insert_many([other])
    _lease(store, other.id, "tok-other", T0 + 13 * SECOND)
    store.job_complete_many([Completion(other.id, "tok-other", b"")], T0 + 14 * SECOND)
    assert store.attempt_outcome_counts(T0, category=2) == {int(AttemptOutcome.COMPLETED): 1}
    assert store.attempt_outcome_counts(T0 + 13 * SECOND) == {int(AttemptOutcome.COMPLETED): 1}


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_mig")
    try:
        yield url
    finally:
        drop()


def test_migration_drops_rows_the_job_row_describes_and_downgrade_restores_them(
    fresh_url: str,
) -> None:
    store = open_store(fresh_url)
    try:
        upgrade(store, "0008")
        first, later = str(uuid.uuid4()), str(uuid.uuid4())
        completed, failed = int(AttemptOutcome.COMPLETED), int(AttemptOutcome.FAILED)
        with store.engine.begin() as conn:
            for job_id, attempt in ((first, 1), (later, 2)):
                conn.execute(
                    sa.text(
                        "INSERT INTO wfj_jobs (id, job_type, tenant_id, payload, status, attempt,"
                        " max_attempts, created_at, due_at, started_at, finished_at, lease_owner)"
                        " VALUES (:id, 'noop', 't', :p, :s, :a, 3, 0, 0, :start, :end, 'w1')"
                    ),
                    {
                        "id": job_id,
                        "p": b"{}",
                        "s": int(JobStatus.COMPLETED),
                        "a": attempt,
                        "start": T0,
                        "end": T0 + SECOND,
                    },
                )
            rows = [(first, 1, completed), (later, 1, failed), (later, 2, completed)]
            for job_id, number, outcome in rows:
                conn.execute(
                    sa.text(
                        "INSERT INTO wfj_job_attempts (job_id, number, worker_id, started_at,"
                        " ended_at, outcome, reported_token)"
                        " VALUES (:id, :n, 'w1', :start, :end, :o, :token)"
                    ),
                    {
                        "id": job_id,
                        "n": number,
                        "start": T0,
                        "end": T0 + SECOND,
                        "o": outcome,
                        "token": f"tok-{job_id}-{number}",
                    },
                )
        upgrade(store)
        store.check_schema()
        assert _raw_attempts(store, first) == []
        assert _raw_attempts(store, later) == [(1, failed), (2, completed)]
        [attempt] = store.job_attempts(first)
        assert (attempt.number, attempt.outcome, attempt.worker_id) == (1, completed, "w1")
        assert (attempt.started_at, attempt.ended_at) == (T0, T0 + SECOND)
        # Counted once each, not once from the row and once from the job.
        assert store.attempt_outcome_counts(T0) == {completed: 2, failed: 1}
        # A resent report is still recognised by the token the row held.
        assert store.attempt_reported_many(
            [(first, f"tok-{first}-1"), (later, f"tok-{later}-2")]
        ) == {first: completed, later: completed}

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        with store.engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0008")
        assert _raw_attempts(store, first) == [(1, completed)]
        assert _raw_attempts(store, later) == [(1, failed), (2, completed)]
        with store.engine.connect() as conn:
            # Read raw: later revisions' columns are gone after this downgrade.
            assert (
                conn.execute(
                    sa.text("SELECT lease_token FROM wfj_jobs WHERE id = :id"), {"id": first}
                ).scalar_one()
                is None
            )
            assert (
                conn.execute(
                    sa.text("SELECT reported_token FROM wfj_job_attempts WHERE job_id = :id"),
                    {"id": first},
                ).scalar_one()
                == f"tok-{first}-1"
            )
    finally:
        store.dispose()
