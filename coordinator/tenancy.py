"""Tenant scope: which tenants a credential, and what it opens, may touch.

Design note. A scope is a frozenset of tenant ids, or ``None`` for every
tenant (a credential whose token-file entry lists ``["*"]``, or any caller
when authentication is off). A credential's scope travels with what it opens:
``Principal.tenants`` for a call, ``WorkerSession.tenants`` for a stream,
``WorkerView.tenants`` for a worker another replica holds. Every decision on
a scope is made by the functions below (the API's policies, the servicers,
the engine's sessions, stats and ExplainJob call them), so "may this scope
touch that tenant" has one answer; ``tests/unit/packaging/test_rule_homes.py``
fails when a scope is tested anywhere else. The one other spelling is the
SQL the store builds from a scope for acquisition (``store/leases.py``),
which applies the same rule inside the statement.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol

# How the token file and WhoAmI spell "every tenant".
ALL_TENANTS = "*"

TenantScope = frozenset[str] | None


def allows(scope: Collection[str] | None, tenant_id: str) -> bool:
    """True when ``scope`` may touch ``tenant_id``'s jobs.

    Any collection of tenant ids will do: a ``WorkerView`` holds its scope
    sorted, as a tuple, for display.
    """
    return scope is None or tenant_id in scope


def every_tenant(scope: TenantScope) -> bool:
    """True when ``scope`` covers every tenant (what cluster-wide calls need)."""
    return scope is None


def only_tenant(scope: TenantScope) -> str | None:
    """The tenant of a scope of exactly one tenant; None otherwise."""
    if scope is not None and len(scope) == 1:
        return next(iter(scope))
    return None


def visible(scope: TenantScope, tenant_ids: Iterable[str]) -> list[str]:
    """Those of ``tenant_ids`` that ``scope`` may see, in their order."""
    return [t for t in tenant_ids if allows(scope, t)]


def describe(scope: TenantScope) -> str:
    """``scope`` for a message: "every tenant" or the tenant ids."""
    return "every tenant" if scope is None else ", ".join(sorted(scope))


def scope_of_names(names: Collection[str]) -> TenantScope:
    """The scope a token-file ``tenants`` list names (``"*"`` among them: every tenant)."""
    return None if ALL_TENANTS in names else frozenset(names)


def names_of_scope(scope: TenantScope) -> list[str]:
    """``scope`` as WhoAmI lists it: ``["*"]`` for every tenant, else the ids sorted."""
    return [ALL_TENANTS] if scope is None else sorted(scope)


class JobTenantReader(Protocol):
    """What ``foreign_jobs`` reads: the tenant of each stored job (the engine)."""

    async def job_tenants(self, job_ids: Sequence[str]) -> Mapping[str, str]: ...


async def foreign_jobs(
    reader: JobTenantReader, scope: TenantScope, job_ids: Collection[str]
) -> set[str]:
    """Of ``job_ids``, the stored jobs of tenants outside ``scope``.

    A caller answers those exactly like jobs that do not exist (NOT_FOUND, or
    a lost lease), so a scoped credential learns nothing of other tenants'
    jobs. Nothing is read for a scope of every tenant.
    """
    if every_tenant(scope) or not job_ids:
        return set()
    tenants = await reader.job_tenants(list(job_ids))
    return {job_id for job_id, tenant in tenants.items() if not allows(scope, tenant)}


__all__ = [
    "ALL_TENANTS",
    "JobTenantReader",
    "TenantScope",
    "allows",
    "describe",
    "every_tenant",
    "foreign_jobs",
    "names_of_scope",
    "only_tenant",
    "scope_of_names",
    "visible",
]
