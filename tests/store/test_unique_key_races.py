"""Enqueues under one uniqueness key racing each other, forced into a known
interleaving on both dialects (``wfj_races.Gate``): a first enqueue of the
key is held uncommitted, every racer blocks on it, then all go at once."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from coordinator.model import JobStatus, Uniqueness, UniqueOutcome, UniqueRule
from coordinator.store import Store
from coordinator.store.schema import unique_keys
from wfj_races import Gate, outcome_of
from wfj_testing import SECOND, T0, make_job

RACERS = 8
DEBOUNCE = Uniqueness("storm", UniqueRule.DEBOUNCE, delay_us=60 * SECOND)
WHILE = Uniqueness("storm", UniqueRule.WHILE)


def _hold_first(gate: Gate, rule: Uniqueness) -> str:
    """Store the key's first job and its key row in the gate's open transaction."""
    first = make_job(tenant_id="t-u", due_at=T0 + 60 * SECOND, payload=b"first")
    gate.insert(first)
    gate._conn.execute(  # noqa: SLF001 - the gate's own transaction holds the key
        unique_keys.insert().values(
            tenant_id="t-u",
            unique_key=rule.key,
            job_id=first.id,
            rule=int(rule.rule),
            admitted_at=T0,
            debounced=0,
        )
    )
    return first.id


@pytest.mark.parametrize("rule", [DEBOUNCE, WHILE], ids=["debounce", "while"])
@pytest.mark.parametrize("commit", [True, False], ids=["committed", "rolled-back"])
def test_enqueues_racing_an_uncommitted_first_enqueue_of_their_key(
    store_url: str, store: Store, rule: Uniqueness, commit: bool
) -> None:
    store.job_insert_many([make_job(tenant_id="t-u")])  # the lane exists
    mine = [
        make_job(tenant_id="t-u", due_at=T0 + 60 * SECOND, payload=b"%d" % i) for i in range(RACERS)
    ]
    with Gate(store_url) as gate:
        first = _hold_first(gate, rule)
        racers = [gate.race(gate.store().job_insert_unique, [job], [rule], T0) for job in mine]
        gate.open(waiting=RACERS, commit=commit)
        outcomes = [outcome_of(f) for f in racers]
    assert all(isinstance(o, list) for o in outcomes), outcomes
    answers = [o[0] for o in outcomes]
    ids = {job_id for job_id, _, _ in answers}
    assert len(ids) == 1
    [stored] = ids
    then = UniqueOutcome.DEBOUNCED if rule.rule == UniqueRule.DEBOUNCE else UniqueOutcome.EXISTING
    if commit:
        assert stored == first
        assert [o for _, o, _ in answers] == [then] * RACERS
    else:  # the first enqueue rolled back: one racer's job is the key's
        assert stored in {j.id for j in mine}
        assert sorted(o for _, o, _ in answers) == [UniqueOutcome.CREATED] + [then] * (RACERS - 1)
    assert all(s == JobStatus.PENDING for _, _, s in answers)
    with store.engine.connect() as conn:
        key = conn.execute(sa.select(unique_keys).where(unique_keys.c.unique_key == "storm")).one()
        count = conn.execute(
            sa.text("SELECT count(*) FROM wfj_jobs WHERE tenant_id = 't-u'")
        ).scalar()
    assert key.job_id == stored
    assert count == 2  # the lane's job and the key's one
    if rule.rule == UniqueRule.DEBOUNCE:
        assert key.debounced == (RACERS if commit else RACERS - 1)
        payload = store.job_get(stored).payload  # type: ignore[union-attr]
        assert payload in {j.payload for j in mine}


def test_a_key_row_purged_between_the_insert_and_its_lock_leaves_the_key_free(
    store_url: str, store: Store
) -> None:
    """The enqueue's INSERT sees the key's row, retention deletes it (with its
    job) before the enqueue locks it: the key is free and the job is stored
    under it (it was NoResultFound, INTERNAL). PostgreSQL: SQLite's one writer
    cannot interleave them."""
    if not store_url.startswith("postgres"):
        pytest.skip("one writer at a time on SQLite: nothing runs between the two statements")
    [(old, _, _)] = store.job_insert_unique([make_job(tenant_id="t-u")], [WHILE], T0)
    mine = make_job(tenant_id="t-u", payload=b"mine")
    with Gate(store_url) as gate:
        gate._conn.execute(  # noqa: SLF001 - the gate's own transaction holds the key row
            sa.text("SELECT 1 FROM wfj_unique_keys WHERE unique_key = 'storm' FOR UPDATE")
        )
        racer = gate.race(gate.store().job_insert_unique, [mine], [WHILE], T0)
        gate.wait_blocked(1)  # its INSERT saw the row; its lock waits
        gate._conn.execute(sa.text("DELETE FROM wfj_unique_keys WHERE unique_key = 'storm'"))  # noqa: SLF001
        gate._conn.execute(sa.text("DELETE FROM wfj_jobs WHERE id = :id"), {"id": old})  # noqa: SLF001
        gate.open(waiting=1)
        outcome = outcome_of(racer)
    assert outcome == [(mine.id, UniqueOutcome.CREATED, int(JobStatus.PENDING))], outcome
    with store.engine.connect() as conn:
        key = conn.execute(sa.select(unique_keys).where(unique_keys.c.unique_key == "storm")).one()
    assert key.job_id == mine.id
