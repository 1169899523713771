"""The fair scheduler drops the clocks of tenants gone idle, without changing
any share: a pruned tenant re-enters where it would have anyway, with its
weight."""

from __future__ import annotations

import itertools

from coordinator.engine.fairness import PRUNE_EVERY, FairScheduler
from coordinator.model import Candidate

_ids = itertools.count()


def _jobs(tenant: str, n: int, category: int = 0) -> list[Candidate]:
    return [Candidate(f"{tenant}-{next(_ids)}", tenant, 0, 0, category=category) for _ in range(n)]


def _serve(fair: FairScheduler, candidates: list[Candidate], n: int) -> list[str]:
    picked = fair.pick(candidates, n)
    fair.charge([c.tenant_id for c in picked], [c.category for c in picked])
    return [c.tenant_id for c in picked]


def test_one_off_tenants_do_not_accumulate_clocks() -> None:
    fair = FairScheduler()
    # Two busy tenants, and a new tenant with one job now and then.
    for n in range(3 * PRUNE_EVERY):
        candidates = _jobs("busy-a", 2) + _jobs("busy-b", 2, category=n % 3)
        if n % 2 == 0:
            candidates += _jobs(f"once-{n}", 1, category=7)
        _serve(fair, candidates, 2)
    tenants, categories = fair.tracked
    # Without pruning: 2 + 1500 tenants. The one-off tenants fell to the floor
    # long ago; only the recently served are left.
    assert tenants < 100, tenants
    assert categories < 100, categories


def test_a_pruned_tenant_keeps_its_weight_and_gets_the_same_share() -> None:
    def run(prune: bool) -> list[str]:
        fair = FairScheduler()
        fair.set_weights({"heavy": 3})
        for _ in range(20):
            _serve(fair, _jobs("heavy", 2) + _jobs("light", 2), 2)
        # "heavy" goes idle while "light" keeps running past its clock.
        for _ in range(40):
            _serve(fair, _jobs("light", 2), 1)
        if prune:
            fair.prune()
            assert "heavy" not in fair.snapshot().tenants
            assert fair.weight("heavy") == 3
        return [
            t for _ in range(12) for t in _serve(fair, _jobs("heavy", 4) + _jobs("light", 4), 4)
        ]

    assert run(prune=True) == run(prune=False)
    served = run(prune=True)
    assert served.count("heavy") == 3 * served.count("light")


def test_asking_a_weight_creates_no_clock() -> None:
    fair = FairScheduler()
    assert fair.weight("never-seen") == 1
    assert fair.tracked == (0, 0)
