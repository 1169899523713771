"""The pauses page (``/pauses``): the active pauses, a pause form, the history."""

from __future__ import annotations

from datetime import UTC, datetime

from aiohttp import web

from worker_sdk import AdminClient

from . import render
from .site import Site


async def pauses(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    active = await site.call(session, AdminClient.list_pauses, tenant_id=session.tenant_id)
    history = await site.call(
        session, AdminClient.list_pauses, include_lifted=True, tenant_id=session.tenant_id
    )
    history = sorted(
        history, key=lambda p: p.create_time or datetime.min.replace(tzinfo=UTC), reverse=True
    )
    prefill = {k: request.query.get(k, "") for k in ("kind", "value", "tenant_id")}
    return site.page(request, "Pauses", render.pauses_body(active, history, session, prefill))


ROUTES = [web.get("/pauses", pauses)]
