"""Every pause scope holds back exactly the jobs it names, on every query that honours pauses."""

from __future__ import annotations

import pytest

from coordinator.model import Claim, PauseKind, PauseScope
from coordinator.store import Store
from coordinator.store.pauses import PAUSE_COLUMNS
from wfj_testing import T0, make_job

LEASE_MS = 30_000


def test_every_pause_kind_names_the_job_column_it_matches() -> None:
    assert set(PAUSE_COLUMNS) == set(PauseKind)


def _scope(kind: PauseKind, job, tenant_id: str = "") -> PauseScope:
    column = PAUSE_COLUMNS[kind]
    if column is None:
        return PauseScope(kind, job.tenant_id)
    # A pause's value is text: a numeric column (category) is named by its number.
    return PauseScope(kind, tenant_id, str(getattr(job, column)))


@pytest.mark.parametrize("kind", list(PauseKind), ids=lambda k: k.name)
def test_a_pause_of_each_kind_holds_back_the_job_it_covers_and_no_other(
    store: Store, kind: PauseKind
) -> None:
    covered = make_job(
        tenant_id="t-covered",
        job_type="noop",
        definition_id="def-a",
        instance_id="inst-a",
        category=3,
    )
    other = make_job(
        tenant_id="t-other",
        job_type="other-type",
        definition_id="def-b",
        instance_id="inst-b",
        category=4,
    )
    store.job_insert_many([covered, other])
    scope = _scope(kind, covered)
    store.pause_create("p1", scope, "ops", "", None, T0)

    def held(job) -> list[str]:
        return [p.id for p in store.pauses_covering(job, T0)]

    assert held(covered) == ["p1"]
    assert held(other) == []
    candidates = store.job_candidates(["noop", "other-type"], 10, T0)
    assert [c.id for c in candidates] == [other.id]
    # The claim re-checks the rule: a stale candidate list cannot lease a paused job.
    leased = store.job_claim([Claim(covered.id, "w1"), Claim(other.id, "w1")], "tok", T0, LEASE_MS)
    assert [r.id for r in leased] == [other.id]
    store.pause_lift(scope, "ops", T0)
    assert held(covered) == []
    assert [c.id for c in store.job_candidates(["noop"], 10, T0)] == [covered.id]
