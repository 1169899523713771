"""A job group's page (``/groups/{id}``): its progress, its completion job and
its members, newest first, with Cancel group (docs/groups.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from aiohttp import web

from worker_sdk import AdminClient, JobFilter

from .site import Site

# Members shown on the page; the link under them lists every member.
MEMBERS_SHOWN = 50


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


ROUTES = [web.get("/groups/{group_id}", group_detail)]
