"""The last members of a job group ending at once, forced into a known
interleaving on both dialects (``wfj_races.Gate``): the gate holds the group's
row (PostgreSQL; SQLite: the write lock) while both racers end their member,
then lets them go together. Exactly one completion job is stored, also on a
PostgreSQL database whose default isolation is REPEATABLE READ."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from coordinator.ids import new_id
from coordinator.model import (
    AttemptEnd,
    AttemptOutcome,
    Claim,
    Completion,
    GroupStatus,
    JobStatus,
    LeasedForFailure,
)
from coordinator.store import Store, open_store
from coordinator.store.groups import completion_key
from coordinator.store.migrate import upgrade
from wfj_races import Gate, outcome_of
from wfj_testing import T0, make_job

LEASE_MS = 30_000


def _group_of_two(store: Store) -> tuple[str, list[tuple[str, str]]]:
    members = [make_job(tenant_id="t-g") for _ in range(2)]
    completion = make_job(tenant_id="t-g", job_type="fan-in", payload=b"")
    group_id = new_id()
    store.group_create(group_id, completion, members, True, T0)
    leased = store.job_claim(
        [Claim(m.id, f"w{i}") for i, m in enumerate(members)], "tok", T0, LEASE_MS
    )
    assert {r.id for r in leased} == {m.id for m in members}
    return group_id, [(m.id, "tok") for m in members]


def _hold_group(gate: Gate, group_id: str) -> None:
    if gate.is_postgres:
        gate._conn.execute(  # noqa: SLF001 - the gate's own transaction holds the row
            sa.text("SELECT id FROM wfj_groups WHERE id = :g FOR UPDATE"), {"g": group_id}
        )


def _fault(row: LeasedForFailure) -> AttemptEnd:
    return AttemptEnd(
        job_id=row.id,
        outcome=AttemptOutcome.FAILED,
        new_status=JobStatus.FAULTED,
        error="boom",
        error_kind="ValueError",
    )


def _completions(store: Store, group_id: str) -> int:
    with store.engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT count(*) FROM wfj_jobs WHERE idempotency_key = :k"),
            {"k": completion_key(group_id)},
        ).scalar_one()


def test_the_last_two_members_completing_at_once_store_one_completion(
    store_url: str, store: Store
) -> None:
    group_id, refs = _group_of_two(store)
    with Gate(store_url) as gate:
        _hold_group(gate, group_id)
        racers = [
            gate.race(gate.store().job_complete_many, [Completion(job_id, token)], T0)
            for job_id, token in refs
        ]
        gate.open(waiting=2)
        outcomes = [outcome_of(f) for f in racers]
    assert outcomes == [{job_id: JobStatus.COMPLETED} for job_id, _ in refs]
    assert _completions(store, group_id) == 1
    group = store.group_get(group_id)
    assert group is not None and group.status == GroupStatus.COMPLETED
    assert group.counts == {int(JobStatus.COMPLETED): 2}


def test_a_completion_and_a_fault_of_the_last_members_at_once_store_one_completion(
    store_url: str, store: Store
) -> None:
    group_id, refs = _group_of_two(store)
    (done_id, done_token), (fail_id, fail_token) = refs
    with Gate(store_url) as gate:
        _hold_group(gate, group_id)
        racers = [
            gate.race(gate.store().job_complete_many, [Completion(done_id, done_token)], T0),
            gate.race(gate.store().job_end_attempts, [(fail_id, fail_token)], _fault, T0),
        ]
        gate.open(waiting=2)
        completed, faulted = (outcome_of(f) for f in racers)
    assert completed == {done_id: JobStatus.COMPLETED}
    assert list(faulted) == [fail_id]
    assert _completions(store, group_id) == 1
    group = store.group_get(group_id)
    assert group is not None
    assert group.counts == {int(JobStatus.COMPLETED): 1, int(JobStatus.FAULTED): 1}


@pytest.fixture
def repeatable_read_url(pg_database: str) -> Iterator[str]:
    """A PostgreSQL database of its own whose sessions default to REPEATABLE READ."""
    from conftest import PG_ADMIN_URL, new_pg_database

    url, drop = new_pg_database("wfj_rr")
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(
            f"ALTER DATABASE \"{name}\" SET default_transaction_isolation = 'repeatable read'"
        )
    store = open_store(url)
    upgrade(store)
    store.dispose()
    try:
        yield url
    finally:
        drop()  # type: ignore[operator]


def test_under_a_repeatable_read_default_the_last_two_members_store_one_completion(
    repeatable_read_url: str,
) -> None:
    store = open_store(repeatable_read_url)
    try:
        with psycopg.connect(repeatable_read_url.replace("+psycopg", "")) as plain:
            [default] = plain.execute("SHOW transaction_isolation").fetchone() or [""]
        assert default == "repeatable read"  # what any other session of it gets
        with store.tx() as conn:
            own = conn.execute(sa.text("SHOW transaction_isolation")).scalar_one()
        assert own == "read committed"
        # Statements outside a transaction (autocommit) run READ COMMITTED too.
        with store.engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
            alone = conn.execute(sa.text("SHOW transaction_isolation")).scalar_one()
        assert alone == "read committed"
        test_the_last_two_members_completing_at_once_store_one_completion(
            repeatable_read_url, store
        )
        test_a_completion_and_a_fault_of_the_last_members_at_once_store_one_completion(
            repeatable_read_url, store
        )
    finally:
        store.dispose()
