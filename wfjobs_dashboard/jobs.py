"""The jobs list (``/jobs``: filters, order, pages, search) and a job's page."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import grpc
from aiohttp import web
from google.protobuf.json_format import MessageToDict

from worker_sdk import AdminClient, JobEventFilter, JobFilter, JobView, WorkflowJobsError

from . import filters, templating, views
from .events import event_stream
from .filters import FilterValues
from .session import Session
from .site import Site

# A payload search reads at most this many jobs of the filter, this many a call.
PAYLOAD_SCAN_JOBS = 2000
PAYLOAD_SCAN_PAGE = 500


async def jobs(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    values = filters.read_query(request, session)
    listing = await listing_of(
        site,
        session,
        values,
        page_token=request.query.get("page_token", ""),
        last_page=request.query.get("page") == "last",
    )
    query = filters.query(values)

    def page_href(**extra: str) -> str:
        return views.jobs_href(**{**query, **extra})

    return site.page(
        request,
        "jobs.html",
        "Jobs",
        values=values,
        listing=listing,
        now=datetime.now(UTC),
        other_order="oldest" if values.order == "newest" else "newest",
        page_href=page_href,
        bulk_fields=filters.form_fields(values),
    )


async def listing_of(
    site: Site,
    session: Session,
    values: FilterValues,
    *,
    page_token: str = "",
    last_page: bool = False,
) -> views.JobListing:
    """The jobs a list shows: a page of its filter, or what its search found
    (the bulk actions act on the same, :mod:`.actions`).

    A job id search that finds the job goes to its page (303); one that does
    not lists nothing.
    """
    job_filter = filters.job_filter(values)
    if values.search == "id":
        try:
            job = await site.call(session, AdminClient.get_job, values.q)
        except WorkflowJobsError as exc:
            if exc.code not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                raise
            return views.JobListing([], total=0, note=f"no job has the id {values.q!r}")
        raise web.HTTPSeeOther(f"/jobs/{job.id}")
    if values.search == "payload":
        found, scanned = await payload_search(site, session, job_filter, values)
        note = (
            f"{len(found)} of the {scanned} {values.order} job(s) matching the other "
            f"filters have {values.q!r} in their payload (at most "
            f"{PAYLOAD_SCAN_JOBS} are searched, {values.page_size} shown)"
        )
        return views.JobListing(found, total=len(found), note=note)
    result = await site.call(
        session,
        AdminClient.list_jobs,
        job_filter,
        page_size=values.page_size,
        page_token=page_token,
        newest_first=values.order == "newest",
        include_total=True,
        last_page=last_page,
    )
    return views.JobListing(
        result.jobs,
        total=result.total_count,
        next_token=result.next_page_token,
        prev_token=result.prev_page_token,
    )


async def payload_search(
    site: Site, session: Session, job_filter: JobFilter, values: FilterValues
) -> tuple[list[JobView], int]:
    """The jobs among the first :data:`PAYLOAD_SCAN_JOBS` of the filter whose
    payload holds the text, as sent or as the job page shows it
    (:func:`.views.payload_holds`), at most a page of them."""
    wanted = values.page_size
    found: list[JobView] = []
    scanned, token = 0, ""
    while scanned < PAYLOAD_SCAN_JOBS and len(found) < wanted:
        chunk = await site.call(
            session,
            AdminClient.list_jobs,
            job_filter,
            page_size=min(PAYLOAD_SCAN_PAGE, PAYLOAD_SCAN_JOBS - scanned),
            page_token=token,
            newest_first=values.order == "newest",
        )
        scanned += len(chunk.jobs)
        found.extend(
            j
            for j in chunk.jobs
            if views.payload_holds(j.payload, j.payload_content_type, values.q)
        )
        token = chunk.next_page_token
        if not token:
            break
    return found[:wanted], scanned


def live_values(view: views.JobPage) -> dict[str, Any]:
    """What the job page's live part shows (``job_live.html``)."""
    wf = view.job.workflow
    definition_paused = any(
        views.pause_kind(p.scope) == "definition"
        and wf is not None
        and p.scope.value == wf.definition_id
        for p in view.pauses
    )
    return {"view": view, "now": datetime.now(UTC), "definition_paused": definition_paused}


async def job_detail(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    job_id = request.match_info["job_id"]
    view = await _job_view(site, session, job_id, with_key=True)
    raw = view.job.raw
    policy = MessageToDict(raw.retry_policy) if raw.HasField("retry_policy") else {}
    return site.page(
        request,
        "job.html",
        f"Job {view.job.job_type}",
        live=f"/live/jobs/{job_id}",
        events=f"/events/jobs/{job_id}",
        retry_policy=json.dumps(policy, indent=2) if policy else "",
        **live_values(view),
    )


async def job_live(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    view = await _job_view(site, session, request.match_info["job_id"])
    return site.html(templating.render("job_live.html", session, **live_values(view)))


async def _job_view(
    site: Site, session: Session, job_id: str, *, with_key: bool = False
) -> views.JobPage:
    """The job, and for a pending one why it waits; ``with_key``: also the
    uniqueness key that names it, whatever its state (the full page shows it)."""
    job = await site.call(session, AdminClient.get_job, job_id)
    if job.status.value != "PENDING":
        if not with_key:
            return views.JobPage(job)
        explanation = await site.call(session, AdminClient.explain_job, job_id)
        return views.JobPage(job, unique_key=explanation.unique_key)
    explanation = await site.call(session, AdminClient.explain_job, job_id)
    reasons = explanation.reasons
    held_by = {r.pause_id for r in reasons if r.pause_id}
    holding = []
    if held_by:
        # The pauses that hold it, so the page offers to lift each.
        active = await site.call(session, AdminClient.list_pauses, tenant_id=job.tenant_id)
        holding = [p for p in active if p.id in held_by]
    return views.JobPage(job, reasons, explanation.last_failure, holding, explanation.unique_key)


async def job_events(request: web.Request) -> web.StreamResponse:
    site, session = Site.of(request)
    job_id = request.match_info["job_id"]
    return await event_stream(request, JobEventFilter(job_id=job_id, tenant_id=session.tenant_id))


ROUTES = [
    web.get("/jobs", jobs),
    web.get("/jobs/{job_id}", job_detail),
    web.get("/live/jobs/{job_id}", job_live),
    web.get("/events/jobs/{job_id}", job_events),
]
