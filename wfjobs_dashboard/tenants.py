"""The tenants page (``/tenants``): enable or disable each, its weight, category weights."""

from __future__ import annotations

from aiohttp import web

from worker_sdk import AdminClient

from . import views
from .site import Site


async def tenants(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    stats = await site.call(session, AdminClient.get_stats, tenant_id=session.tenant_id)
    active = await site.call(session, AdminClient.list_pauses, tenant_id=session.tenant_id)
    weights = await site.call(session, AdminClient.list_tenant_weights, tenant_id=session.tenant_id)
    disabled = {p.scope.tenant_id: p for p in active if views.pause_kind(p.scope) == "tenant"}
    set_weights = {w.tenant_id: w.weight for w in weights.weights}
    names = sorted({c.tenant_id for c in stats.counts} | set(disabled) | set(set_weights))
    if session.tenant_id:
        names = [session.tenant_id]
    categories = await site.call(
        session, AdminClient.list_category_weights, tenant_id=session.tenant_id
    )
    return site.page(
        request,
        "tenants.html",
        "Tenants",
        tenants=names,
        disabled=disabled,
        weights=set_weights,
        default_weight=weights.default_weight,
        category_weights=categories.weights,
    )


ROUTES = [web.get("/tenants", tenants)]
