"""``POST /action``: every operator action, described for its confirmation, then run.

:data:`ACTIONS` is the one table of them: an action's name (the form's ``op``)
to how it is described (what the confirmation page asks, and whether it is
dangerous) and how it is run (its message and where the browser goes next).
A form's field that does not parse raises ``ValueError``, shown as a flash
message on the page the form came from.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import grpc
from aiohttp import web

from worker_sdk import AdminClient, WorkflowJobsError, pause_scope, pause_scope_text
from workflowjobs.contract import INT32_MAX, LONGEST_SPAN_S

from . import filters, views
from .jobs import listing_of
from .session import Session, need_all_tenants, tenant_for
from .site import Site, error_text

log = logging.getLogger("wfjobs_dashboard")

# The longest rate-limit period the coordinator takes (docs/limits.md).
MAX_RATE_PERIOD_S = LONGEST_SPAN_S


@dataclasses.dataclass(frozen=True)
class Action:
    """How to describe an action (for the confirmation) and how to run it."""

    verb: str
    describe: Callable[[Site, Session, dict[str, str]], Awaitable[tuple[str, bool]]]
    run: Callable[[Site, Session, dict[str, str]], Awaitable[tuple[str, str]]]


async def action(request: web.Request) -> web.StreamResponse:
    site, session = Site.of(request)
    form: dict[str, str] = request["form"]
    op = form.get("op", "")
    spec = ACTIONS.get(op)
    if spec is None:
        raise web.HTTPBadRequest(text=f"unknown action {op!r}")
    back = safe_back(form.get("back", "/"))
    try:
        summary, danger = await spec.describe(site, session, form)
    except ValueError as exc:
        session.flash.append(("error", str(exc)))
        raise web.HTTPSeeOther(back) from None
    if form.get("confirmed") != "1":
        fields = {k: v for k, v in form.items() if k not in ("csrf", "confirmed")}
        fields["back"] = back
        return site.page(
            request,
            "confirm.html",
            "Confirm",
            summary=summary,
            fields=fields,
            danger=danger,
            back_to=back,
        )
    try:
        message, where = await spec.run(site, session, form)
    except WorkflowJobsError as exc:
        if exc.code == grpc.StatusCode.UNAUTHENTICATED:
            raise
        session.flash.append(("error", f"{spec.verb} failed: {error_text(exc)}"))
        raise web.HTTPSeeOther(back) from None
    except ValueError as exc:
        session.flash.append(("error", str(exc)))
        raise web.HTTPSeeOther(back) from None
    log.info("dashboard: %s by %s: %s", op, session.name, message)
    session.flash.append(("ok", message))
    raise web.HTTPSeeOther(where or back)


def safe_back(back: str) -> str:
    """``back`` if it is a path on this dashboard, else ``/``.

    A browser reads a backslash as a slash, so ``/\\evil.example`` would be
    ``//evil.example``, another site: backslashes and control characters refuse it.
    """
    if (
        not back.startswith("/")
        or back.startswith("//")
        or any(c == "\\" or ord(c) < 0x20 or ord(c) == 0x7F for c in back)
    ):
        return "/"
    parts = urlsplit(back)
    if parts.scheme or parts.netloc:
        return "/"
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def job_action(verb: str, method: Callable[..., Any], danger: bool) -> Action:
    def job_id(form: dict[str, str]) -> str:
        value = form.get("job_id", "").strip()
        if not value:
            raise ValueError(f"name the job to {verb} (job_id)")
        return value

    async def describe(site: Site, session: Session, form: dict[str, str]) -> tuple[str, bool]:
        job = await site.call(session, AdminClient.get_job, job_id(form))
        return (
            f"{verb.capitalize()} job {job.id} ({job.job_type}, tenant {job.tenant_id}, "
            f"now {job.status.value})?",
            danger,
        )

    async def run(site: Site, session: Session, form: dict[str, str]) -> tuple[str, str]:
        kwargs: dict[str, Any] = {}
        if method is AdminClient.retry_job:
            kwargs["keep_attempts"] = form.get("keep_attempts") == "1"
        if method is AdminClient.cancel_job:
            kwargs["reason"] = form.get("reason", "") or f"cancelled by {session.name}"
        job = await site.act(session, method, job_id(form), **kwargs)
        return f"{verb} job {job.id}: now {job.status.value}", f"/jobs/{job.id}"

    return Action(verb, describe, run)


def _group_id(form: dict[str, str]) -> str:
    value = form.get("group_id", "").strip()
    if not value:
        raise ValueError("name the group to cancel (group_id)")
    return value


async def describe_cancel_group(
    site: Site, session: Session, form: dict[str, str]
) -> tuple[str, bool]:
    group = await site.call(session, AdminClient.get_group, _group_id(form))
    return (
        f"Cancel group {group.id} (tenant {group.tenant_id}, {group.total} members)? It is "
        f"closed and its {group.pending} pending member(s) cancelled; {group.running} running "
        "run on, and the completion job follows once they end.",
        True,
    )


async def run_cancel_group(site: Site, session: Session, form: dict[str, str]) -> tuple[str, str]:
    reason = form.get("reason", "") or f"group cancelled by {session.name}"
    group, cancelled = await site.act(
        session, AdminClient.cancel_group, _group_id(form), reason=reason
    )
    return (
        f"cancelled group {group.id}: {len(cancelled)} pending member(s) cancelled, "
        f"now {group.status.lower()}",
        f"/groups/{group.id}",
    )


def bulk_action(
    verb: str, method: Callable[..., Any], one: Callable[..., Any], statuses: frozenset[str]
) -> Action:
    """A bulk action on exactly the jobs a jobs list holds (its form repeats the
    list's fields, :func:`.filters.form_fields`).

    A list of its filter alone is acted on by the filter (``method``, after a
    dry run that counts). A list a search narrows (a job id or payload text
    the filter cannot say) is acted on job by job (``one``): its
    confirmation carries the ids of the listed jobs in ``statuses`` that it
    counted, and those are the jobs changed. Either way the confirmation
    says how many jobs the list holds and how many of them the action
    applies to.
    """
    gerund = "retried" if method is AdminClient.bulk_retry_jobs else "cancelled"

    def summary(matched: int, listed: int, values: filters.FilterValues) -> str:
        others = f"; the other {listed - matched} cannot be {gerund}" if listed > matched else ""
        return (
            f"{verb.capitalize()} {matched} matching job(s) of the {listed} the list holds "
            f"({filters.describe(values)}{others})? This dry run changed nothing."
        )

    async def describe(site: Site, session: Session, form: dict[str, str]) -> tuple[str, bool]:
        values = filters.read_form(form, session)
        if values.search:
            if form.get("confirmed") == "1":
                ids = _job_ids(form)
                return summary(len(ids), len(ids), values), True
            listing = await listing_of(site, session, values)
            wanted = [j.id for j in listing.jobs if j.status.value in statuses]
            # The confirmation posts these back: the run changes these jobs only.
            form["job_ids"] = ",".join(wanted)
            return summary(len(wanted), listing.total, values), True
        job_filter = filters.job_filter(values)
        dry, listed = await asyncio.gather(
            site.call(session, method, job_filter, dry_run=True),
            site.call(session, AdminClient.list_jobs, job_filter, page_size=1, include_total=True),
        )
        return summary(dry.matched, listed.total_count, values), True

    async def run(site: Site, session: Session, form: dict[str, str]) -> tuple[str, str]:
        kwargs: dict[str, Any] = {}
        if method is AdminClient.bulk_retry_jobs:
            kwargs["keep_attempts"] = form.get("keep_attempts") == "1"
        else:
            kwargs["reason"] = form.get("reason", "") or f"cancelled by {session.name}"
        values = filters.read_form(form, session)
        if values.search:
            ids = _job_ids(form)
            done = await asyncio.gather(
                *(_changed(site, session, one, job_id, **kwargs) for job_id in ids)
            )
            return f"{verb}: {sum(done)} of {len(ids)} matching job(s) changed", ""
        result = await site.act(session, method, filters.job_filter(values), **kwargs)
        return f"{verb}: {result.changed} of {result.matched} matching job(s) changed", ""

    return Action(verb, describe, run)


# The statuses a purge deletes (the coordinator refuses any other).
PURGEABLE = frozenset({"COMPLETED", "FAULTED", "CANCELLED"})


def _purge_filter(session: Session, form: dict[str, str]) -> tuple[Any, str]:
    """The jobs list's filter and its words; a search or a live status is refused
    (a purge deletes by filter alone, and finished jobs only)."""
    values = filters.read_form(form, session)
    if values.search:
        raise ValueError(
            "a purge deletes what the filter matches: clear the search (job id or payload "
            "text) first, so the list shows what it deletes"
        )
    live = [s for s in values.statuses if s not in PURGEABLE]
    if live:
        raise ValueError(
            f"a purge deletes finished jobs only; the filter has {', '.join(live).lower()}"
        )
    return filters.job_filter(values), filters.describe(values)


async def describe_purge(site: Site, session: Session, form: dict[str, str]) -> tuple[str, bool]:
    job_filter, words = _purge_filter(session, form)
    dry, listed = await asyncio.gather(
        site.call(session, AdminClient.purge_jobs, job_filter, dry_run=True),
        site.call(session, AdminClient.list_jobs, job_filter, page_size=1, include_total=True),
    )
    kept = (
        f"; {dry.kept} finished job(s) are kept (FAULTED jobs holding their ordering key: set "
        "one aside first; members of groups not completed)"
        if dry.kept
        else ""
    )
    return (
        f"Purge {dry.matched} finished job(s) of the {listed.total_count} the list holds "
        f"({words}{kept})? They are deleted with their attempt history; live jobs are never "
        "touched. This dry run deleted nothing.",
        True,
    )


async def run_purge(site: Site, session: Session, form: dict[str, str]) -> tuple[str, str]:
    job_filter, _ = _purge_filter(session, form)
    result = await site.act(session, AdminClient.purge_jobs, job_filter)
    return f"purged {result.deleted} of {result.matched} matching finished job(s)", ""


def _job_ids(form: dict[str, str]) -> list[str]:
    return [j for j in (part.strip() for part in form.get("job_ids", "").split(",")) if j]


async def _changed(
    site: Site, session: Session, method: Callable[..., Any], job_id: str, **kwargs: Any
) -> bool:
    """Whether ``method`` changed the job; False for one that moved on since it
    was listed (now in a status the action does not apply to)."""
    try:
        await site.act(session, method, job_id, **kwargs)
    except WorkflowJobsError as exc:
        if exc.code not in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
            raise
        return False
    return True


async def describe_pause(site: Site, session: Session, form: dict[str, str]) -> tuple[str, bool]:
    kind, value, tenant = _scope(session, form)
    expiry = views.duration_minutes(form.get("expire_minutes", ""))
    what = _scope_text(kind, value, tenant)
    until = f", lifting by itself in {form['expire_minutes']} min" if expiry else ""
    verb = "Disable" if kind == "tenant" else "Pause"
    return f"{verb} {what}{until}? Its pending jobs wait until it is lifted.", True


async def run_pause(site: Site, session: Session, form: dict[str, str]) -> tuple[str, str]:
    kind, value, tenant = _scope(session, form)
    expiry = views.duration_minutes(form.get("expire_minutes", ""))
    record = await site.act(
        session,
        AdminClient.pause,
        kind,
        value,
        tenant_id=tenant,
        actor=session.name,
        reason=form.get("reason", ""),
        expire_time=datetime.now(UTC) + expiry if expiry else None,
    )
    return f"paused {pause_scope_text(record.scope)} (pause {record.id})", ""


async def describe_unpause(site: Site, session: Session, form: dict[str, str]) -> tuple[str, bool]:
    kind, value, tenant = _scope(session, form)
    verb = "Enable" if kind == "tenant" else "Unpause"
    return f"{verb} {_scope_text(kind, value, tenant)}?", False


async def run_unpause(site: Site, session: Session, form: dict[str, str]) -> tuple[str, str]:
    kind, value, tenant = _scope(session, form)
    lifted = await site.act(
        session, AdminClient.unpause, kind, value, tenant_id=tenant, actor=session.name
    )
    return f"lifted {len(lifted)} pause(s) of {_scope_text(kind, value, tenant)}", ""


def _scope(session: Session, form: dict[str, str]) -> tuple[str, str, str]:
    kind = form.get("kind", "")
    if kind not in dict(views.PAUSE_KINDS):
        raise ValueError(f"unknown pause scope {kind!r}")
    value = form.get("value", "").strip()
    tenant = tenant_for(session, form.get("tenant_id", "").strip())
    if kind == "tenant" and not tenant:
        raise ValueError("name the tenant to disable")
    if kind != "tenant" and not value:
        raise ValueError(f"name the {kind.replace('_', ' ')} to pause")
    return kind, ("" if kind == "tenant" else value), tenant


async def describe_weight(site: Site, session: Session, form: dict[str, str]) -> tuple[str, bool]:
    tenant, weight = _weight(session, form)
    return f"Set tenant {tenant}'s fair-share weight to {weight}?", False


async def run_weight(site: Site, session: Session, form: dict[str, str]) -> tuple[str, str]:
    tenant, weight = _weight(session, form)
    await site.act(session, AdminClient.set_tenant_weight, tenant, weight)
    return f"tenant {tenant} now has weight {weight}", ""


def _weight(session: Session, form: dict[str, str]) -> tuple[str, int]:
    tenant = tenant_for(session, form.get("tenant_id", "").strip())
    weight = whole(form.get("weight", ""), "the weight must be a whole number above 0")
    if not tenant:
        raise ValueError("name the tenant")
    return tenant, weight


async def describe_category_weight(
    site: Site, session: Session, form: dict[str, str]
) -> tuple[str, bool]:
    tenant, category, weight = _category_weight(session, form, with_weight=True)
    return f"Set the weight of category {category} in tenant {tenant} to {weight}?", False


async def run_category_weight(
    site: Site, session: Session, form: dict[str, str]
) -> tuple[str, str]:
    tenant, category, weight = _category_weight(session, form, with_weight=True)
    await site.act(session, AdminClient.set_category_weight, tenant, category, weight)
    return f"category {category} of tenant {tenant} now has weight {weight}", ""


async def describe_category_weight_remove(
    site: Site, session: Session, form: dict[str, str]
) -> tuple[str, bool]:
    tenant, category, _ = _category_weight(session, form, with_weight=False)
    return (
        f"Remove the weight of category {category} in tenant {tenant} (back to 1)?",
        True,
    )


async def run_category_weight_remove(
    site: Site, session: Session, form: dict[str, str]
) -> tuple[str, str]:
    tenant, category, _ = _category_weight(session, form, with_weight=False)
    await site.act(session, AdminClient.remove_category_weight, tenant, category)
    return f"category {category} of tenant {tenant} is back to weight 1", ""


def _category_weight(
    session: Session, form: dict[str, str], *, with_weight: bool
) -> tuple[str, str, int]:
    tenant = tenant_for(session, form.get("tenant_id", "").strip())
    if not tenant:
        raise ValueError("name the tenant")
    category = form.get("category", "").strip().lower()
    known = ("UNSPECIFIED", *filters.CATEGORIES)
    if category.upper() not in known:
        names = ", ".join(c.lower() for c in known)
        raise ValueError(f"unknown category {category!r}; choose one of {names}")
    if not with_weight:
        return tenant, category, 0
    weight = whole(form.get("weight", ""), "the weight must be a whole number from 1 to 10000")
    return tenant, category, weight


async def describe_limit(site: Site, session: Session, form: dict[str, str]) -> tuple[str, bool]:
    need_all_tenants(session)
    kind, value, most = _limit(form)
    what = f"{kind.replace('_', ' ')} {value}"
    if most == 0:
        return f"Remove the concurrency limit of {what}?", True
    return f"Let at most {most} job(s) of {what} run at once?", False


async def run_limit(site: Site, session: Session, form: dict[str, str]) -> tuple[str, str]:
    need_all_tenants(session)
    kind, value, most = _limit(form)
    await site.act(session, AdminClient.set_concurrency_limit, kind, value, most)
    return f"limit of {kind.replace('_', ' ')} {value}: {most or 'removed'}", ""


def _limit(form: dict[str, str]) -> tuple[str, str, int]:
    kind = form.get("kind", "")
    if kind not in dict(views.LIMIT_KINDS):
        raise ValueError(f"unknown limit scope {kind!r}")
    value = form.get("value", "").strip()
    if not value:
        raise ValueError("name what the limit applies to")
    most = whole(form.get("max_running", ""), "the limit must be a whole number (0 removes it)")
    return kind, value, most


async def describe_rate_limit(
    site: Site, session: Session, form: dict[str, str]
) -> tuple[str, bool]:
    need_all_tenants(session)
    kind, value, starts, period, burst = _rate_limit(form)
    what = f"{kind.replace('_', ' ')} {value}"
    return (
        f"Let at most {starts} job(s) of {what} start per {period:g}s "
        f"(bursts of {burst or starts})?",
        False,
    )


async def run_rate_limit(site: Site, session: Session, form: dict[str, str]) -> tuple[str, str]:
    need_all_tenants(session)
    kind, value, starts, period, burst = _rate_limit(form)
    await site.act(session, AdminClient.set_rate_limit, kind, value, starts, period, burst=burst)
    return f"rate limit of {kind.replace('_', ' ')} {value}: {starts} per {period:g}s", ""


def _rate_limit(form: dict[str, str]) -> tuple[str, str, int, float, int]:
    kind = form.get("kind", "")
    if kind not in dict(views.LIMIT_KINDS):
        raise ValueError(f"unknown limit scope {kind!r}")
    value = form.get("value", "").strip()
    if not value:
        raise ValueError("name what the rate limit applies to")
    numbers = "starts and burst must be whole numbers, the period a number of seconds"
    starts = whole(form.get("starts", ""), numbers)
    burst = whole(form.get("burst", "") or "0", numbers)
    period = number(form.get("period", "") or "1", numbers)
    if starts <= 0 or period <= 0 or burst < 0:
        raise ValueError("starts and the period must be above 0, the burst 0 or more")
    if period > MAX_RATE_PERIOD_S:
        raise ValueError(
            f"the period must be at most {MAX_RATE_PERIOD_S // 86400} days ({period:g}s given)"
        )
    return kind, value, starts, period, burst


async def describe_rate_limit_remove(
    site: Site, session: Session, form: dict[str, str]
) -> tuple[str, bool]:
    need_all_tenants(session)
    kind, value = form.get("kind", ""), form.get("value", "")
    return f"Remove the rate limit of {kind.replace('_', ' ')} {value}?", True


async def run_rate_limit_remove(
    site: Site, session: Session, form: dict[str, str]
) -> tuple[str, str]:
    need_all_tenants(session)
    kind, value = form.get("kind", ""), form.get("value", "")
    if kind not in dict(views.LIMIT_KINDS) or not value:
        raise ValueError("name the rate limit to remove")
    removed = await site.act(session, AdminClient.remove_rate_limit, kind, value)
    what = f"{kind.replace('_', ' ')} {value}"
    return (f"removed the rate limit of {what}" if removed else f"no rate limit of {what}"), ""


def drain_action(undo: bool, worker: bool) -> Action:
    verb = ("undrain" if undo else "drain") + (" worker" if worker else "")

    def target(form: dict[str, str]) -> tuple[str, bool, str]:
        worker_id = form.get("worker_id", "") if worker else ""
        if worker and not worker_id:
            raise ValueError("name the worker")
        cluster = form.get("cluster") == "1" and not worker
        what = (
            f"worker {worker_id}"
            if worker
            else ("every coordinator of the cluster" if cluster else "this coordinator")
        )
        return worker_id, cluster, what

    async def describe(site: Site, session: Session, form: dict[str, str]) -> tuple[str, bool]:
        need_all_tenants(session)
        _, _, what = target(form)
        if undo:
            return f"Let {what} hand out jobs again?", False
        return f"Drain {what}: no new jobs are handed out until it is undrained?", True

    async def run(site: Site, session: Session, form: dict[str, str]) -> tuple[str, str]:
        need_all_tenants(session)
        worker_id, cluster, what = target(form)
        method = AdminClient.undrain if undo else AdminClient.drain
        await site.act(session, method, cluster=cluster, worker_id=worker_id)
        return f"{'undrained' if undo else 'drained'} {what}", "/workers"

    return Action(verb, describe, run)


def whole(text: str, message: str) -> int:
    """A form's whole number within int32 (what the API carries); ValueError(message) else."""
    text = text.strip()
    if re.fullmatch(r"-?[0-9]{1,10}", text) is None or abs(int(text)) > INT32_MAX:
        raise ValueError(f"{message} (not {text[:40]!r})")
    return int(text)


def number(text: str, message: str) -> float:
    """A form's finite number; ValueError(message) for anything else (inf, nan, words)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{message} (not {text.strip()[:40]!r})")
    return value


def _scope_text(kind: str, value: str, tenant: str) -> str:
    scope = pause_scope(kind, value, tenant)
    return pause_scope_text(scope, in_tenant=" in tenant {}", every_tenant=" in every tenant")


ACTIONS: dict[str, Action] = {
    "retry": job_action("retry", AdminClient.retry_job, False),
    "cancel": job_action("cancel", AdminClient.cancel_job, True),
    "cancel_group": Action("cancel group", describe_cancel_group, run_cancel_group),
    "run_now": job_action("run now", AdminClient.run_job_now, False),
    "unlock": job_action("unlock", AdminClient.unlock_job, True),
    "replay": job_action("replay", AdminClient.replay_job, False),
    "bulk_retry": bulk_action(
        "bulk retry", AdminClient.bulk_retry_jobs, AdminClient.retry_job, views.RETRYABLE
    ),
    "bulk_cancel": bulk_action(
        "bulk cancel", AdminClient.bulk_cancel_jobs, AdminClient.cancel_job, views.CANCELLABLE
    ),
    "purge": Action("purge", describe_purge, run_purge),
    "pause": Action("pause", describe_pause, run_pause),
    "unpause": Action("unpause", describe_unpause, run_unpause),
    "weight": Action("set weight", describe_weight, run_weight),
    "category_weight": Action("set category weight", describe_category_weight, run_category_weight),
    "category_weight_remove": Action(
        "remove category weight", describe_category_weight_remove, run_category_weight_remove
    ),
    "limit": Action("set limit", describe_limit, run_limit),
    "rate_limit": Action("set rate limit", describe_rate_limit, run_rate_limit),
    "rate_limit_remove": Action(
        "remove rate limit", describe_rate_limit_remove, run_rate_limit_remove
    ),
    "drain": drain_action(False, False),
    "undrain": drain_action(True, False),
    "drain_worker": drain_action(False, True),
    "undrain_worker": drain_action(True, True),
}

ROUTES = [web.post("/action", action)]
