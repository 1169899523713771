"""The workers page (``/workers``): connected workers, drain and undrain (every tenant's)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from worker_sdk import AdminClient

from . import templating
from .session import Session, need_all_tenants
from .site import Site


async def workers(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    need_all_tenants(session)
    return site.page(
        request,
        "workers.html",
        "Workers",
        live="/live/workers",
        **await live_values(site, session),
    )


async def workers_live(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    need_all_tenants(session)
    return site.html(
        templating.render("workers_live.html", session, **await live_values(site, session))
    )


async def live_values(site: Site, session: Session) -> dict[str, Any]:
    """What the workers page's live part shows (``workers_live.html``)."""
    items = await site.call(session, AdminClient.list_workers)
    stats = await site.call(session, AdminClient.get_stats)
    return {"workers": items, "stats": stats, "now": datetime.now(UTC)}


ROUTES = [web.get("/workers", workers), web.get("/live/workers", workers_live)]
