"""The jobs list's filter and search: every field spelled once.

One table (:data:`TEXT_FIELDS`, :data:`TIME_FIELDS`, plus status, tenant,
category, the search and its kind) serves every place that reads or writes a
filter: the jobs page reads it from its query (:func:`read`), the filter form
and the bulk forms write it back (``jobs.html``, :func:`form_fields`), a bulk
action reads the same fields from its form with the same :func:`read`,
:func:`job_filter` makes the ``JobFilter`` and :func:`describe` says it in
words for a confirmation. A field added here is on all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from worker_sdk import JobFilter
from workflowjobs.contract import LATEST_YEAR
from workflowjobs.times import time_text

from .session import Session, tenant_for

STATUSES = ("PENDING", "RUNNING", "COMPLETED", "FAULTED", "CANCELLED")
CATEGORIES = ("CONTINUATION", "ACTIVITY_WORK", "INTEGRATION", "MAINTENANCE", "CUSTOM")
# What the jobs page's search box searches.
SEARCH_IN = {"id": "job id", "correlation": "correlation id", "payload": "payload text"}
PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_MAX = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class FilterField:
    """One ``ListJobs`` filter field as the jobs page offers it.

    Attributes:
        name: The query parameter and form field (``JobFilter``'s attribute,
            except ``job_type``, which fills ``job_types``).
        label: How the form and a confirmation name it.
        hint: The form field's tooltip.
    """

    name: str
    label: str
    hint: str = ""


# Text fields, in the filter form's order.
TEXT_FIELDS = (
    FilterField("job_type", "job type", "comma-separate for any of several"),
    FilterField("definition_id", "definition"),
    FilterField("instance_id", "instance"),
    FilterField("correlation_id", "correlation"),
    FilterField("parent_job_id", "parent job"),
    FilterField("group_id", "group"),
)
# Time fields: datetime-local inputs, read as UTC.
TIME_FIELDS = (
    FilterField("created_after", "created after"),
    FilterField("created_before", "created before"),
    FilterField("due_after", "due after"),
    FilterField("due_before", "due before"),
    FilterField("failed_after", "failed after", "an attempt failed at or after it"),
)


@dataclasses.dataclass(frozen=True, slots=True)
class FilterValues:
    """What a jobs list shows: its filter, its search, its order and page size."""

    statuses: tuple[str, ...] = ()
    tenant_id: str = ""
    category: str = ""
    # TEXT_FIELDS and TIME_FIELDS by name ("" for unset); job_type is
    # comma-separated types.
    fields: dict[str, str] = dataclasses.field(default_factory=dict)
    q: str = ""
    q_in: str = "id"
    order: str = "newest"
    page_size: int = PAGE_SIZE_DEFAULT

    def get(self, name: str) -> str:
        return self.fields.get(name, "")

    @property
    def search(self) -> str:
        """The kind of search that narrows the list beyond the filter ("": none).

        A correlation id search is the correlation filter itself; a job id or
        payload text search picks jobs the filter alone does not.
        """
        return self.q_in if self.q and self.q_in in ("id", "payload") else ""


def read(get_all: Callable[[str], list[str]], session: Session) -> FilterValues:
    """The list a query (or a bulk form, which repeats the query's fields) asks for.

    ``get_all(name)``: the values given for ``name``. A scoped session's
    tenant is its own whatever is asked (403 for another).
    """

    def one(name: str) -> str:
        values = get_all(name)
        return values[-1].strip() if values else ""

    statuses = tuple(
        s
        for s in STATUSES
        if s in {part.strip().upper() for v in get_all("status") for part in v.split(",")}
    )
    fields = {f.name: one(f.name) for f in TEXT_FIELDS + TIME_FIELDS}
    # One field, comma-separated; repeated job_type parameters add to it.
    fields["job_type"] = ", ".join(t for v in get_all("job_type") for t in job_types(v))
    category = one("category").upper()
    try:
        page_size = min(PAGE_SIZE_MAX, max(1, int(one("page_size") or PAGE_SIZE_DEFAULT)))
    except ValueError:
        page_size = PAGE_SIZE_DEFAULT
    q, q_in = one("q"), one("q_in")
    q_in = q_in if q_in in SEARCH_IN else "id"
    if q and q_in == "correlation":
        fields["correlation_id"] = q
    return FilterValues(
        statuses=statuses,
        tenant_id=tenant_for(session, one("tenant_id")),
        category=category if category in CATEGORIES else "",
        fields=fields,
        q=q,
        q_in=q_in,
        order="oldest" if one("order") == "oldest" else "newest",
        page_size=page_size,
    )


def read_query(request: web.Request, session: Session) -> FilterValues:
    return read(lambda name: request.query.getall(name, []), session)


def read_form(form: dict[str, str], session: Session) -> FilterValues:
    return read(lambda name: [form[name]] if name in form else [], session)


def form_fields(values: FilterValues) -> dict[str, str]:
    """The fields a form repeats so that :func:`read_form` reads the same list
    (status comma-separated; empty fields left out)."""
    out = {"status": ",".join(values.statuses), "tenant_id": values.tenant_id}
    out.update(values.fields)
    out.update(category=values.category, q=values.q, q_in=values.q_in, order=values.order)
    out["page_size"] = str(values.page_size)
    return {k: v for k, v in out.items() if v}


def query(values: FilterValues) -> dict[str, Any]:
    """The list's query parameters (for links to its other pages and orders)."""
    out: dict[str, Any] = form_fields(values)
    out["status"] = list(values.statuses)
    return out


def job_types(text: str) -> list[str]:
    """The job types of the filter's field: comma-separated, a job of any of them matches."""
    return [t for t in (part.strip() for part in text.split(",")) if t]


def _utc(text: str, what: str) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (ValueError, OverflowError):
        raise web.HTTPBadRequest(
            text=f"{what} must be a date and time from year 1 to {LATEST_YEAR} in UTC, "
            f"not {text[:60]!r}"
        ) from None


def job_filter(values: FilterValues) -> JobFilter:
    """The ``JobFilter`` of the list (the search aside: see :attr:`FilterValues.search`)."""
    times = {f.name: _utc(values.get(f.name), f.label) for f in TIME_FIELDS}
    return JobFilter(  # the time fields are JobFilter's own names
        created_after=times["created_after"],
        created_before=times["created_before"],
        due_after=times["due_after"],
        due_before=times["due_before"],
        failed_after=times["failed_after"],
        statuses=values.statuses,
        tenant_id=values.tenant_id,
        job_types=job_types(values.get("job_type")),
        definition_id=values.get("definition_id"),
        instance_id=values.get("instance_id"),
        correlation_id=values.get("correlation_id"),
        parent_job_id=values.get("parent_job_id"),
        group_id=values.get("group_id"),
        category=values.category or None,
    )


def describe(values: FilterValues) -> str:
    """The list in words: its filter and search ("every job" for none)."""
    parts = []
    if values.statuses:
        parts.append("status " + "/".join(s.lower() for s in values.statuses))
    if values.tenant_id:
        parts.append(f"tenant {values.tenant_id}")
    for f in TEXT_FIELDS:
        if values.get(f.name):
            parts.append(f"{f.label} {values.get(f.name)}")
    for f in TIME_FIELDS:
        at = _utc(values.get(f.name), f.label)
        if at is not None:
            # As every time is written (workflowjobs.times), to the millisecond:
            # a list's bound may fall within a second.
            parts.append(f"{f.label} {time_text(at, milliseconds=True)}")
    if values.category:
        parts.append(f"category {values.category.lower()}")
    if values.search:
        parts.append(f"{SEARCH_IN[values.q_in]} search {values.q!r}")
    return ", ".join(parts) or "every job"
