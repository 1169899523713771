"""A connection the database drops mid-statement is reported as StoreUnavailable (PostgreSQL).

Callers retry StoreUnavailable (enqueue answers UNAVAILABLE, outcomes are sent
again); anything else reaches the API as INTERNAL.
"""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa

from coordinator.errors import StoreUnavailable
from coordinator.store import Store
from wfj_testing import make_job


def _terminate(store: Store, pid: int) -> None:
    raw = store.url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(raw, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))


@pytest.mark.parametrize("scope", ["statement", "tx"])
def test_a_dropped_connection_is_store_unavailable(store: Store, scope: str) -> None:
    if not store.is_postgres:
        pytest.skip("a SQLite file has no server connection to lose")
    with pytest.raises(StoreUnavailable):
        with getattr(store, scope)() as conn:
            pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
            _terminate(store, pid)
            conn.execute(sa.text("SELECT 1"))
    # The pool hands out a working connection afterwards.
    job = make_job()
    store.job_insert_many([job])
    assert store.job_get(job.id) is not None
