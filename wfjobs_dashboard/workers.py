"""The workers page (``/workers``): connected workers, drain and undrain (every tenant's)."""

from __future__ import annotations

from aiohttp import web

from worker_sdk import AdminClient

from . import render
from .session import Session, need_all_tenants
from .site import Site


async def workers(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    need_all_tenants(session)
    return site.page(
        request,
        "Workers",
        f'<div id="live">{await workers_html(site, session)}</div>',
        live="/live/workers",
    )


async def workers_live(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    need_all_tenants(session)
    return site.html(await workers_html(site, session))


async def workers_html(site: Site, session: Session) -> str:
    items = await site.call(session, AdminClient.list_workers)
    stats = await site.call(session, AdminClient.get_stats)
    return render.workers_body(items, stats, session)


ROUTES = [web.get("/workers", workers), web.get("/live/workers", workers_live)]
