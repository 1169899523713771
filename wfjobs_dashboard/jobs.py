"""The jobs list (``/jobs``: filters, order, pages, search) and a job's page."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import grpc
from aiohttp import web

from worker_sdk import AdminClient, JobEventFilter, JobFilter, WorkflowJobsError
from workflowjobs.contract import LATEST_YEAR

from . import render
from .events import event_stream
from .session import Session, tenant_for
from .site import Site

# A payload search reads at most this many jobs of the filter, this many a call.
PAYLOAD_SCAN_JOBS = 2000
PAYLOAD_SCAN_PAGE = 500


def filter_values(request: web.Request, session: Session) -> dict[str, Any]:
    q = request.query
    statuses = [s.upper() for s in q.getall("status", []) if s.upper() in render.STATUSES]
    values: dict[str, Any] = {
        "statuses": statuses,
        "tenant_id": tenant_for(session, q.get("tenant_id", "").strip()),
        # One field, comma-separated; repeated job_type parameters add to it.
        "job_type": ", ".join(t for v in q.getall("job_type", []) for t in _job_types(v)),
    }
    for key in (
        "definition_id",
        "instance_id",
        "correlation_id",
        "parent_job_id",
        "group_id",
        *render.TIME_FILTERS,
    ):
        values[key] = q.get(key, "").strip()
    category = q.get("category", "").upper()
    values["category"] = category if category in render.CATEGORIES else ""
    try:
        values["page_size"] = min(1000, max(1, int(q.get("page_size", "50"))))
    except ValueError:
        values["page_size"] = 50
    values["order"] = "oldest" if q.get("order") == "oldest" else "newest"
    values["q"] = q.get("q", "").strip()
    values["q_in"] = q.get("q_in", "") if q.get("q_in", "") in render.SEARCH_IN else "id"
    if values["q"] and values["q_in"] == "correlation":
        values["correlation_id"] = values["q"]
    return values


async def jobs(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    values = filter_values(request, session)
    job_filter = job_filter_of(values)
    query = {
        k: v
        for k, v in request.query.items()
        if k not in ("status", "job_type", "page_token", "page") and v
    }
    query["status"] = values["statuses"]
    if values["job_type"]:
        query["job_type"] = values["job_type"]
    searched = ""
    if values["q"] and values["q_in"] == "id":
        # A job id goes straight to its page.
        try:
            job = await site.call(session, AdminClient.get_job, values["q"])
        except WorkflowJobsError as exc:
            if exc.code not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                raise
            searched = f"no job has the id {values['q']!r}"
        else:
            raise web.HTTPSeeOther(f"/jobs/{job.id}")
    if values["q"] and values["q_in"] == "payload":
        found, scanned = await payload_search(site, session, job_filter, values)
        searched = (
            f"{len(found)} of the {scanned} {values['order']} job(s) matching the other "
            f"filters have {values['q']!r} in their payload (at most "
            f"{PAYLOAD_SCAN_JOBS} are searched, {values['page_size']} shown)"
        )
        listing = render.JobListing(found, total=len(found), note=searched)
    else:
        result = await site.call(
            session,
            AdminClient.list_jobs,
            job_filter,
            page_size=values["page_size"],
            page_token=request.query.get("page_token", ""),
            newest_first=values["order"] == "newest",
            include_total=True,
            last_page=request.query.get("page") == "last",
        )
        listing = render.JobListing(
            result.jobs,
            total=result.total_count,
            next_token=result.next_page_token,
            prev_token=result.prev_page_token,
            note=searched,
        )
    body = render.jobs_page_body(listing, values, query, session)
    return site.page(request, "Jobs", body)


async def payload_search(
    site: Site, session: Session, job_filter: JobFilter, values: dict[str, Any]
) -> tuple[list[Any], int]:
    """The jobs among the first :data:`PAYLOAD_SCAN_JOBS` of the filter whose
    payload holds the text (as UTF-8 bytes), at most a page of them."""
    needle, wanted = values["q"].encode(), values["page_size"]
    found: list[Any] = []
    scanned, token = 0, ""
    while scanned < PAYLOAD_SCAN_JOBS and len(found) < wanted:
        chunk = await site.call(
            session,
            AdminClient.list_jobs,
            job_filter,
            page_size=min(PAYLOAD_SCAN_PAGE, PAYLOAD_SCAN_JOBS - scanned),
            page_token=token,
            newest_first=values["order"] == "newest",
        )
        scanned += len(chunk.jobs)
        found.extend(j for j in chunk.jobs if needle in j.payload)
        token = chunk.next_page_token
        if not token:
            break
    return found[:wanted], scanned


async def job_detail(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    job_id = request.match_info["job_id"]
    view = await _job_view(site, session, job_id, with_key=True)
    live = render.job_live(view, session)
    body = f'<div id="live">{live}</div>{render.job_static(view.job, view.unique_key)}'
    return site.page(
        request,
        f"Job {view.job.job_type}",
        body,
        live=f"/live/jobs/{job_id}",
        events=f"/events/jobs/{job_id}",
    )


async def job_live(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    view = await _job_view(site, session, request.match_info["job_id"])
    return site.html(render.job_live(view, session))


async def _job_view(
    site: Site, session: Session, job_id: str, *, with_key: bool = False
) -> render.JobPage:
    """The job, and for a pending one why it waits; ``with_key``: also the
    uniqueness key that names it, whatever its state (the full page shows it)."""
    job = await site.call(session, AdminClient.get_job, job_id)
    if job.status.value != "PENDING":
        if not with_key:
            return render.JobPage(job)
        explanation = await site.call(session, AdminClient.explain_job, job_id)
        return render.JobPage(job, unique_key=explanation.unique_key)
    explanation = await site.call(session, AdminClient.explain_job, job_id)
    reasons = explanation.reasons
    held_by = {r.pause_id for r in reasons if r.pause_id}
    holding = []
    if held_by:
        # The pauses that hold it, so the page offers to lift each.
        active = await site.call(session, AdminClient.list_pauses, tenant_id=job.tenant_id)
        holding = [p for p in active if p.id in held_by]
    return render.JobPage(job, reasons, explanation.last_failure, holding, explanation.unique_key)


async def job_events(request: web.Request) -> web.StreamResponse:
    site, session = Site.of(request)
    job_id = request.match_info["job_id"]
    return await event_stream(request, JobEventFilter(job_id=job_id, tenant_id=session.tenant_id))


def _local_time(text: str, what: str) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (ValueError, OverflowError):
        raise web.HTTPBadRequest(
            text=f"{what} must be a date and time from year 1 to {LATEST_YEAR} in UTC, not {text[:60]!r}"
        ) from None


def job_filter_of(values: dict[str, Any]) -> JobFilter:
    return JobFilter(
        statuses=values.get("statuses", ()),
        tenant_id=values.get("tenant_id", ""),
        job_types=_job_types(values.get("job_type", "")),
        definition_id=values.get("definition_id", ""),
        instance_id=values.get("instance_id", ""),
        correlation_id=values.get("correlation_id", ""),
        parent_job_id=values.get("parent_job_id", ""),
        group_id=values.get("group_id", ""),
        category=values.get("category") or None,
        created_after=_local_time(values.get("created_after", ""), "created after"),
        created_before=_local_time(values.get("created_before", ""), "created before"),
        due_after=_local_time(values.get("due_after", ""), "due after"),
        due_before=_local_time(values.get("due_before", ""), "due before"),
    )


def _job_types(text: str) -> list[str]:
    """The job types of the filter's field: comma-separated, a job of any of them matches."""
    return [t for t in (part.strip() for part in text.split(",")) if t]


def filter_text(f: JobFilter) -> str:
    parts = []
    if f.statuses:
        parts.append("status " + "/".join(str(s).lower() for s in f.statuses))
    for label, value in (
        ("tenant", f.tenant_id),
        ("type", "/".join(f.job_types)),
        ("definition", f.definition_id),
        ("instance", f.instance_id),
        ("correlation", f.correlation_id),
        ("parent job", f.parent_job_id),
        ("group", f.group_id),
        ("category", f.category),
        ("created after", f.created_after),
        ("created before", f.created_before),
        ("due after", f.due_after),
        ("due before", f.due_before),
    ):
        if value:
            parts.append(f"{label} {value}")
    return ", ".join(parts) or "every job"


ROUTES = [
    web.get("/jobs", jobs),
    web.get("/jobs/{job_id}", job_detail),
    web.get("/live/jobs/{job_id}", job_live),
    web.get("/events/jobs/{job_id}", job_events),
]
