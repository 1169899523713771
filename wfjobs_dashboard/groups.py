"""The groups pages: every group newest first with its progress (``/groups``),
and a group's page (``/groups/{id}``): its progress, its completion job and
its members, newest first, with Cancel group (docs/groups.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from aiohttp import web

from worker_sdk import AdminClient, JobFilter

from .site import Site

# Members shown on the page; the link under them lists every member.
MEMBERS_SHOWN = 50
# Groups per page of the list.
GROUPS_SHOWN = 50
GROUP_STATUSES = ("open", "closed", "completed")


async def group_list(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    status = request.query.get("status", "")
    if status and status not in GROUP_STATUSES:
        raise web.HTTPBadRequest(text=f"unknown group status {status!r}")
    page = await site.call(
        session,
        AdminClient.list_groups,
        tenant_id=session.tenant_id or "",
        statuses=[status] if status else [],
        page_size=GROUPS_SHOWN,
        page_token=request.query.get("page_token", ""),
    )
    return site.page(
        request,
        "groups.html",
        "Groups",
        groups=page.groups,
        next_page_token=page.next_page_token,
        shown=status,
        statuses=GROUP_STATUSES,
        now=datetime.now(UTC),
    )


async def group_detail(request: web.Request) -> web.Response:
    site, session = Site.of(request)
    group_id = request.match_info["group_id"]
    group = await site.call(session, AdminClient.get_group, group_id)
    members = await site.call(
        session,
        AdminClient.list_jobs,
        JobFilter(group_id=group_id),
        page_size=MEMBERS_SHOWN,
        newest_first=True,
    )
    return site.page(
        request,
        "group.html",
        f"Group {group_id}",
        group=group,
        members=members.jobs,
        now=datetime.now(UTC),
    )


ROUTES = [web.get("/groups", group_list), web.get("/groups/{group_id}", group_detail)]
