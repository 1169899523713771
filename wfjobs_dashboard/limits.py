"""The limits page (``/limits``): concurrency limits and rate limits (every tenant's)."""

from __future__ import annotations

from aiohttp import web

from worker_sdk import AdminClient

from .session import need_all_tenants
from .site import Site


async def limits(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    need_all_tenants(session)
    items = await site.call(session, AdminClient.list_concurrency_limits)
    rates = await site.call(session, AdminClient.list_rate_limits)
    return site.page(request, "limits.html", "Limits", limits=items, rates=rates)


ROUTES = [web.get("/limits", limits)]
