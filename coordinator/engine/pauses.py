"""Pauses and weights: pausing and unpausing a scope (tenant, job type,
definition, instance, category), listing pauses, and the fair-share weights of
tenants and of categories within a tenant.
"""

from __future__ import annotations

import logging
from typing import Any

from coordinator.engine.bounds import category_value
from coordinator.engine.core import EngineCore
from coordinator.errors import InvalidArgument, NotFound
from coordinator.ids import new_id
from coordinator.model import JobCategory, PauseKind, PauseScope, scope_text

log = logging.getLogger(__name__)


def pause_scope_text(scope: PauseScope, *, with_tenant: bool = True) -> str:
    """A pause scope as every message words it: "tenant acme" for a tenant
    pause; otherwise its kind and value ("definition d-1", "job type
    send-email", "category integration"), followed by "(tenant acme)" when it
    has a tenant and ``with_tenant`` (a job's own pause leaves it out: the
    tenant is the job's)."""
    if scope.kind == PauseKind.TENANT:
        return f"tenant {scope.tenant_id}"
    text = scope_text(scope.kind, scope.value)
    return f"{text} (tenant {scope.tenant_id})" if with_tenant and scope.tenant_id else text


def scope_of_pause(p: Any) -> PauseScope:
    """The scope of a stored pause row."""
    return PauseScope(PauseKind(p.kind), p.tenant_id, p.value)


class Pauses(EngineCore):
    """Pauses by scope, tenant weights and category weights."""

    async def pause(
        self, scope: PauseScope, actor: str, reason: str, expires_at: int | None
    ) -> Any:
        scope = _check_scope(scope)
        now = self.clock.now_us()
        if expires_at is not None and expires_at <= now:
            raise InvalidArgument("expire_time must be in the future")
        record = await self.run_store(
            self.store.pause_create, new_id(), scope, actor, reason, expires_at, now
        )
        if expires_at is not None:
            self.dispatcher.wake(expires_at)
        return record

    async def unpause(self, scope: PauseScope, actor: str) -> list[Any]:
        scope = _check_scope(scope)
        lifted = await self.run_store(self.store.pause_lift, scope, actor, self.clock.now_us())
        if not lifted:
            raise NotFound(f"no active pause on {pause_scope_text(scope)}")
        self.dispatcher.wake()
        return lifted

    async def list_pauses(self, include_lifted: bool, tenant_id: str) -> list[Any]:
        return await self.run_store(
            self.store.pause_list,
            self.clock.now_us(),
            include_lifted=include_lifted,
            tenant_id=tenant_id,
        )

    async def set_tenant_weight(self, tenant_id: str, weight: int) -> None:
        if not tenant_id:
            raise InvalidArgument("tenant_id is required")
        if weight < 1 or weight > 10_000:
            raise InvalidArgument("weight must be between 1 and 10000")
        await self.run_store(self.store.tenant_set_weight, tenant_id, weight)
        self.fair.set_weights({tenant_id: weight})

    async def list_tenant_weights(self, tenant_id: str = "") -> dict[str, int]:
        """The weights set per tenant, as the store holds them (shared by every replica)."""
        weights = await self.run_store(self.store.tenant_weights)
        if tenant_id:
            return {t: w for t, w in weights.items() if t == tenant_id}
        return dict(weights)

    @property
    def default_tenant_weight(self) -> int:
        return self.fair.default_weight

    async def set_category_weight(self, tenant_id: str, category: int, weight: int) -> None:
        """Set a category's share of its tenant's starts; every replica applies it."""
        _check_category_weight_scope(tenant_id, category)
        if weight < 1 or weight > 10_000:
            raise InvalidArgument("weight must be between 1 and 10000")
        await self.run_store(self.store.category_set_weight, tenant_id, category, weight)
        await self.reload_limits()

    async def remove_category_weight(self, tenant_id: str, category: int) -> bool:
        """Put a category back to weight 1; False when no weight was set."""
        _check_category_weight_scope(tenant_id, category)
        removed = await self.run_store(self.store.category_remove_weight, tenant_id, category)
        if removed:
            await self.reload_limits()
        return bool(removed)

    async def list_category_weights(self, tenant_id: str = "") -> dict[tuple[str, int], int]:
        """The weights set per (tenant, category), as the store holds them."""
        weights = await self.run_store(self.store.category_weights)
        if tenant_id:
            return {k: w for k, w in weights.items() if k[0] == tenant_id}
        return dict(weights)


def _check_category_weight_scope(tenant_id: str, category: int) -> None:
    if not tenant_id:
        raise InvalidArgument("tenant_id is required: category weights share a tenant's starts")
    if category not in {int(c) for c in JobCategory}:
        raise InvalidArgument(f"category {category} is not a known JobCategory")


def _check_scope(scope: PauseScope) -> PauseScope:
    """The scope as stored (a category by its number), or InvalidArgument."""
    if scope.kind == PauseKind.TENANT:
        if not scope.tenant_id:
            raise InvalidArgument("a tenant pause needs tenant_id")
        if scope.value:
            raise InvalidArgument("a tenant pause takes no value; put the tenant in tenant_id")
    elif not scope.value:
        raise InvalidArgument(f"a {scope.kind.name.lower()} pause needs value (the id to pause)")
    elif scope.kind == PauseKind.CATEGORY:
        return PauseScope(scope.kind, scope.tenant_id, category_value(scope.value))
    return scope


__all__ = ["Pauses", "pause_scope_text", "scope_of_pause"]
