"""The store's capabilities say what its dialect does, checked against what it does."""

from __future__ import annotations

import dataclasses
import time

import pytest

from coordinator.model import DirectLeases, JobStatus
from coordinator.store import Store, StoreCapabilities
from wfj_testing import T0, make_job

LEASE_MS = 30_000


def test_capabilities_are_frozen(store: Store) -> None:
    assert isinstance(store.capabilities, StoreCapabilities)
    with pytest.raises(dataclasses.FrozenInstanceError):
        store.capabilities.listen_notify = not store.capabilities.listen_notify  # type: ignore[misc]


def test_database_clock_says_whether_the_database_tells_the_time(store: Store) -> None:
    if store.capabilities.database_clock:
        before = time.time_ns() // 1000
        assert abs(store.database_time_us() - before) < 60 * 1_000_000
    else:
        # One coordinator owns the store: its own clock is the clock, and the
        # store serves one writer thread.
        assert store.capabilities.max_store_threads == 1
        assert not store.capabilities.listen_notify


def test_lease_at_insert_says_whether_an_offered_job_is_stored_leased(store: Store) -> None:
    store.job_insert_many([make_job()])  # the lane is known from now on
    offered = make_job()
    direct = DirectLeases({offered.id: "w1"}, "tok-direct", T0, LEASE_MS)
    [(job_id, deduplicated, status)] = store.job_insert_many([offered], direct)
    assert (job_id, deduplicated) == (offered.id, False)
    row = store.job_get(offered.id)
    assert row is not None
    if store.capabilities.lease_at_insert:
        assert status == row.status == JobStatus.RUNNING
        assert row.lease_owner == "w1"
    else:
        assert status == row.status == JobStatus.PENDING
        assert row.lease_owner is None


def test_one_statement_claim_says_whether_job_claim_fair_leases(store: Store) -> None:
    if not store.capabilities.one_statement_claim:
        pytest.skip("the engine never calls job_claim_fair on this dialect")
    job = make_job()
    store.job_insert_many([job])
    claimed = store.job_claim_fair(["noop"], None, ["w1"], ([], [], [], 0.0), "tok-1", T0, LEASE_MS)
    assert claimed is not None
    assert [r.id for r in claimed.rows] == [job.id]


def test_postgresql_sessions_never_jit_compile(store: Store) -> None:
    """Acquisition statements' cost estimates grow with the backlog they might
    read; compiling them would cost more than running them."""
    if not store.is_postgres:
        pytest.skip("JIT is PostgreSQL's")
    with store.tx() as conn:
        assert conn.exec_driver_sql("SHOW jit").scalar() == "off"
    with pytest.raises(RuntimeError), store.tx() as conn:
        raise RuntimeError("a rolled-back transaction")
    with store.statement() as conn:
        assert conn.exec_driver_sql("SHOW jit").scalar() == "off"
