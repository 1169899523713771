"""The pauses page (``/pauses``): the active pauses, a pause form, the history."""

from __future__ import annotations

from datetime import UTC, datetime

from aiohttp import web

from worker_sdk import AdminClient

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
    return site.page(
        request,
        "pauses.html",
        "Pauses",
        active=active,
        history=history,
        prefill=prefill,
        now=datetime.now(UTC),
    )


ROUTES = [web.get("/pauses", pauses)]
