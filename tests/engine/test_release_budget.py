"""Released attempts stay in the history but never inflate the visible budget (both stores)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from coordinator.api.convert import job_to_proto
from coordinator.engine import WorkerSession
from coordinator.model import AttemptOutcome, Failure, JobStatus, Release
from coordinator.store import open_store
from coordinator.store.migrate import upgrade
from wfj_engine import Harness, run


def test_release_keeps_the_configured_budget_and_does_not_count(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=3)
        [(_, token)] = await h.lease()
        await h.engine.report([Release(job_id, token, "worker shutting down")])
        job, attempts = await h.job(job_id)
        assert (job.status, job.attempt, job.max_attempts) == (JobStatus.PENDING, 1, 3)
        assert job.released_attempts == 1
        assert [a.outcome for a in attempts] == [AttemptOutcome.RELEASED]
        wire = job_to_proto(job)
        assert (wire.attempt, wire.max_attempts, wire.released_attempts) == (1, 3, 1)
        # A worker that disconnects hands its jobs back the same way.
        session = WorkerSession("w-gone", frozenset({"noop"}))
        h.engine.open_session(session)
        await h.engine.attempts.hand_back(
            [(job_id, (await h.lease())[0][1])], "worker disconnected"
        )
        job, _ = await h.job(job_id)
        assert (job.attempt, job.max_attempts, job.released_attempts) == (2, 3, 2)
        # Three failures still run: only counted attempts use the budget.
        for n in range(3):
            h.clock.advance(3600)
            [(row, token)] = await h.lease()
            assert row.max_attempts == 3
            [result] = await h.engine.report([Failure(job_id, token, f"boom {n}")])
        assert result.status == JobStatus.FAULTED
        job, attempts = await h.job(job_id)
        assert (job.attempt, job.max_attempts, job.released_attempts) == (5, 3, 2)
        assert [a.outcome for a in attempts] == [
            AttemptOutcome.RELEASED,
            AttemptOutcome.RELEASED,
            *[AttemptOutcome.FAILED] * 3,
        ]
        # An operator retry grants a fresh budget of counted attempts.
        row = await h.engine.ops.retry_job(job_id, keep_attempts=False)
        assert row.max_attempts == 3 + 3

    run(store_url, scenario)


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


def test_migration_takes_old_release_refunds_off_the_budget(fresh_url: str) -> None:
    store = open_store(fresh_url)
    try:
        upgrade(store, "0004")
        released, untouched = str(uuid.uuid4()), str(uuid.uuid4())
        with store.engine.begin() as conn:
            for job_id, max_attempts in ((released, 5), (untouched, 3)):
                conn.execute(
                    sa.text(
                        "INSERT INTO wfj_jobs (id, job_type, tenant_id, payload, status, attempt,"
                        " max_attempts, created_at, due_at) VALUES (:id, 'noop', 't', :p, 1, 2,"
                        " :m, 0, 0)"
                    ),
                    {"id": job_id, "p": b"{}", "m": max_attempts},
                )
            # Configured 3, raised to 5 by two releases before this revision.
            for number in (1, 2):
                conn.execute(
                    sa.text(
                        "INSERT INTO wfj_job_attempts (job_id, number, outcome)"
                        " VALUES (:id, :n, :o)"
                    ),
                    {"id": released, "n": number, "o": int(AttemptOutcome.RELEASED)},
                )
            conn.execute(
                sa.text(
                    "INSERT INTO wfj_job_attempts (job_id, number, outcome) VALUES (:id, 1, :o)"
                ),
                {"id": untouched, "o": int(AttemptOutcome.FAILED)},
            )
        upgrade(store)
        store.check_schema()
        rows = {r.id: r for r in (store.job_get(released), store.job_get(untouched))}
        assert (rows[released].max_attempts, rows[released].released_attempts) == (3, 2)
        assert (rows[untouched].max_attempts, rows[untouched].released_attempts) == (3, 0)
    finally:
        store.dispose()
