"""Weighted fairness by virtual time (stride scheduling): across tenants, and
across the categories of one tenant.

Each tenant has a virtual clock that advances by ``1 / weight`` for every job
it is given. A selection repeatedly gives the next job to the backlogged
tenant with the smallest clock, so over any stretch where several tenants
have eligible work each receives capacity in proportion to its weight,
whatever the size of its backlog. A tenant that was idle re-enters at the
current floor (the smallest clock among backlogged tenants) rather than with
credit saved up while idle.

Within a tenant the same rule runs one level down: each (tenant, category)
has a clock that advances by ``1 / category weight`` per job of that category,
and the tenant's next job is the head (by priority, due time, id) of its
backlogged category with the smallest clock, ties going to the better head.
So the categories of a tenant that all have eligible work share that tenant's
starts in proportion to their weights (1 unless set), while the tenant's share
across the cluster is unchanged. Within a category jobs go in order.

The state is per coordinator. Every replica shares its own acquisitions
fairly, so the sum over replicas is fair as well.

Clocks of tenants gone idle are dropped (``prune``, every ``PRUNE_EVERY``
charges): a tenant whose clock is at or below the floor would re-enter at
the floor anyway, so forgetting it changes nothing about its next share,
and its categories re-enter level with each other, as a new tenant's do.
Weights are kept apart from the clocks, so a pruned tenant keeps its weight.
Without pruning every tenant ever served kept a clock for the life of the
process, and every acquisition pass carried them all to the store.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from coordinator.model import Candidate, FairSnapshot


@dataclass(slots=True)
class TenantShare:
    """A tenant's virtual clock and weight, and its categories' floor."""

    vtime: float = 0.0
    weight: int = 1
    # The clock of the least-served backlogged category of this tenant at the
    # last charge: its categories re-enter at it, never below.
    category_now: float = 0.0


@dataclass(slots=True)
class CategoryShare:
    """A category's virtual clock and weight within its tenant."""

    vtime: float = 0.0
    weight: int = 1


# Charges between two prunes of idle clocks.
PRUNE_EVERY = 1000


def _order(c: Candidate) -> tuple[int, int, str]:
    return (-c.priority, c.due_at, c.id)


@dataclass
class FairScheduler:
    """Picks jobs across tenants by weight, and within a tenant across its
    categories by weight; in-category order preserved."""

    default_weight: int = 1
    _shares: dict[str, TenantShare] = field(default_factory=dict)
    _categories: dict[tuple[str, int], CategoryShare] = field(default_factory=dict)
    # Category weights set (others are 1), kept apart from the clocks so that
    # replacing the whole set (a reload) does not reset any clock.
    _category_weights: dict[tuple[str, int], int] = field(default_factory=dict)
    # Tenant weights set (others have ``default_weight``), kept apart from
    # the clocks so that pruning a clock keeps its tenant's weight.
    _weights: dict[str, int] = field(default_factory=dict)
    # System virtual time: the clock of the least-served backlogged tenant at
    # the last charge. Tenants re-enter at it, never below.
    _virtual_now: float = 0.0
    _charges: int = 0

    def set_weights(self, weights: dict[str, int]) -> None:
        for tenant, weight in weights.items():
            self._weights[tenant] = max(1, weight)
            share = self._shares.get(tenant)
            if share is not None:
                share.weight = self._weights[tenant]

    def weight(self, tenant: str) -> int:
        share = self._shares.get(tenant)
        if share is not None:
            return share.weight
        return self._weights.get(tenant, self.default_weight)

    @property
    def tracked(self) -> tuple[int, int]:
        """Clocks held: (tenants, categories)."""
        return len(self._shares), len(self._categories)

    def prune(self) -> None:
        """Drop the clocks of idle tenants: a tenant whose clock is at or below
        the floor (it re-enters there anyway), with its categories' clocks;
        and, in any tenant, a category whose clock is at or below the
        tenant's category floor."""
        idle = {t for t, share in self._shares.items() if share.vtime <= self._virtual_now}
        for tenant in idle:
            del self._shares[tenant]
        for key, category in list(self._categories.items()):
            tenant = key[0]
            share = self._shares.get(tenant)
            if share is None or category.vtime <= share.category_now:
                del self._categories[key]

    def set_category_weights(self, weights: dict[tuple[str, int], int]) -> None:
        """Replace every category weight: pairs not in ``weights`` go back to 1."""
        self._category_weights = {key: max(1, w) for key, w in weights.items()}
        for key, share in self._categories.items():
            share.weight = self._category_weights.get(key, 1)

    def category_weight(self, tenant: str, category: int) -> int:
        return self._category_weights.get((tenant, category), 1)

    def _share(self, tenant: str) -> TenantShare:
        share = self._shares.get(tenant)
        if share is None:
            share = self._shares[tenant] = TenantShare(
                vtime=self._virtual_now, weight=self._weights.get(tenant, self.default_weight)
            )
        return share

    def _category(self, tenant: str, category: int) -> CategoryShare:
        key = (tenant, category)
        share = self._categories.get(key)
        if share is None:
            share = self._categories[key] = CategoryShare(
                vtime=self._share(tenant).category_now,
                weight=self._category_weights.get(key, 1),
            )
        return share

    def _start(self, tenant: str) -> float:
        return max(self._share(tenant).vtime, self._virtual_now)

    def _category_start(self, tenant: str, category: int) -> float:
        known = self._categories.get((tenant, category))
        floor = self._shares[tenant].category_now if tenant in self._shares else 0.0
        return max(known.vtime, floor) if known is not None else floor

    def _in_tenant_order(self, tenant: str, queue: list[Candidate]) -> list[Candidate]:
        """A tenant's candidates in the order its categories' clocks give them."""
        by_category: dict[int, list[Candidate]] = {}
        for c in queue:
            by_category.setdefault(c.category, []).append(c)
        for jobs in by_category.values():
            jobs.sort(key=_order)
        if len(by_category) == 1:
            return next(iter(by_category.values()))
        heap = [
            (self._category_start(tenant, k), _order(jobs[0]), k) for k, jobs in by_category.items()
        ]
        heapq.heapify(heap)
        cursor = dict.fromkeys(by_category, 0)
        ordered: list[Candidate] = []
        while heap:
            vtime, _, category = heapq.heappop(heap)
            jobs = by_category[category]
            ordered.append(jobs[cursor[category]])
            cursor[category] += 1
            if cursor[category] < len(jobs):
                step = 1.0 / self.category_weight(tenant, category)
                heapq.heappush(heap, (vtime + step, _order(jobs[cursor[category]]), category))
        return ordered

    def pick(self, candidates: Iterable[Candidate], n: int) -> list[Candidate]:
        """Up to ``n`` candidates in the order capacity should go to them.

        Does not advance any clock: call ``charge`` with what was really leased.
        """
        by_tenant: dict[str, list[Candidate]] = {}
        for c in candidates:
            by_tenant.setdefault(c.tenant_id, []).append(c)
        for tenant, queue in by_tenant.items():
            by_tenant[tenant] = self._in_tenant_order(tenant, queue)
        heap = [(self._start(t), t) for t in by_tenant]
        heapq.heapify(heap)
        cursor = dict.fromkeys(by_tenant, 0)
        picked: list[Candidate] = []
        while heap and len(picked) < n:
            vtime, tenant = heapq.heappop(heap)
            queue = by_tenant[tenant]
            picked.append(queue[cursor[tenant]])
            cursor[tenant] += 1
            if cursor[tenant] < len(queue):
                heapq.heappush(heap, (vtime + 1.0 / self._share(tenant).weight, tenant))
        return picked

    def snapshot(self) -> FairSnapshot:
        """Known tenants' and categories' start clocks and weights.

        Lets the store rank candidates by the same rule as ``pick``: within a
        tenant the k-th job (from 0) of a category ranks at ``category start
        + k / category weight``; the k-th job of a tenant in that order ranks
        at ``start + k / weight``.
        """
        tenants = list(self._shares)
        keys = list(self._categories)
        return FairSnapshot(
            tenants=tenants,
            starts=[self._start(t) for t in tenants],
            weights=[float(self._shares[t].weight) for t in tenants],
            floor=self._virtual_now,
            category_floors=[self._shares[t].category_now for t in tenants],
            category_tenants=[t for t, _ in keys],
            categories=[k for _, k in keys],
            category_starts=[self._category_start(t, k) for t, k in keys],
            category_weights=[float(self.category_weight(t, k)) for t, k in keys],
        )

    def charge(self, tenants: Sequence[str], categories: Sequence[int] | None = None) -> None:
        """Advance clocks for jobs actually leased (one entry per job).

        ``categories``, aligned with ``tenants``, advances the categories'
        clocks too; without it only the tenants' clocks move.
        """
        if not tenants:
            return
        self._charges += 1
        if self._charges >= PRUNE_EVERY:
            self._charges = 0
            self.prune()
        starts = {t: self._start(t) for t in set(tenants)}
        self._virtual_now = max(self._virtual_now, min(starts.values()))
        for tenant, start in starts.items():
            self._shares[tenant].vtime = start
        for tenant in tenants:
            share = self._shares[tenant]
            share.vtime += 1.0 / share.weight
        if categories is None:
            return
        pairs = list(zip(tenants, categories, strict=True))
        category_starts = {key: self._category_start(*key) for key in set(pairs)}
        floors: dict[str, float] = {}
        for (tenant, _), start in category_starts.items():
            floors[tenant] = min(start, floors.get(tenant, start))
        for tenant, floor in floors.items():
            share = self._shares[tenant]
            share.category_now = max(share.category_now, floor)
        for key, start in category_starts.items():
            self._category(*key).vtime = start
        for key in pairs:
            category = self._categories[key]
            category.vtime += 1.0 / category.weight
