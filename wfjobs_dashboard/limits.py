"""The limits page (``/limits``): concurrency limits and rate limits (every tenant's)."""

from __future__ import annotations

from aiohttp import web

from worker_sdk import AdminClient

from . import render
from .session import need_all_tenants
from .site import Site


async def limits(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    need_all_tenants(session)
    items = await site.call(session, AdminClient.list_concurrency_limits)
    rates = await site.call(session, AdminClient.list_rate_limits)
    body = render.limits_body(items, session) + render.rate_limits_body(rates, session)
    return site.page(request, "Limits", body)


ROUTES = [web.get("/limits", limits)]
