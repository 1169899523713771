"""HTML of the dashboard's pages: plain server-rendered markup, every value escaped."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any
from urllib.parse import urlencode

from google.protobuf.json_format import MessageToDict

from worker_sdk import (
    LIMIT_SCOPE_KINDS,
    PAUSE_SCOPE_KINDS,
    CategoryWeight,
    ConcurrencyLimit,
    GroupView,
    JobAttemptView,
    JobStats,
    JobView,
    PauseRecord,
    PauseScope,
    RateLimit,
    StatusCount,
    UniqueKey,
    WorkerView,
    category_name,
    pause_scope_text,
)
from workflowjobs.v1 import admin_service_pb2 as apb

from .backend import Bucket, Outage, Overview

STATUSES = ("PENDING", "RUNNING", "COMPLETED", "FAULTED", "CANCELLED")
CATEGORIES = ("CONTINUATION", "ACTIVITY_WORK", "INTEGRATION", "MAINTENANCE", "CUSTOM")
# (form value, label) of each scope kind, as the contract declares them; a
# tenant's pause disables the tenant, offered last.
PAUSE_KINDS = (
    *((k, k.replace("_", " ")) for k in PAUSE_SCOPE_KINDS if k != "tenant"),
    ("tenant", "tenant (disables it)"),
)
LIMIT_KINDS = tuple((k, k.replace("_", " ")) for k in LIMIT_SCOPE_KINDS)
NAV = (
    ("/", "Overview"),
    ("/jobs", "Jobs"),
    ("/pauses", "Pauses"),
    ("/tenants", "Tenants"),
    ("/limits", "Limits"),
    ("/workers", "Workers"),
)
# What the jobs page's search box searches.
SEARCH_IN = {"id": "job id", "correlation": "correlation id", "payload": "payload text"}
# ListJobs' time filters, as datetime-local inputs read as UTC.
TIME_FILTERS = ("created_after", "created_before", "due_after", "due_before")
# Where a scoped session may not go: these act on every tenant.
ALL_TENANT_PAGES = frozenset({"/limits", "/workers"})


# The page being rendered (path and query): where an action's form sends the
# browser back to. Forms carry it because pages send no Referer
# (Referrer-Policy: no-referrer); set per request by the app.
PAGE: ContextVar[str] = ContextVar("PAGE", default="/")


def e(value: Any) -> str:
    """Escape anything for HTML text or a quoted attribute."""
    return escape("" if value is None else str(value), quote=True)


# -- values --------------------------------------------------------------------------


def when(value: datetime | None) -> str:
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def age(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def ago(value: datetime | None, now: datetime | None = None) -> str:
    if value is None:
        return ""
    now = now or datetime.now(UTC)
    return f"{age((now - value).total_seconds())} ago"


def status_badge(status: str) -> str:
    return f'<span class="badge s-{e(status.lower())}">{e(status)}</span>'


def job_state(job: JobView, now: datetime) -> str:
    """A job's status badge; a PENDING job says whether it is due or scheduled."""
    badge = status_badge(job.status.value)
    if job.status.value != "PENDING":
        return badge
    if job.due_time is not None and job.due_time > now:
        return (
            f'{badge} <span class="tag scheduled" title="due {e(when(job.due_time))}">'
            f"scheduled, due in {e(age((job.due_time - now).total_seconds()))}</span>"
        )
    return f'{badge} <span class="tag ready">due</span>'


def trace_id(traceparent: str) -> str:
    """The trace id of a W3C ``traceparent`` (version-traceid-spanid-flags); "" if none."""
    parts = traceparent.split("-")
    if len(parts) >= 4 and len(parts[1]) == 32:
        return parts[1]
    return ""


def payload_html(data: bytes, content_type: str) -> str:
    """JSON pretty-printed; anything else as hex with its size."""
    if not data:
        return '<span class="muted">(empty)</span>'
    kind = content_type or "no content type"
    if "json" in content_type or not content_type:
        try:
            value = json.loads(data)
        except (UnicodeDecodeError, ValueError):
            pass
        else:
            text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
            return (
                f'<div class="muted">{e(kind)}, {len(data)} bytes</div>'
                f'<pre class="json">{e(text)}</pre>'
            )
    shown = data[:4096]
    lines = [shown[i : i + 32].hex(" ") for i in range(0, len(shown), 32)]
    more = f" (first {len(shown)} shown)" if len(shown) < len(data) else ""
    return (
        f'<div class="muted">{e(kind)}, {len(data)} bytes{more}</div>'
        f'<pre class="hex">{e(chr(10).join(lines))}</pre>'
    )


def actor_text(actor: str) -> str:
    """Who a pause is recorded as; only a coordinator without authentication records none."""
    return actor or "unauthenticated"


def pause_kind(scope: PauseScope) -> str:
    return apb.PauseScopeKind.Name(scope.kind).removeprefix("PAUSE_SCOPE_KIND_").lower()


# -- building blocks -----------------------------------------------------------------


def hidden(**fields: Any) -> str:
    return "".join(f'<input type="hidden" name="{e(k)}" value="{e(v)}">' for k, v in fields.items())


def action_fields(csrf: str, op: str, **fields: Any) -> str:
    """The hidden fields every action form starts with: CSRF token, action, way back."""
    return hidden(csrf=csrf, op=op, back=PAGE.get(), **fields)


def action_form(
    csrf: str, op: str, label: str, *, danger: bool = False, extra: str = "", **fields: Any
) -> str:
    """A button posting one action; the server asks for confirmation first."""
    cls = "btn danger" if danger else "btn"
    return (
        f'<form method="post" action="/action" class="inline">'
        f"{action_fields(csrf, op, **fields)}{extra}"
        f'<button class="{cls}" type="submit" data-op="{e(op)}">{e(label)}</button></form>'
    )


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    empty: str = "none",
    raw_headers: bool = False,
) -> str:
    """A table; ``raw_headers``: the headers are HTML already (links that sort)."""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        body = f'<tr><td colspan="{len(headers)}" class="muted">{e(empty)}</td></tr>'
    head = "".join(f"<th>{h if raw_headers else e(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(
    title: str,
    body: str,
    *,
    path: str,
    session: Any,
    flash: Sequence[tuple[str, str]] = (),
    live: str = "",
    events: str = "",
    outage: Outage | None = None,
) -> str:
    """A whole page: navigation, who is logged in, flash messages, the body.

    ``live``: where the page's live part is fetched again; ``events``: the
    server-sent event stream that says when to (else it is polled);
    ``outage``: the coordinator is not answering (a banner says so).
    """
    links = []
    signed_in = session is not None and session.logged_in
    for href, name in NAV if signed_in else ():
        if session is not None and session.tenant_id and href in ALL_TENANT_PAGES:
            continue
        current = ' aria-current="page"' if href == path else ""
        links.append(f'<a href="{href}"{current}>{name}</a>')
    who = ""
    if signed_in:
        scope = f"tenant {e(session.tenant_id)}" if session.tenant_id else "all tenants"
        who = f'<span class="who">{e(session.name)} · {scope}</span>'
        if session.by_login:
            who += (
                f'<form method="post" action="/logout" class="inline">{hidden(csrf=session.csrf)}'
                '<button class="link" type="submit">log out</button></form>'
            )
    messages = "".join(f'<div class="flash {e(kind)}">{e(text)}</div>' for kind, text in flash)
    live_attr = f' data-live="{e(live)}"' if live else ""
    if live and events:
        live_attr += f' data-events="{e(events)}"'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(title)} · workflow-jobs</title>
<link rel="stylesheet" href="/static/dashboard.css">
<script src="/static/dashboard.js" defer></script>
</head><body>
<header><span class="brand">workflow-jobs</span><nav>{"".join(links)}</nav>{who}</header>
<main{live_attr}>
<h1>{e(title)}</h1>
{outage_banner(outage) if outage is not None and not live else ""}
{messages}
{body}
</main></body></html>"""


def outage_banner(outage: Outage) -> str:
    """Says the coordinator is not answering, since when, and that figures may be stale."""
    return (
        f'<div class="banner down" id="coordinator-down" role="alert">The coordinator at '
        f"<b>{e(outage.target or 'its address')}</b> has not answered since "
        f"{e(when(outage.since))} ({e(outage.error)}). What the dashboard shows was read "
        "before then and may be out of date.</div>"
    )


# -- charts (inline SVG) -------------------------------------------------------------


def bar_chart(
    title: str, buckets: Sequence[Bucket], series: Sequence[tuple[str, str]], unit: str
) -> str:
    """Stacked bars per five-minute bucket; ``series`` is (Bucket attribute, CSS class)."""
    width, height, pad = 360, 110, 18
    totals = [sum(getattr(b, name) for name, _ in series) for b in buckets]
    top = max(totals + [1])
    step = (width - pad) / max(1, len(buckets))
    bars = []
    for i, b in enumerate(buckets):
        y = height - pad
        for name, cls in series:
            value = getattr(b, name)
            h = (height - 2 * pad) * value / top
            y -= h
            if value:
                bars.append(
                    f'<rect class="{cls}" x="{pad + i * step + 1:.1f}" y="{y:.1f}" '
                    f'width="{step - 2:.1f}" height="{h:.1f}"><title>'
                    f"{e(b.start.strftime('%H:%M'))}: {value} {e(name)}</title></rect>"
                )
    total = sum(getattr(b, series[0][0]) for b in buckets)
    legend = " ".join(f'<span class="key {cls}">{e(name)}</span>' for name, cls in series)
    return _chart_frame(title, f"{total} {unit} in the last hour", legend, bars, buckets, top)


def line_chart(title: str, buckets: Sequence[Bucket]) -> str:
    """Latency p50 and p95 per bucket (seconds from due to finish)."""
    width, height, pad = 360, 110, 18
    values = [v for b in buckets for v in (b.latency_p50, b.latency_p95) if v is not None]
    top = max(values + [0.001])
    step = (width - pad) / max(1, len(buckets))
    lines = []
    for attr, cls in (("latency_p95", "p95"), ("latency_p50", "p50")):
        points = []
        for i, b in enumerate(buckets):
            v = getattr(b, attr)
            if v is not None:
                x = pad + i * step + step / 2
                y = height - pad - (height - 2 * pad) * v / top
                points.append(f"{x:.1f},{y:.1f}")
                lines.append(
                    f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="2.5"><title>'
                    f"{e(b.start.strftime('%H:%M'))} {cls}: {e(age(v))}</title></circle>"
                )
        if len(points) > 1:
            lines.append(f'<polyline class="{cls}" points="{" ".join(points)}"/>')
    samples = sum(b.latency_samples for b in buckets)
    legend = '<span class="key p50">p50</span> <span class="key p95">p95</span>'
    subtitle = f"due to finish, {samples} completed jobs sampled" if samples else "no completions"
    return _chart_frame(title, subtitle, legend, lines, buckets, top, unit_is_time=True)


def _chart_frame(
    title: str,
    subtitle: str,
    legend: str,
    marks: Sequence[str],
    buckets: Sequence[Bucket],
    top: float,
    *,
    unit_is_time: bool = False,
) -> str:
    width, height, pad = 360, 110, 18
    first = buckets[0].start.strftime("%H:%M") if buckets else ""
    top_label = age(top) if unit_is_time else f"{top:g}"
    return (
        f'<figure class="chart"><figcaption><b>{e(title)}</b> '
        f'<span class="muted">{e(subtitle)}</span> {legend}</figcaption>'
        f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{e(title)}">'
        f'<line class="axis" x1="{pad}" y1="{height - pad}" x2="{width}" y2="{height - pad}"/>'
        f'<text x="0" y="{pad - 4}" class="tick">{e(top_label)}</text>'
        f'<text x="{pad}" y="{height - 4}" class="tick">{e(first)}</text>'
        f'<text x="{width - 30}" y="{height - 4}" class="tick">now</text>'
        f"{''.join(marks)}</svg></figure>"
    )


# -- pages ---------------------------------------------------------------------------


def overview_live(
    view: Overview, session: Any, sort: str = "", outage: Outage | None = None
) -> str:
    """The overview's live part (re-fetched by the page while it is open);
    ``sort``: the backlog's column (``-`` before it: descending). A stale
    view (the coordinator is not answering) says so above every figure."""
    s = view.stats
    oldest = s.oldest_pending_age.total_seconds() if s.oldest_pending_age else None
    now_text = view.read_at.strftime("%Y-%m-%dT%H:%M:%S")
    due = urlencode({"status": "PENDING", "due_before": now_text, "order": "oldest"})
    later = urlencode({"status": "PENDING", "due_after": now_text, "order": "oldest"})
    cards = [
        ("pending", s.pending, "/jobs?status=PENDING"),
        ("of them due (ready to run)", s.pending - s.scheduled, f"/jobs?{due}"),
        ("of them scheduled (not due yet)", s.scheduled, f"/jobs?{later}"),
        ("of them held behind their ordering key", s.held, ""),
        ("running", s.running, "/jobs?status=RUNNING"),
        ("oldest due pending", age(oldest) if s.pending - s.scheduled else "–", f"/jobs?{due}"),
        ("faulted (dead letter)", s.dead_letter, "/jobs?status=FAULTED"),
        ("retries, last 5 min", s.retries_in_window, ""),
        ("failures, last 5 min", s.failures_in_window, "/jobs?status=FAULTED"),
        ("completed, last 5 min", s.completions_in_window, "/jobs?status=COMPLETED"),
        ("connected workers", s.connected_workers, "" if session.tenant_id else "/workers"),
    ]
    card_html = "".join(
        f'<a class="card" href="{e(href)}" data-card="{e(name)}">'
        f'<span class="value">{e(value)}</span><span class="label">{e(name)}</span></a>'
        if href
        else f'<div class="card" data-card="{e(name)}"><span class="value">{e(value)}</span>'
        f'<span class="label">{e(name)}</span></div>'
        for name, value, href in cards
    )
    state = []
    if view.stale:
        state.append(
            '<span class="badge s-faulted" id="draining">not answering: state unknown</span>'
        )
    elif s.draining:
        state.append('<span class="badge s-faulted" id="draining">draining</span>')
    else:
        state.append('<span class="badge s-completed" id="draining">handing out jobs</span>')
    for p in view.pauses:
        state.append(
            f'<a class="badge s-pending" href="{e(pause_jobs_href(p.scope))}" '
            f'title="the pending jobs it holds">paused: {e(pause_scope_text(p.scope))}'
            f"{' – ' + e(p.reason) if p.reason else ''}</a>"
        )
    charts = bar_chart(
        "Throughput",
        view.history,
        (("completed", "ok"), ("failed", "bad"), ("retried", "warn")),
        "completed",
    ) + line_chart("Latency", view.history)
    backlog = _backlog(s.counts, sort)
    stale = ""
    if view.stale:
        stale = (
            (outage_banner(outage) if outage is not None else "")
            + f'<p class="stale-note" id="stale">Stale: these figures were read at '
            f"{e(when(view.read_at))}.</p>"
        )
    return (
        f"{stale}"
        f'<div class="{"stale" if view.stale else "fresh"}">'
        f'<section class="state">{"".join(state)}</section>'
        f'<section class="cards">{card_html}</section>'
        f'<section class="charts">{charts}</section>'
        f"<h2>Backlog</h2>{backlog}"
        f'<p class="muted small">read {e(when(view.read_at))}</p></div>'
    )


# The backlog's columns: (sort key, header); PENDING splits into due and scheduled.
BACKLOG_COLUMNS = (
    ("tenant", "tenant"),
    ("job_type", "job type"),
    ("due", "pending: due"),
    ("scheduled", "pending: scheduled"),
    *((s.lower(), s.lower()) for s in STATUSES if s != "PENDING"),
)


def _backlog(counts: Sequence[StatusCount], sort: str = "") -> str:
    grid: dict[tuple[str, str], dict[str, int]] = {}
    for c in counts:
        status = c.status.value
        cell = grid.setdefault((c.tenant_id, c.job_type), {})
        if status == "PENDING":
            cell["due"] = c.count - c.scheduled
            cell["scheduled"] = c.scheduled
        else:
            cell[status.lower()] = c.count
    key, descending = sort.removeprefix("-"), sort.startswith("-")
    if key not in dict(BACKLOG_COLUMNS):
        key, descending = "tenant", False
    items = sorted(grid.items())
    if key not in ("tenant", "job_type"):
        items.sort(key=lambda item: item[1].get(key, 0))
    elif key == "job_type":
        items.sort(key=lambda item: item[0][1])
    if descending:
        items.reverse()
    now_text = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    rows = []
    for (tenant, job_type), by_column in items:
        cells = [
            f'<a href="/jobs?{e(urlencode({"tenant_id": tenant}))}">{e(tenant)}</a>',
            f'<a href="/jobs?{e(urlencode({"tenant_id": tenant, "job_type": job_type}))}">'
            f"{e(job_type)}</a>",
        ]
        for column, _ in BACKLOG_COLUMNS[2:]:
            n = by_column.get(column, 0)
            query = {"tenant_id": tenant, "job_type": job_type}
            if column == "due":
                query.update(status="PENDING", due_before=now_text)
            elif column == "scheduled":
                query.update(status="PENDING", due_after=now_text)
            else:
                query["status"] = column.upper()
            cells.append(f'<a class="num" href="/jobs?{e(urlencode(query))}">{n}</a>' if n else "")
        rows.append(cells)
    headers = []
    for column, label in BACKLOG_COLUMNS:
        # The first click sorts numbers biggest first, names from A.
        first = column if column in ("tenant", "job_type") else f"-{column}"
        wanted = (column if descending else f"-{column}") if column == key else first
        mark = (" ↓" if descending else " ↑") if column == key else ""
        headers.append(
            f'<a href="/?{e(urlencode({"sort": wanted}))}" data-sort="{e(column)}">'
            f"{e(label)}{mark}</a>"
        )
    return table(headers, rows, empty="no jobs", raw_headers=True)


def pause_jobs_href(scope: PauseScope) -> str:
    """The job list of the pending jobs a pause holds."""
    kind = pause_kind(scope)
    query = {"status": "PENDING"}
    if scope.tenant_id:
        query["tenant_id"] = scope.tenant_id
    field = {
        "definition": "definition_id",
        "instance": "instance_id",
        "job_type": "job_type",
        "category": "category",
    }.get(kind)
    if field is not None:
        query[field] = category_name(scope.value).upper() if kind == "category" else scope.value
    return f"/jobs?{urlencode(query)}"


def filter_form(values: dict[str, Any], session: Any) -> str:
    statuses = values.get("statuses", ())
    boxes = "".join(
        f'<label class="check"><input type="checkbox" name="status" value="{s}"'
        f"{' checked' if s in statuses else ''}> {s.lower()}</label>"
        for s in STATUSES
    )
    options = "".join(
        f'<option value="{c}"{" selected" if values.get("category") == c else ""}>'
        f"{c.lower()}</option>"
        for c in CATEGORIES
    )
    tenant = (
        f'<input name="tenant_id" value="{e(session.tenant_id)}" readonly title="your session '
        'is scoped to this tenant">'
        if session.tenant_id
        else f'<input name="tenant_id" value="{e(values.get("tenant_id", ""))}">'
    )

    def field(name: str, label: str, title: str = "") -> str:
        hint = f' title="{e(title)}"' if title else ""
        return (
            f'<label>{label}<input name="{name}" value="{e(values.get(name, ""))}"{hint}></label>'
        )

    search_in = "".join(
        f'<option value="{k}"{" selected" if values.get("q_in") == k else ""}>{label}</option>'
        for k, label in SEARCH_IN.items()
    )
    orders = "".join(
        f'<option value="{k}"{" selected" if values.get("order", "newest") == k else ""}>'
        f"{label}</option>"
        for k, label in (("newest", "newest first"), ("oldest", "oldest first"))
    )
    return (
        '<form method="get" action="/jobs" class="filters" id="filters">'
        f'<div class="row"><label>search<input name="q" value="{e(values.get("q", ""))}" '
        'placeholder="a job id, correlation id or payload text"></label>'
        f'<label>in<select name="q_in">{search_in}</select></label>'
        f'<label>order<select name="order">{orders}</select></label></div>'
        f'<div class="row">{boxes}</div><div class="row">'
        f"<label>tenant{tenant}</label>"
        f"{field('job_type', 'job type', 'comma-separate for any of several')}{field('definition_id', 'definition')}"
        f"{field('instance_id', 'instance')}{field('correlation_id', 'correlation')}"
        f"{field('parent_job_id', 'parent job')}{field('group_id', 'group')}"
        f'<label>category<select name="category"><option value="">any</option>{options}'
        "</select></label>"
        + "".join(
            f'<label>{name.replace("_", " ")} (UTC)<input type="datetime-local" '
            f'name="{name}" value="{e(values.get(name, ""))}"></label>'
            for name in TIME_FILTERS
        )
        + f'<label>per page<input type="number" name="page_size" min="1" max="1000" '
        f'value="{e(values.get("page_size", 50))}"></label>'
        '<button class="btn" type="submit">Filter</button> <a href="/jobs">clear</a></div></form>'
    )


@dataclasses.dataclass(frozen=True)
class JobListing:
    """One page of the jobs page's list, with the ways to the pages around it."""

    jobs: Sequence[JobView]
    total: int
    next_token: str = ""
    prev_token: str = ""
    # What a search found (or did not).
    note: str = ""


def jobs_page_body(
    listing: JobListing,
    values: dict[str, Any],
    query: dict[str, Any],
    session: Any,
) -> str:
    rows = []
    now = datetime.now(UTC)
    for j in listing.jobs:
        wf = j.workflow
        rows.append(
            [
                f'<a href="/jobs/{e(j.id)}" class="mono">{e(j.id)}</a>',
                job_state(j, now),
                e(j.tenant_id),
                e(j.job_type),
                e(wf.definition_id if wf else ""),
                e(wf.instance_id if wf else ""),
                f"{j.attempt}/{j.max_attempts or '∞'}",
                f'<span title="{e(when(j.create_time))}">{e(ago(j.create_time, now))}</span>',
                f'<span class="err">{e(j.last_error[:120])}</span>',
            ]
        )
    other = "oldest" if values.get("order", "newest") == "newest" else "newest"
    flip = {**query, "order": other}
    created = (
        f'<a href="/jobs?{e(urlencode(flip, doseq=True))}" id="sort-created" '
        f'title="{other} first">created {"↓" if other == "oldest" else "↑"}</a>'
    )
    headers = ["id", "status", "tenant", "type", "definition", "instance", "attempt"]
    listing_html = table(
        [*map(e, headers), created, "last error"], rows, empty="no job matches", raw_headers=True
    )

    def link(ident: str, label: str, **extra: str) -> str:
        target = urlencode({**query, **extra}, doseq=True)
        return f'<a class="btn plain" id="{ident}" href="/jobs?{e(target)}">{label}</a>'

    links = []
    if listing.prev_token:
        links.append(link("first-page", "« first"))
        links.append(link("prev-page", "‹ previous", page_token=listing.prev_token))
    if listing.next_token:
        links.append(link("next-page", "next ›", page_token=listing.next_token))
        links.append(link("last-page", "last »", page="last"))
    note = f'<p class="muted" id="search-note">{e(listing.note)}</p>' if listing.note else ""
    pager = (
        f'<p class="pager"><span class="total">{listing.total} job(s) match</span> '
        f"{' '.join(links)}</p>"
    )
    bulk_fields = hidden(**{k: v for k, v in _filter_fields(values).items()})
    bulk = (
        '<section class="bulk"><h2>Bulk actions on every job this filter matches</h2>'
        '<p class="muted">You see how many jobs match before anything changes.</p>'
        f'<form method="post" action="/action" class="inline">{action_fields(session.csrf, "bulk_retry")}'
        f'{bulk_fields}<label class="check"><input type="checkbox" name="keep_attempts" value="1"> '
        'keep attempt counts</label> <button class="btn" type="submit" data-op="bulk_retry">'
        "Retry matching…</button></form> "
        f'<form method="post" action="/action" class="inline">{action_fields(session.csrf, "bulk_cancel")}'
        f'{bulk_fields}<input name="reason" placeholder="reason"> <button class="btn danger" '
        'type="submit" data-op="bulk_cancel">Cancel matching…</button></form></section>'
    )
    return filter_form(values, session) + note + listing_html + pager + bulk


def _filter_fields(values: dict[str, Any]) -> dict[str, str]:
    out = {}
    for key in (
        "tenant_id",
        "job_type",
        "definition_id",
        "instance_id",
        "correlation_id",
        "parent_job_id",
        "group_id",
        "category",
        *TIME_FILTERS,
    ):
        if values.get(key):
            out[key] = values[key]
    if values.get("statuses"):
        out["statuses"] = ",".join(values["statuses"])
    return out


@dataclasses.dataclass(frozen=True)
class JobPage:
    """What a job's page shows: the job and, while it is pending, why it waits."""

    job: JobView
    # ExplainJob's reasons (None: not pending) and the failure a retry waits after.
    reasons: Sequence[apb.WaitReason] | None = None
    failure: JobAttemptView | None = None
    # The active pauses that hold it.
    pauses: Sequence[PauseRecord] = ()
    # The uniqueness key that names it (None: none does, or not read).
    unique_key: UniqueKey | None = None


def job_live(view: JobPage, session: Any) -> str:
    """The job page's live part: state, why it waits (and the failure a retry
    waits after), actions, attempts."""
    job, reasons, failure = view.job, view.reasons, view.failure
    now = datetime.now(UTC)
    parts = []
    if reasons is not None:
        if reasons:
            items = "".join(
                f'<li><span class="kind">'
                f"{e(apb.WaitReason.Kind.Name(r.kind).removeprefix('KIND_').lower())}</span> "
                f"{e(r.message)}</li>"
                for r in reasons
            )
            last = ""
            if failure is not None:
                trace = (
                    f'<details open><summary>traceback</summary><pre class="tb">'
                    f"{e(failure.traceback)}</pre></details>"
                    if failure.traceback
                    else ""
                )
                last = (
                    f'<div id="last-failure"><p>Attempt {failure.number} '
                    f"{e(failure.outcome.lower())}: {e(failure.error)}</p>{trace}</div>"
                )
            parts.append(
                f'<section class="explain waiting" id="explain"><h2>Why it is waiting</h2>'
                f"<ul>{items}</ul>{last}</section>"
            )
        else:
            parts.append(
                '<section class="explain ready" id="explain"><h2>Why it is waiting</h2>'
                "<p>Nothing holds it back: it runs as soon as a worker asks for its type.</p>"
                "</section>"
            )
    status = job.status.value
    actions = []
    if status in ("FAULTED", "CANCELLED"):
        actions.append(
            action_form(
                session.csrf,
                "retry",
                "Retry",
                job_id=job.id,
                extra='<label class="check"><input type="checkbox" name="keep_attempts" '
                'value="1"> keep attempts</label>',
            )
        )
    if status in ("PENDING", "RUNNING"):
        actions.append(
            action_form(
                session.csrf,
                "cancel",
                "Cancel",
                danger=True,
                job_id=job.id,
                extra='<input name="reason" placeholder="reason">',
            )
        )
    if status == "RUNNING":
        actions.append(action_form(session.csrf, "unlock", "Unlock", danger=True, job_id=job.id))
    actions.append(action_form(session.csrf, "replay", "Replay (new job)", job_id=job.id))
    for p in view.pauses:
        kind = pause_kind(p.scope)
        actions.append(
            action_form(
                session.csrf,
                "unpause",
                f"{'Enable' if kind == 'tenant' else 'Unpause'} {pause_scope_text(p.scope)}",
                kind=kind,
                value=p.scope.value,
                tenant_id=p.scope.tenant_id,
            )
        )
    wf = job.workflow
    definition_paused = any(
        pause_kind(p.scope) == "definition" and wf is not None and p.scope.value == wf.definition_id
        for p in view.pauses
    )
    if wf is not None and wf.definition_id and not definition_paused:
        actions.append(
            action_form(
                session.csrf,
                "pause",
                f"Pause definition {wf.definition_id}",
                kind="definition",
                value=wf.definition_id,
                tenant_id=job.tenant_id,
                extra='<input name="reason" placeholder="reason">',
            )
        )
    parts.append(f'<section class="actions" id="actions">{"".join(actions)}</section>')
    lease = last_worker = ""
    if status == "RUNNING" and job.lease_owner:
        lease = f"{e(job.lease_owner)} until {e(when(job.lease_expire_time))}"
    elif job.lease_owner:
        last_worker = e(job.lease_owner)
    fields = [
        ("status", job_state(job, now) + (" cancel requested" if job.cancel_requested else "")),
        (
            "attempt",
            f"{job.attempt} of {job.max_attempts or 'unlimited'}"
            + (f" ({job.released_attempts} released)" if job.released_attempts else ""),
        ),
        (
            "cancel reason",
            f'<span id="cancel-reason">{e(job.cancel_reason)}</span>' if job.cancel_reason else "",
        ),
        ("lease holder", lease),
        ("last worker", last_worker),
        ("finished", e(when(job.finish_time))),
        ("last error", f'<span class="err">{e(job.last_error)}</span>' if job.last_error else ""),
    ]
    parts.append(_fields(fields, "state"))
    if status == "COMPLETED" or job.result:
        parts.append(
            f'<h2>Result</h2><div id="result">{payload_html(job.result, job.result_content_type)}</div>'
        )
    rows = []
    for a in job.attempts:
        took = ""
        if a.start_time and a.end_time:
            took = age((a.end_time - a.start_time).total_seconds())
        elif a.start_time:
            took = f"running for {age((now - a.start_time).total_seconds())}"
        tb = (
            f'<details><summary>traceback</summary><pre class="tb">{e(a.traceback)}</pre></details>'
            if a.traceback
            else ""
        )
        rows.append(
            [
                str(a.number),
                e(a.worker_id),
                e(when(a.start_time)),
                e(took),
                e(a.outcome.lower()),
                f'<span class="err">{e(a.error)}</span>'
                + (f' <span class="muted">({e(a.error_kind)})</span>' if a.error_kind else "")
                + tb,
            ]
        )
    if status == "RUNNING" and all(a.number != job.attempt for a in job.attempts):
        # The attempt in progress is recorded when it ends; show it from the lease.
        rows.append([str(job.attempt), e(job.lease_owner), "", "", "running", ""])
    parts.append(
        '<h2>Attempts</h2><div id="attempts">'
        + table(
            ["#", "worker", "started", "took", "outcome", "error"], rows, empty="no attempts yet"
        )
        + "</div>"
    )
    return "".join(parts)


def schedule_tick_text(idempotency_key: str) -> str:
    """A tick job's schedule id and nominal time, read from the key a tick is
    stored under (``schedule:<id>@<nominal time>``, docs/scheduler-ticks.md); "" for
    other jobs."""
    if not idempotency_key.startswith("schedule:") or "@" not in idempotency_key:
        return ""
    schedule, _, nominal = idempotency_key.removeprefix("schedule:").rpartition("@")
    try:
        at = datetime.fromisoformat(nominal.replace("Z", "+00:00"))
    except ValueError:
        return ""
    if schedule.startswith("sha256:"):
        schedule = f"{schedule} (a long id, hashed)"
    return (
        f'<span id="schedule-tick">schedule <span class="mono">{e(schedule)}</span>, '
        f"nominal time {e(when(at))}</span>"
    )


def _fields(pairs: Sequence[tuple[str, str]], ident: str) -> str:
    rows = "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in pairs if v)
    return f'<table class="fields" id="{ident}">{rows}</table>'


def unique_key_text(key: UniqueKey | None) -> str:
    """The uniqueness key that names a job and its rule (docs/uniqueness.md); "" for none."""
    if key is None:
        return ""
    what = {
        "while": "one job of the key at a time",
        "period": "one job of the key per period",
        "debounce": "debounced",
    }.get(key.rule_name, key.rule_name)
    parts = [f'<span class="mono">{e(key.key)}</span> ({e(what)}']
    if key.window_ends is not None:
        parts.append(f", admits a new job from {e(when(key.window_ends))}")
    if key.debounced:
        parts.append(f", {e(key.debounced)} later enqueue(s) moved its due time")
    if key.max_due is not None:
        parts.append(f", due no later than {e(when(key.max_due))}")
    return f'<span id="unique-key">{"".join(parts)})</span>'


def job_static(job: JobView, unique_key: UniqueKey | None = None) -> str:
    """The parts of a job that do not change: identity, workflow refs, payload,
    and the uniqueness key that names it."""
    wf = job.workflow
    trace = trace_id(job.raw.traceparent)
    fields = [
        ("id", f'<span class="mono">{e(job.id)}</span>'),
        ("type", e(job.job_type)),
        ("tenant", e(job.tenant_id)),
        ("category", e(job.category.value.lower())),
        ("priority", e(job.priority)),
        ("created", e(when(job.create_time))),
        ("due", e(when(job.due_time))),
        ("trace id", f'<span class="mono">{e(trace)}</span>' if trace else ""),
        ("idempotency key", e(job.idempotency_key)),
        ("concurrency key", e(job.concurrency_key)),
        (
            "replay of",
            f'<a href="/jobs/{e(job.replay_of)}">{e(job.replay_of)}</a>' if job.replay_of else "",
        ),
        (
            "parent job",
            f'<a class="mono" href="/jobs/{e(job.parent_job_id)}">{e(job.parent_job_id)}</a>'
            if job.parent_job_id
            else "",
        ),
        (
            "child jobs",
            f'<a href="/jobs?{e(urlencode({"parent_job_id": job.id}))}" id="children">'
            "jobs it enqueued</a>",
        ),
        (
            "group",
            f'<a class="mono" id="group-link" href="/groups/{e(job.group_id)}">'
            f"{e(job.group_id)}</a>"
            if job.group_id
            else "",
        ),
        ("schedule tick", schedule_tick_text(job.idempotency_key)),
        ("uniqueness key", unique_key_text(unique_key)),
    ]
    wf_fields = []
    if wf is not None:
        wf_fields = [
            (
                "definition",
                (
                    f'<a href="/jobs?{e(urlencode({"definition_id": wf.definition_id}))}">'
                    f"{e(wf.definition_id)}</a>"
                    + (f" v{wf.definition_version}" if wf.definition_version else "")
                )
                if wf.definition_id
                else "",
            ),
            (
                "instance",
                (
                    f'<a href="/jobs?{e(urlencode({"instance_id": wf.instance_id}))}">'
                    f"{e(wf.instance_id)}</a>"
                )
                if wf.instance_id
                else "",
            ),
            ("activity", e(wf.activity_id)),
            ("activity node", e(wf.activity_node_id)),
            ("bookmark", e(wf.bookmark_id)),
            (
                "correlation",
                (
                    f'<a href="/jobs?{e(urlencode({"correlation_id": wf.correlation_id}))}">'
                    f"{e(wf.correlation_id)}</a>"
                )
                if wf.correlation_id
                else "",
            ),
        ]
    policy = MessageToDict(job.raw.retry_policy) if job.raw.HasField("retry_policy") else {}
    return (
        '<div class="cols">'
        f"<div><h2>Job</h2>{_fields(fields, 'identity')}</div>"
        f"<div><h2>Workflow</h2>{_fields(wf_fields, 'workflow') if any(v for _, v in wf_fields) else '<p class=muted>no workflow context</p>'}"
        f"{'<h2>Retry policy</h2><pre class=json>' + e(json.dumps(policy, indent=2)) + '</pre>' if policy else ''}</div>"
        "</div>"
        f'<h2>Payload</h2><div id="payload">{payload_html(job.payload, job.payload_content_type)}</div>'
    )


def pauses_body(
    active: Sequence[Any], history: Sequence[Any], session: Any, prefill: dict[str, str]
) -> str:
    now = datetime.now(UTC)
    rows = []
    for p in active:
        expire = p.expire_time
        rows.append(
            [
                f'<a href="{e(pause_jobs_href(p.scope))}" title="the pending jobs it holds">'
                f"{e(pause_scope_text(p.scope))}</a>",
                e(actor_text(p.actor)),
                e(p.reason),
                e(ago(p.create_time, now)),
                e(when(expire)) if expire else "never",
                action_form(
                    session.csrf,
                    "unpause",
                    "Unpause",
                    kind=pause_kind(p.scope),
                    value=p.scope.value,
                    tenant_id=p.scope.tenant_id,
                ),
            ]
        )
    active_html = table(
        ["scope", "by", "reason", "since", "lifts", ""], rows, empty="nothing is paused"
    )
    kinds = "".join(
        f'<option value="{k}"{" selected" if prefill.get("kind") == k else ""}>{label}</option>'
        for k, label in PAUSE_KINDS
    )
    tenant_value = session.tenant_id or prefill.get("tenant_id", "")
    readonly = " readonly" if session.tenant_id else ""
    form = (
        '<form method="post" action="/action" class="stack" id="pause-form">'
        f"{action_fields(session.csrf, 'pause')}"
        f'<label>what<select name="kind">{kinds}</select></label>'
        f'<label>definition id, instance id, job type or category name (empty for a tenant)<input name="value" value="{e(prefill.get("value", ""))}"></label>'
        f'<label>tenant (empty: every tenant; required to disable one)<input name="tenant_id" value="{e(tenant_value)}"{readonly}></label>'
        '<label>reason<input name="reason"></label>'
        '<label>lifts by itself after (minutes, empty: never)<input type="number" min="1" name="expire_minutes"></label>'
        '<button class="btn" type="submit" data-op="pause">Pause…</button></form>'
    )
    hist_rows = []
    for p in history:
        lifted = p.lift_time
        hist_rows.append(
            [
                e(pause_scope_text(p.scope)),
                e(actor_text(p.actor)),
                e(p.reason),
                e(when(p.create_time)),
                e(when(p.expire_time)),
                (f"{e(when(lifted))} by {e(p.lifted_by or 'expiry')}" if lifted else "active"),
            ]
        )
    return f"<h2>Active</h2>{active_html}<h2>Pause</h2>{form}<h2>History</h2>" + table(
        ["scope", "by", "reason", "paused", "expiry", "lifted"], hist_rows, empty="no pauses yet"
    )


def tenants_body(
    tenants: Sequence[str],
    disabled: dict[str, Any],
    weights: dict[str, int],
    default_weight: int,
    session: Any,
    category_weights: Sequence[CategoryWeight] = (),
) -> str:
    rows = []
    for t in tenants:
        pause = disabled.get(t)
        if pause is not None:
            state = f'<span class="badge s-faulted">disabled</span> {e(pause.reason)}'
            button = action_form(session.csrf, "unpause", "Enable", kind="tenant", tenant_id=t)
        else:
            state = '<span class="badge s-completed">enabled</span>'
            button = action_form(
                session.csrf,
                "pause",
                "Disable",
                danger=True,
                kind="tenant",
                tenant_id=t,
                extra='<input name="reason" placeholder="reason">',
            )
        weight = (
            f'<form method="post" action="/action" class="inline">'
            f"{action_fields(session.csrf, 'weight', tenant_id=t)}"
            '<input type="number" name="weight" min="1" required placeholder="weight" class="short">'
            '<button class="btn" type="submit" data-op="weight">Set weight…</button></form>'
        )
        current = (
            f'<span class="weight">{weights[t]}</span>'
            if t in weights
            else f'<span class="weight">{default_weight}</span> <span class="muted">(default)</span>'
        )
        rows.append(
            [
                f'<a href="/jobs?{e(urlencode({"tenant_id": t}))}">{e(t)}</a>',
                state,
                button,
                current,
                weight,
            ]
        )
    return (
        '<p class="muted">A disabled tenant keeps its jobs pending until it is enabled again '
        "(a tenant pause, listed on the Pauses page). Weights set the tenant's share of "
        f"workers (default {default_weight}).</p>"
        + table(["tenant", "state", "", "weight", "set weight"], rows, empty="no tenants with jobs")
        + category_weights_body(category_weights, session)
    )


def category_weights_body(weights: Sequence[CategoryWeight], session: Any) -> str:
    """The category weights set (``ListCategoryWeights``), each removable, and a
    form setting one (``SetCategoryWeight``)."""
    rows = []
    for w in weights:
        category = w.category.lower()
        rows.append(
            [
                f'<a href="/jobs?{e(urlencode({"tenant_id": w.tenant_id}))}">{e(w.tenant_id)}</a>',
                e(category),
                f'<span class="weight">{w.weight}</span>',
                action_form(
                    session.csrf,
                    "category_weight_remove",
                    "Remove",
                    danger=True,
                    tenant_id=w.tenant_id,
                    category=category,
                ),
            ]
        )
    tenant = (
        f'<input name="tenant_id" value="{e(session.tenant_id)}" readonly title="your session '
        'is scoped to this tenant">'
        if session.tenant_id
        else '<input name="tenant_id" required placeholder="tenant">'
    )
    options = "".join(
        f'<option value="{c.lower()}">{c.lower()}</option>' for c in ("UNSPECIFIED", *CATEGORIES)
    )
    form = (
        '<form method="post" action="/action" id="category-weight-form">'
        f"{action_fields(session.csrf, 'category_weight')}"
        f"<label>tenant{tenant}</label>"
        f'<label>category<select name="category">{options}</select></label>'
        '<label>weight<input type="number" name="weight" min="1" max="10000" required '
        'class="short"></label>'
        '<button class="btn" type="submit" data-op="category_weight">Set category weight…</button>'
        "</form>"
    )
    return (
        '<section class="category-weights"><h2>Category weights</h2>'
        '<p class="muted">Within a tenant, categories that all have eligible jobs share '
        "its starts by these weights (1 for a category not listed; "
        "<code>wfjobs tenants set-category-weight</code> sets them too).</p>"
        + table(["tenant", "category", "weight", ""], rows, empty="no category weights set")
        + form
        + "</section>"
    )


def limits_body(limits: Sequence[ConcurrencyLimit], session: Any) -> str:
    rows = []
    for lim in limits:
        kind = apb.LimitScopeKind.Name(lim.kind).removeprefix("LIMIT_SCOPE_KIND_").lower()
        shown = category_name(lim.value) if kind == "category" else lim.value
        rows.append(
            [
                e(kind.replace("_", " ")),
                e("* (each one separately)" if shown == "*" else shown),
                f"{lim.running} / {lim.max_running}",
                action_form(
                    session.csrf,
                    "limit",
                    "Remove",
                    danger=True,
                    kind=kind,
                    value=lim.value,
                    max_running=0,
                ),
            ]
        )
    kinds = "".join(f'<option value="{k}">{label}</option>' for k, label in LIMIT_KINDS)
    form = (
        '<form method="post" action="/action" class="stack" id="limit-form">'
        f"{action_fields(session.csrf, 'limit')}"
        f'<label>scope<select name="kind">{kinds}</select></label>'
        '<label>value (a category by name; "*": each value separately)<input name="value" required></label>'
        '<label>most running at once (0 removes)<input type="number" min="0" name="max_running" required></label>'
        '<button class="btn" type="submit" data-op="limit">Set limit…</button></form>'
    )
    return (
        table(["scope", "value", "running / max", ""], rows, empty="no limits")
        + "<h2>Set a limit</h2>"
        + form
    )


def rate_limits_body(limits: Sequence[RateLimit], session: Any) -> str:
    """The rate limits, with when each next admits a start, and a form to set one."""
    rows = []
    for lim in limits:
        kind = apb.LimitScopeKind.Name(lim.kind).removeprefix("LIMIT_SCOPE_KIND_").lower()
        shown = category_name(lim.value) if kind == "category" else lim.value
        period = lim.period.total_seconds()
        until = lim.throttled_until
        rows.append(
            [
                e(kind.replace("_", " ")),
                e("* (each one separately)" if shown == "*" else shown),
                f'<span class="rate">{lim.starts} per {period:g}s, burst {lim.burst}</span>',
                e(f"until {when(until)}" if until is not None else "admitting"),
                e(f"1/{2**lim.slow_level} after push-back" if lim.slow_level else ""),
                action_form(
                    session.csrf,
                    "rate_limit_remove",
                    "Remove",
                    danger=True,
                    kind=kind,
                    value=lim.value,
                ),
            ]
        )
    kinds = "".join(f'<option value="{k}">{label}</option>' for k, label in LIMIT_KINDS)
    form = (
        '<form method="post" action="/action" class="stack" id="rate-limit-form">'
        f"{action_fields(session.csrf, 'rate_limit')}"
        f'<label>scope<select name="kind">{kinds}</select></label>'
        '<label>value (a category by name; "*": each value separately)<input name="value" required></label>'
        '<label>starts per period<input type="number" min="1" name="starts" required></label>'
        '<label>period in seconds<input type="number" min="0.001" step="any" name="period" value="1" required></label>'
        '<label>burst (empty: the starts per period)<input type="number" min="0" name="burst"></label>'
        '<button class="btn" type="submit" data-op="rate_limit">Set rate limit…</button></form>'
    )
    return (
        "<h2>Rate limits</h2>"
        '<p class="muted">At most N job starts per period in a scope, on every coordinator; '
        "a throttled job stays pending, untouched, until the limit admits it.</p>"
        + table(
            ["scope", "value", "rate", "throttled", "slowdown", ""], rows, empty="no rate limits"
        )
        + "<h2>Set a rate limit</h2>"
        + form
    )


def workers_body(workers: Sequence[WorkerView], stats: JobStats, session: Any) -> str:
    now = datetime.now(UTC)
    rows = []
    for w in workers:
        drain = (
            action_form(session.csrf, "undrain_worker", "Undrain", worker_id=w.worker_id)
            if w.draining
            else action_form(
                session.csrf, "drain_worker", "Drain", danger=True, worker_id=w.worker_id
            )
        )
        in_flight = " ".join(
            f'<a class="mono" href="/jobs/{e(j)}">{e(j)}</a>' for j in w.in_flight_job_ids
        )
        rows.append(
            [
                f'<span class="mono">{e(w.worker_id)}</span>',
                f"{e(w.hostname)}:{w.pid}",
                e(w.coordinator_id),
                e(", ".join(w.job_types)),
                f"{len(w.in_flight_job_ids)} / {w.slots}",
                in_flight,
                e(ago(w.last_heartbeat_time, now)),
                '<span class="badge s-faulted">draining</span>' if w.draining else "",
                drain,
            ]
        )
    state = (
        '<span class="badge s-faulted">draining</span>'
        if stats.draining
        else '<span class="badge s-completed">handing out jobs</span>'
    )
    coordinator = (
        f'<section class="actions"><b>Coordinator</b> {state} '
        + action_form(session.csrf, "drain", "Drain this coordinator", danger=True)
        + action_form(session.csrf, "undrain", "Undrain this coordinator")
        + action_form(session.csrf, "drain", "Drain the cluster", danger=True, cluster=1)
        + action_form(session.csrf, "undrain", "Undrain the cluster", cluster=1)
        + "</section>"
    )
    return coordinator + table(
        [
            "worker",
            "host:pid",
            "coordinator",
            "job types",
            "in flight / slots",
            "jobs",
            "last seen",
            "state",
            "",
        ],
        rows,
        empty="no worker connected",
    )


def confirm_body(
    summary: str, fields: dict[str, Any], csrf: str, *, danger: bool, back: str
) -> str:
    cls = "btn danger" if danger else "btn"
    return (
        f'<section class="confirm"><p id="confirm-summary">{summary}</p>'
        f'<form method="post" action="/action" class="inline">{hidden(**fields, csrf=csrf, confirmed=1)}'
        f'<button class="{cls}" type="submit" id="confirm">Confirm</button></form> '
        f'<a class="btn plain" href="{e(back)}">Back</a></section>'
    )


def login_body(csrf: str, error: str = "", tenants: Sequence[str] = ()) -> str:
    """The login form; ``tenants``: the choice a token of several tenants must make."""
    err = f'<div class="flash error">{e(error)}</div>' if error else ""
    choose = ""
    if tenants:
        options = "".join(f'<option value="{e(t)}">{e(t)}</option>' for t in tenants)
        choose = (
            "<label>tenant to administer (this token covers several)"
            f'<select name="tenant_id">{options}</select></label>'
        )
    return (
        f'{err}<form method="post" action="/login" class="stack" id="login">{hidden(csrf=csrf)}'
        '<label>admin token<input type="password" name="token" required autocomplete="off"></label>'
        f"{choose}"
        '<p class="muted">Your name and tenant come from the token; actions are recorded '
        "under the token's name.</p>"
        '<button class="btn" type="submit">Log in</button></form>'
    )


# The longest expiry a pause form takes: ten years.
MAX_EXPIRY_MINUTES = 10 * 366 * 24 * 60


def duration_minutes(minutes: str) -> timedelta | None:
    """A pause's expiry field (minutes, empty: none); ValueError says what is wrong."""
    text = minutes.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"the expiry must be a number of minutes, not {text[:40]!r}") from None
    if not 0 < value <= MAX_EXPIRY_MINUTES:  # nan and inf fail here too
        raise ValueError(
            f"the expiry must be above 0 and at most {MAX_EXPIRY_MINUTES} minutes (ten years), "
            f"not {text[:40]!r}; leave it empty for a pause that lifts only when unpaused"
        )
    return timedelta(minutes=value)


def group_body(group: GroupView, members: Sequence[JobView], session: Any) -> str:
    """A job group: status, members by status (a progress bar of those ended), the
    completion job, the newest members, and Cancel group while it is not completed."""
    now = datetime.now(UTC)
    ended = group.completed + group.faulted + group.cancelled
    share = 100 * ended // group.total if group.total else 100
    counts = [
        ("pending", group.pending),
        ("running", group.running),
        ("completed", group.completed),
        ("faulted", group.faulted),
        ("cancelled", group.cancelled),
    ]
    progress = (
        f'<p id="group-progress">{ended} of {group.total} members ended '
        f"({share}%): "
        + " ".join(f'<span class="badge s-{k}">{n} {k}</span>' for k, n in counts)
        + f'</p><progress id="group-bar" value="{ended}" max="{max(group.total, 1)}">'
        f"{share}%</progress>"
    )
    completion = (
        f'<a class="mono" href="/jobs/{e(group.completion_job_id)}">'
        f"{e(group.completion_job_id)}</a>"
        if group.completion_job_id
        else "enqueued once the group is closed and every member has ended"
    )
    status = group.status.lower()
    fields = _fields(
        [
            ("id", f'<span class="mono">{e(group.id)}</span>'),
            ("tenant", e(group.tenant_id)),
            ("status", f'<span class="badge" id="group-status">{e(status)}</span>'),
            ("completion job", completion),
            ("created", e(when(group.create_time))),
            ("closed", e(when(group.close_time))),
            ("completed", e(when(group.complete_time))),
        ],
        "group-fields",
    )
    actions = ""
    if group.status != "COMPLETED" and group.pending + group.running:
        actions = (
            '<section class="actions">'
            + action_form(
                session.csrf,
                "cancel_group",
                "Cancel group",
                danger=True,
                group_id=group.id,
            )
            + '<span class="muted"> closes it and cancels its pending members; running '
            "members run on</span></section>"
        )
    rows = [
        [
            f'<a href="/jobs/{e(j.id)}" class="mono">{e(j.id)}</a>',
            job_state(j, now),
            e(j.job_type),
            f'<span title="{e(when(j.create_time))}">{e(ago(j.create_time, now))}</span>',
            f'<span class="err">{e(j.last_error[:120])}</span>',
        ]
        for j in members
    ]
    every = f"/jobs?{urlencode({'group_id': group.id})}"
    listed = (
        f'<h2>Members</h2><p class="muted">newest {len(members)} of {group.total}; '
        f'<a id="all-members" href="{e(every)}">every member</a></p>'
    )
    return (
        fields
        + progress
        + actions
        + listed
        + table(["id", "status", "type", "created", "last error"], rows, empty="no members yet")
    )
