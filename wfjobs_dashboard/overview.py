"""The overview page (``/``): backlog, pauses, charts; its live part and event stream."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from worker_sdk import JobEventFilter

from . import templating, views
from .backend import BUCKET, Overview
from .events import event_stream
from .session import Session
from .site import Site


def live_values(view: Overview, session: Session, sort: str = "") -> dict[str, Any]:
    """What the overview's live part shows (``overview_live.html``, given the
    outage too); ``sort``: the backlog's column (``-`` before it: descending)."""
    s = view.stats
    oldest = s.oldest_pending_age.total_seconds() if s.oldest_pending_age else None
    read_time = s.read_time or view.read_at
    now_text = views.counted_at(read_time)
    # GetStats counted the attempts failed from read_time minus its window (BUCKET).
    failed = views.jobs_href(failed_after=views.utc_text(read_time - BUCKET))
    due = views.jobs_href(status="PENDING", due_before=now_text, order="oldest")
    later = views.jobs_href(status="PENDING", due_after=now_text, order="oldest")
    b = s.backlog
    held = [
        (f"held: {what}", n, "")
        for what, n in (
            ("paused", b.paused),
            ("concurrency limit", b.limit),
            ("rate limit", b.rate),
            ("ordering key", b.ordering),
            ("no worker", b.no_worker),
            ("workers drained", b.drained),
        )
        if n
    ]
    cards = [
        ("pending", s.pending, "/jobs?status=PENDING"),
        ("of them ready (runnable now)", b.ready, ""),
        ("of them held", b.held, ""),
        *held,
        # Linked while it counts every job not due (the list cannot leave out
        # the paused ones, which the backlog counts as held).
        (
            "of them scheduled (not due yet)",
            b.scheduled,
            later if b.scheduled == s.scheduled else "",
        ),
        ("running", s.running, "/jobs?status=RUNNING"),
        ("oldest due pending", views.age(oldest) if s.pending - s.scheduled else "–", due),
        ("faulted (dead letter)", s.dead_letter, "/jobs?status=FAULTED"),
        ("retries, last 5 min", s.retries_in_window, ""),
        ("failures, last 5 min", s.failures_in_window, failed),
        ("completed, last 5 min", s.completions_in_window, "/jobs?status=COMPLETED"),
        ("connected workers", s.connected_workers, "" if session.tenant_id else "/workers"),
    ]
    headers, rows = views.backlog(s.counts, sort, now_text)
    return {
        "view": view,
        "cards": cards,
        "throughput": views.bar_chart(
            "Throughput",
            view.history,
            (("completed", "ok"), ("failed", "bad"), ("retried", "warn")),
            "completed",
        ),
        "latency": views.line_chart("Latency", view.history),
        "backlog_headers": headers,
        "backlog_rows": rows,
    }


async def overview(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    view = await site.backend.overview(session.token, session.tenant_id)
    sort = request.query.get("sort", "")
    return site.page(
        request,
        "overview.html",
        "Overview",
        live="/live/overview" + (f"?{urlencode({'sort': sort})}" if sort else ""),
        events="/events/overview",
        **live_values(view, session, sort),
    )


async def overview_live(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    view = await site.backend.overview(session.token, session.tenant_id)
    sort = request.query.get("sort", "")
    return site.html(
        templating.render(
            "overview_live.html",
            session,
            outage=site.backend.outage,
            **live_values(view, session, sort),
        )
    )


async def overview_events(request: web.Request) -> web.StreamResponse:
    site, session = Site.of(request)
    return await event_stream(request, JobEventFilter(tenant_id=session.tenant_id))


ROUTES = [
    web.get("/", overview),
    web.get("/live/overview", overview_live),
    web.get("/events/overview", overview_events),
]
