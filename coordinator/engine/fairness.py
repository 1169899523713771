"""Weighted tenant fairness by virtual time (stride scheduling).

Each tenant has a virtual clock that advances by ``1 / weight`` for every job
it is given. A selection repeatedly gives the next job to the backlogged
tenant with the smallest clock, so over any stretch where several tenants
have eligible work each receives capacity in proportion to its weight,
whatever the size of its backlog. A tenant that was idle re-enters at the
current floor (the smallest clock among backlogged tenants) rather than with
credit saved up while idle.

The state is per coordinator. Every replica shares its own acquisitions
fairly, so the sum over replicas is fair as well.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from coordinator.model import Candidate


@dataclass(slots=True)
class TenantShare:
    """A tenant's virtual clock and weight."""

    vtime: float = 0.0
    weight: int = 1


@dataclass
class FairScheduler:
    """Picks jobs across tenants by weight, in-tenant order preserved."""

    default_weight: int = 1
    _shares: dict[str, TenantShare] = field(default_factory=dict)
    # System virtual time: the clock of the least-served backlogged tenant at
    # the last charge. Tenants re-enter at it, never below.
    _virtual_now: float = 0.0

    def set_weights(self, weights: dict[str, int]) -> None:
        for tenant, weight in weights.items():
            self._share(tenant).weight = max(1, weight)

    def weight(self, tenant: str) -> int:
        return self._share(tenant).weight

    def _share(self, tenant: str) -> TenantShare:
        share = self._shares.get(tenant)
        if share is None:
            share = self._shares[tenant] = TenantShare(
                vtime=self._virtual_now, weight=self.default_weight
            )
        return share

    def _start(self, tenant: str) -> float:
        return max(self._share(tenant).vtime, self._virtual_now)

    def pick(self, candidates: Iterable[Candidate], n: int) -> list[Candidate]:
        """Up to ``n`` candidates in the order capacity should go to them.

        Does not advance any clock: call ``charge`` with what was really leased.
        """
        by_tenant: dict[str, list[Candidate]] = {}
        for c in candidates:
            by_tenant.setdefault(c.tenant_id, []).append(c)
        for queue in by_tenant.values():
            queue.sort(key=lambda c: (-c.priority, c.due_at, c.id))
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

    def snapshot(self) -> tuple[list[str], list[float], list[float], float]:
        """Known tenants' start clocks and weights, and the clock of unknown ones.

        Lets the store rank candidates by the same rule as ``pick``: the k-th
        job (from 0) of a tenant ranks at ``start + k / weight``.
        """
        tenants = list(self._shares)
        starts = [self._start(t) for t in tenants]
        weights = [float(self._shares[t].weight) for t in tenants]
        return tenants, starts, weights, self._virtual_now

    def charge(self, tenants: Sequence[str]) -> None:
        """Advance clocks for jobs actually leased (one entry per job)."""
        if not tenants:
            return
        starts = {t: self._start(t) for t in set(tenants)}
        self._virtual_now = max(self._virtual_now, min(starts.values()))
        for tenant, start in starts.items():
            self._shares[tenant].vtime = start
        for tenant in tenants:
            share = self._shares[tenant]
            share.vtime += 1.0 / share.weight
