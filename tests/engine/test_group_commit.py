"""Single enqueues committed together (group commit): one job the database
refuses fails only its own caller, and a deduplicated job deleted right after
the insert found it is still an answer, on both stores."""

from __future__ import annotations

import asyncio
import threading

import sqlalchemy as sa

from coordinator.model import Completion, JobStatus
from wfj_engine import Harness, refused_in_a_shared_commit, run
from wfj_testing import make_job


def _refuse_job_type(h: Harness, job_type: str) -> None:
    """Make the database itself refuse rows of ``job_type`` (as it would a value it
    cannot store), below every check of the engine."""
    with h.engine.store.engine.begin() as conn:
        if h.engine.store.is_postgres:
            conn.execute(
                sa.text(
                    "ALTER TABLE wfj_jobs ADD CONSTRAINT wfj_test_refuse "
                    f"CHECK (job_type <> '{job_type}') NOT VALID"
                )
            )
        else:
            conn.execute(
                sa.text(
                    "CREATE TRIGGER wfj_test_refuse BEFORE INSERT ON wfj_jobs "
                    f"WHEN NEW.job_type = '{job_type}' "
                    "BEGIN SELECT RAISE(ABORT, 'refused by a check'); END"
                )
            )


def _allow_again(h: Harness) -> None:
    with h.engine.store.engine.begin() as conn:
        if h.engine.store.is_postgres:
            conn.execute(sa.text("ALTER TABLE wfj_jobs DROP CONSTRAINT IF EXISTS wfj_test_refuse"))
        else:
            conn.execute(sa.text("DROP TRIGGER IF EXISTS wfj_test_refuse"))


def test_a_refused_job_fails_only_its_own_caller(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        _refuse_job_type(h, "refused")
        try:
            # Hold the first commit so that the next callers share one.
            first_started, release = threading.Event(), threading.Event()
            original = h.engine.store.job_insert_many
            calls: list[int] = []

            def insert(jobs, *args, **kwargs):
                calls.append(len(jobs))
                if len(calls) == 1:
                    first_started.set()
                    release.wait(10)
                return original(jobs, *args, **kwargs)

            h.engine.store.job_insert_many = insert
            held = asyncio.create_task(h.engine.enqueue_one(make_job()))
            await asyncio.to_thread(first_started.wait, 10)
            await refused_in_a_shared_commit(h, held, calls, release.set)
        finally:
            _allow_again(h)

    run(store_url, scenario)


def test_a_deduplicated_job_deleted_after_the_insert_found_it_is_answered(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        [(job_id, _, _)] = await h.engine.enqueue([make_job(idempotency_key="k")])
        [(row, token)] = await h.lease(1)
        await h.engine.report([Completion(job_id, token, b"{}")])
        original = h.engine.store.job_insert_many

        def insert_then_purge(*args, **kwargs):
            result = original(*args, **kwargs)
            # Retention deletes the finished job between the insert and any re-read.
            with h.engine.store.engine.begin() as conn:
                conn.execute(
                    sa.text("DELETE FROM wfj_job_attempts WHERE job_id = :id"), {"id": job_id}
                )
                conn.execute(sa.text("DELETE FROM wfj_jobs WHERE id = :id"), {"id": job_id})
            return result

        h.engine.store.job_insert_many = insert_then_purge
        row, deduplicated = await h.engine.enqueue_one(make_job(idempotency_key="k"))
        assert deduplicated and row.id == job_id and row.status == JobStatus.COMPLETED

    run(store_url, scenario)
