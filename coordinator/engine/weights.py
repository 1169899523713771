"""Fair-share weights as operators set and list them: a tenant's share of the
starts across tenants, and a category's share of its tenant's starts. Every
replica applies a change (the stride scheduler itself is ``fairness.py``).
"""

from __future__ import annotations

from coordinator.engine.fairness import FairScheduler
from coordinator.engine.limit_settings import LimitSettings
from coordinator.engine.runner import StoreRunner
from coordinator.errors import InvalidArgument
from coordinator.model import JobCategory
from coordinator.store import Store


class Weights:
    """Tenant weights and category weights."""

    def __init__(
        self,
        *,
        store: Store,
        run_store: StoreRunner,
        fair: FairScheduler,
        settings: LimitSettings,
    ) -> None:
        self._store = store
        self._run = run_store
        self._fair = fair
        # Loads the category weights with the limits (``reload_limits``).
        self._settings = settings

    async def set_tenant_weight(self, tenant_id: str, weight: int) -> None:
        if not tenant_id:
            raise InvalidArgument("tenant_id is required")
        if weight < 1 or weight > 10_000:
            raise InvalidArgument("weight must be between 1 and 10000")
        await self._run(self._store.tenant_set_weight, tenant_id, weight)
        self._fair.set_weights({tenant_id: weight})

    async def list_tenant_weights(self, tenant_id: str = "") -> dict[str, int]:
        """The weights set per tenant, as the store holds them (shared by every replica)."""
        weights = await self._run(self._store.tenant_weights)
        if tenant_id:
            return {t: w for t, w in weights.items() if t == tenant_id}
        return dict(weights)

    @property
    def default_tenant_weight(self) -> int:
        return self._fair.default_weight

    async def set_category_weight(self, tenant_id: str, category: int, weight: int) -> None:
        """Set a category's share of its tenant's starts; every replica applies it."""
        _check_category_weight_scope(tenant_id, category)
        if weight < 1 or weight > 10_000:
            raise InvalidArgument("weight must be between 1 and 10000")
        await self._run(self._store.category_set_weight, tenant_id, category, weight)
        await self._settings.reload_limits()

    async def remove_category_weight(self, tenant_id: str, category: int) -> bool:
        """Put a category back to weight 1; False when no weight was set."""
        _check_category_weight_scope(tenant_id, category)
        removed = await self._run(self._store.category_remove_weight, tenant_id, category)
        if removed:
            await self._settings.reload_limits()
        return bool(removed)

    async def list_category_weights(self, tenant_id: str = "") -> dict[tuple[str, int], int]:
        """The weights set per (tenant, category), as the store holds them."""
        weights = await self._run(self._store.category_weights)
        if tenant_id:
            return {k: w for k, w in weights.items() if k[0] == tenant_id}
        return dict(weights)


def _check_category_weight_scope(tenant_id: str, category: int) -> None:
    if not tenant_id:
        raise InvalidArgument("tenant_id is required: category weights share a tenant's starts")
    if category not in {int(c) for c in JobCategory}:
        raise InvalidArgument(f"category {category} is not a known JobCategory")


__all__ = ["Weights"]
