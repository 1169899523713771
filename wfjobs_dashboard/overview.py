"""The overview page (``/``): backlog, pauses, charts; its live part and event stream."""

from __future__ import annotations

from urllib.parse import urlencode

from aiohttp import web

from worker_sdk import JobEventFilter

from . import render
from .events import event_stream
from .site import Site


async def overview(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    view = await site.backend.overview(session.token, session.tenant_id)
    sort = request.query.get("sort", "")
    return site.page(
        request,
        "Overview",
        f'<div id="live">{render.overview_live(view, session, sort, site.backend.outage)}</div>',
        live="/live/overview" + (f"?{urlencode({'sort': sort})}" if sort else ""),
        events="/events/overview",
    )


async def overview_live(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    view = await site.backend.overview(session.token, session.tenant_id)
    sort = request.query.get("sort", "")
    return site.html(render.overview_live(view, session, sort, site.backend.outage))


async def overview_events(request: web.Request) -> web.StreamResponse:
    site, session = Site.of(request)
    return await event_stream(request, JobEventFilter(tenant_id=session.tenant_id))


ROUTES = [
    web.get("/", overview),
    web.get("/live/overview", overview_live),
    web.get("/events/overview", overview_events),
]
