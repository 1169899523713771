"""What the pages show, as values: times, ages, payloads, charts, the backlog.

Nothing here writes markup; the templates (``templates/``, :mod:`.templating`)
do, and these functions are their filters and the data they are given.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from worker_sdk import (
    LIMIT_SCOPE_KINDS,
    PAUSE_SCOPE_KINDS,
    JobAttemptView,
    JobStatus,
    JobView,
    PauseRecord,
    PauseScope,
    StatusCount,
    UniqueKey,
    category_name,
)
from workflowjobs.contract import LIVE_STATUSES
from workflowjobs.times import time_text
from workflowjobs.v1 import admin_service_pb2 as apb

from .backend import Bucket
from .filters import STATUSES

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
    ("/groups", "Groups"),
    ("/pauses", "Pauses"),
    ("/tenants", "Tenants"),
    ("/limits", "Limits"),
    ("/workers", "Workers"),
)
# The statuses an operator's retry and cancel apply to (as the coordinator's:
# a cancel applies to the live ones).
RETRYABLE = frozenset({"FAULTED", "CANCELLED"})
CANCELLABLE = frozenset(JobStatus.from_proto(s).value for s in LIVE_STATUSES)
# Where a scoped session may not go: these act on every tenant.
ALL_TENANT_PAGES = frozenset({"/limits", "/workers"})


# -- values --------------------------------------------------------------------------


def when(value: datetime | None) -> str:
    """A time as every page shows one: UTC, to the second, as the CLI and the logs write it."""
    if value is None:
        return ""
    return time_text(value)


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


def counted_at(read_time: datetime) -> str:
    """The due_before / due_after of the lists of the jobs counted at
    ``read_time`` as due / scheduled (due after it): one microsecond past it,
    as a UTC datetime-local value to the microsecond (a job due in the same
    second, or millisecond, as the count is on the list its number links to)."""
    return utc_text(read_time + timedelta(microseconds=1))


def utc_text(value: datetime) -> str:
    """A time filter's value in a link: UTC datetime-local text to the microsecond."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


def form_time(text: str) -> str:
    """A time filter's value as a datetime-local input holds it: at most
    milliseconds (a link may carry microseconds, which the input cannot)."""
    whole, dot, fraction = text.partition(".")
    return f"{whole}.{fraction[:3]}" if dot and fraction[:3].strip("0") else whole


def ago(value: datetime | None, now: datetime | None = None) -> str:
    if value is None:
        return ""
    now = now or datetime.now(UTC)
    return f"{age((now - value).total_seconds())} ago"


def trace_id(traceparent: str) -> str:
    """The trace id of a W3C ``traceparent`` (version-traceid-spanid-flags); "" if none."""
    parts = traceparent.split("-")
    if len(parts) >= 4 and len(parts[1]) == 32:
        return parts[1]
    return ""


@dataclasses.dataclass(frozen=True, slots=True)
class Payload:
    """A payload or result as a page shows it: JSON pretty-printed, else hex."""

    size: int
    kind: str
    text: str = ""
    hex: bool = False
    # Bytes shown of a long binary payload (0: all of it).
    shown: int = 0


# Hex shows at most this many bytes of a payload.
HEX_SHOWN = 4096


def json_text(data: bytes, content_type: str) -> str | None:
    """A JSON payload pretty-printed as the job page shows it; None if not JSON."""
    if not data or not ("json" in content_type or not content_type):
        return None
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        return None
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def payload(data: bytes, content_type: str) -> Payload:
    kind = content_type or "no content type"
    text = json_text(data, content_type)
    if text is not None:
        return Payload(len(data), kind, text)
    shown = data[:HEX_SHOWN]
    lines = [shown[i : i + 32].hex(" ") for i in range(0, len(shown), 32)]
    return Payload(
        len(data),
        kind,
        "\n".join(lines),
        hex=True,
        shown=len(shown) if len(shown) < len(data) else 0,
    )


def payload_holds(data: bytes, content_type: str, needle: str) -> bool:
    """Whether a payload holds ``needle``: as its bytes are (UTF-8), or as the
    job page shows it (JSON pretty-printed, so ``"order": 191`` is found in
    ``{"order":191}``)."""
    if needle.encode() in data:
        return True
    text = json_text(data, content_type)
    return text is not None and needle in text


def actor_text(actor: str) -> str:
    """Who a pause is recorded as; only a coordinator without authentication records none."""
    return actor or "unauthenticated"


def pause_kind(scope: PauseScope) -> str:
    return apb.PauseScopeKind.Name(scope.kind).removeprefix("PAUSE_SCOPE_KIND_").lower()


def limit_kind(kind: int) -> str:
    return apb.LimitScopeKind.Name(kind).removeprefix("LIMIT_SCOPE_KIND_").lower()


def limit_value(kind: str, value: str) -> str:
    """A limit's value as shown: a category by name, ``*`` said in words."""
    shown = category_name(value) if kind == "category" else value
    return "* (each one separately)" if shown == "*" else shown


def wait_kind(kind: int) -> str:
    return apb.WaitReason.Kind.Name(kind).removeprefix("KIND_").lower()


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


def jobs_href(**query: Any) -> str:
    """The job list of a filter."""
    return f"/jobs?{urlencode(query, doseq=True)}"


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleTick:
    """A scheduler tick's schedule id and nominal time (docs/scheduler-ticks.md)."""

    schedule: str
    nominal: datetime


def schedule_tick(idempotency_key: str) -> ScheduleTick | None:
    """Read from the key a tick is stored under (``schedule:<id>@<nominal time>``);
    None for other jobs."""
    if not idempotency_key.startswith("schedule:") or "@" not in idempotency_key:
        return None
    schedule, _, nominal = idempotency_key.removeprefix("schedule:").rpartition("@")
    try:
        at = datetime.fromisoformat(nominal.replace("Z", "+00:00"))
    except ValueError:
        return None
    if schedule.startswith("sha256:"):
        schedule = f"{schedule} (a long id, hashed)"
    return ScheduleTick(schedule, at)


UNIQUE_RULES = {
    "while": "one job of the key at a time",
    "period": "one job of the key per period",
    "debounce": "debounced",
}


# -- pages' data ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class JobListing:
    """One page of the jobs page's list, with the ways to the pages around it."""

    jobs: Sequence[JobView]
    total: int
    next_token: str = ""
    prev_token: str = ""
    # What a search found (or did not).
    note: str = ""


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


# The backlog's columns: (sort key, header); PENDING splits into due and scheduled.
BACKLOG_COLUMNS = (
    ("tenant", "tenant"),
    ("job_type", "job type"),
    ("due", "pending: due"),
    ("scheduled", "pending: scheduled"),
    *((s.lower(), s.lower()) for s in STATUSES if s != "PENDING"),
)


@dataclasses.dataclass(frozen=True, slots=True)
class BacklogHeader:
    column: str
    label: str
    href: str
    # " ↓" or " ↑" on the column sorted by, else "".
    mark: str


@dataclasses.dataclass(frozen=True, slots=True)
class BacklogRow:
    tenant: str
    job_type: str
    # (count, the list of the jobs it counts) per column after the first two.
    cells: list[tuple[int, str]]


def backlog(
    counts: Sequence[StatusCount], sort: str, now_text: str
) -> tuple[list[BacklogHeader], list[BacklogRow]]:
    """The backlog's headers (links that sort) and rows, sorted by ``sort``
    (``-`` before a column: descending); due / scheduled link with ``now_text``."""
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
    rows = []
    for (tenant, job_type), by_column in items:
        cells = []
        for column, _ in BACKLOG_COLUMNS[2:]:
            query = {"tenant_id": tenant, "job_type": job_type}
            if column == "due":
                query.update(status="PENDING", due_before=now_text)
            elif column == "scheduled":
                query.update(status="PENDING", due_after=now_text)
            else:
                query["status"] = column.upper()
            cells.append((by_column.get(column, 0), jobs_href(**query)))
        rows.append(BacklogRow(tenant, job_type, cells))
    headers = []
    for column, label in BACKLOG_COLUMNS:
        # The first click sorts numbers biggest first, names from A.
        first = column if column in ("tenant", "job_type") else f"-{column}"
        wanted = (column if descending else f"-{column}") if column == key else first
        mark = (" ↓" if descending else " ↑") if column == key else ""
        headers.append(BacklogHeader(column, label, f"/?{urlencode({'sort': wanted})}", mark))
    return headers, rows


# -- charts (inline SVG) -------------------------------------------------------------

CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 360, 110, 18


@dataclasses.dataclass(frozen=True, slots=True)
class Mark:
    """One bar (``rect``, with a width), line (``polyline``, with points) or
    point (``circle``) of a chart, with its tooltip."""

    css: str
    x: float = 0.0
    y: float = 0.0
    title: str = ""
    width: float = 0.0
    height: float = 0.0
    # "x,y x,y ..." of a line.
    points: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Chart:
    title: str
    subtitle: str
    # (label, CSS class) of each series, for the legend.
    legend: list[tuple[str, str]]
    marks: list[Mark]
    top_label: str
    first: str
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT
    pad: int = CHART_PAD


def bar_chart(
    title: str, buckets: Sequence[Bucket], series: Sequence[tuple[str, str]], unit: str
) -> Chart:
    """Stacked bars per five-minute bucket; ``series`` is (Bucket attribute, CSS class)."""
    width, height, pad = CHART_WIDTH, CHART_HEIGHT, CHART_PAD
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
                    Mark(
                        cls,
                        pad + i * step + 1,
                        y,
                        f"{b.start.strftime('%H:%M')}: {value} {name}",
                        width=step - 2,
                        height=h,
                    )
                )
    total = sum(getattr(b, series[0][0]) for b in buckets)
    return Chart(
        title,
        f"{total} {unit} in the last hour",
        list(series),
        bars,
        f"{top:g}",
        _first(buckets),
    )


def line_chart(title: str, buckets: Sequence[Bucket]) -> Chart:
    """Latency p50 and p95 per bucket (seconds from due to finish)."""
    width, height, pad = CHART_WIDTH, CHART_HEIGHT, CHART_PAD
    values = [v for b in buckets for v in (b.latency_p50, b.latency_p95) if v is not None]
    top = max(values + [0.001])
    step = (width - pad) / max(1, len(buckets))
    marks: list[Mark] = []
    for attr, cls in (("latency_p95", "p95"), ("latency_p50", "p50")):
        points = []
        for i, b in enumerate(buckets):
            v = getattr(b, attr)
            if v is not None:
                x = pad + i * step + step / 2
                y = height - pad - (height - 2 * pad) * v / top
                points.append(f"{x:.1f},{y:.1f}")
                marks.append(Mark(cls, x, y, f"{b.start.strftime('%H:%M')} {cls}: {age(v)}"))
        if len(points) > 1:
            marks.append(Mark(cls, points=" ".join(points)))
    samples = sum(b.latency_samples for b in buckets)
    subtitle = f"due to finish, {samples} completed jobs sampled" if samples else "no completions"
    return Chart(
        title,
        subtitle,
        [("p50", "p50"), ("p95", "p95")],
        marks,
        age(top),
        _first(buckets),
    )


def _first(buckets: Sequence[Bucket]) -> str:
    return buckets[0].start.strftime("%H:%M") if buckets else ""


# -- forms ---------------------------------------------------------------------------

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
