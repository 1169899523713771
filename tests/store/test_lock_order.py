"""Statements that write several leased rows lock them in id order
(PostgreSQL), as the failure path's ``ORDER BY id FOR UPDATE`` does, so two
of them naming the same rows (a worker's heartbeat of every lease it holds,
and the completion of some of those jobs) wait for each other instead of
deadlocking, whatever order their callers named the rows in.

A holder locks the row of the larger id; the statement, given that row
first, must already hold the smaller one while it waits: the holder's
``NOWAIT`` lock of it then fails."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import sqlalchemy as sa

from coordinator.model import Claim, Completion, JobStatus
from coordinator.store import Store
from wfj_races import lock_waiters
from wfj_testing import SECOND, T0, make_job, wait_until

LEASE_MS = 30_000


def _two_leased(store: Store) -> tuple[str, str]:
    """Two jobs leased under token ``tok``, ids in ascending order, among
    enough others (analysed) that PostgreSQL plans these statements as it
    does for a real table: by the named ids, through the primary key."""
    store.job_insert_many([make_job() for _ in range(2_000)])
    jobs = [make_job(), make_job()]
    store.job_insert_many(jobs)
    with store.engine.begin() as conn:
        conn.execute(sa.text("ANALYZE wfj_jobs"))
    ids = sorted(j.id for j in jobs)
    rows = store.job_claim([Claim(job_id, "w1") for job_id in ids], "tok", T0, LEASE_MS)
    assert sorted(r.id for r in rows) == ids
    return ids[0], ids[1]


@pytest.mark.parametrize("statement", ["heartbeat", "completion"])
def test_rows_are_locked_in_id_order_whatever_order_they_were_named_in(
    store: Store, statement: str
) -> None:
    if not store.is_postgres:
        pytest.skip("SQLite has no row locks: one writer at a time")
    first, last = _two_leased(store)

    def write() -> Any:
        if statement == "heartbeat":
            return store.lease_extend_many([(last, "tok"), (first, "tok")], T0 + SECOND, LEASE_MS)
        return store.job_complete_many(
            [Completion(last, "tok", b"{}"), Completion(first, "tok", b"{}")], T0 + SECOND
        )

    with store.engine.connect() as holder, ThreadPoolExecutor(1) as pool:
        held = holder.begin()
        holder.execute(sa.text("SELECT id FROM wfj_jobs WHERE id = :id FOR UPDATE"), {"id": last})
        written = pool.submit(write)
        wait_until(lambda: lock_waiters(store) >= 1, 10, "the statement to wait for the row")
        with pytest.raises(sa.exc.OperationalError, match="could not obtain lock"):
            with holder.begin_nested():
                holder.execute(
                    sa.text("SELECT id FROM wfj_jobs WHERE id = :id FOR UPDATE NOWAIT"),
                    {"id": first},
                )
        held.rollback()
        answer = written.result(timeout=30)
    if statement == "heartbeat":
        assert sorted(job_id for job_id, *_ in answer) == [first, last]
    else:
        assert answer == {first: JobStatus.COMPLETED, last: JobStatus.COMPLETED}
