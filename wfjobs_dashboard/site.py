"""What every page handler shares: the coordinator, the sessions, the settings.

The application holds one :class:`Site` (``request.app[SITE]``); a handler
takes it and the request's session with :meth:`Site.of`, calls the
coordinator for that session (:meth:`Site.call` for a page's reads, with a
short deadline; :meth:`Site.act` for what changes something) and answers
with :meth:`Site.page` (its page's template, :mod:`.templating`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from aiohttp import web

from worker_sdk import WorkflowJobsError

from . import templating, views
from .backend import Backend, Outage
from .guard import HostCheck, LoginThrottle
from .session import COOKIE, Session, Sessions


@dataclasses.dataclass(frozen=True)
class AppConfig:
    """How the web application behaves.

    Attributes:
        login: Sessions must log in with a token (else they use ``token``).
        token: The dashboard's own token, used by every session without login.
        actor: The name of sessions without login (the dashboard token's name,
            or who pauses are recorded as when the coordinator authenticates nobody).
        secure_cookie: Mark the session cookie Secure (served behind HTTPS).
        allowed_hosts: Host names answered besides the loopback ones, with login only.
    """

    login: bool
    token: str = ""
    actor: str = "dashboard"
    secure_cookie: bool = False
    allowed_hosts: tuple[str, ...] = ()


def error_text(error: WorkflowJobsError) -> str:
    """A coordinator's refusal as a page shows it."""
    return f"{error.message} ({error.code.name})"


@dataclasses.dataclass
class Site:
    """The dashboard's shared state: the coordinator, sessions, host names, login throttle."""

    backend: Backend
    config: AppConfig
    sessions: Sessions
    hosts: HostCheck
    throttle: LoginThrottle
    # The open event streams (ended when the application shuts down).
    streams: set[asyncio.Task[Any]] = dataclasses.field(default_factory=set)

    @staticmethod
    def of(request: web.Request) -> tuple[Site, Session]:
        """The site and the session of a request the middleware let through."""
        return request.app[SITE], request["session"]

    async def call(
        self, session: Session, method: Callable[..., Any], *args: Any, **kw: Any
    ) -> Any:
        """A read for a page (a short deadline)."""
        return await self.backend.call(session.token, method, *args, **kw)

    async def act(self, session: Session, method: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """A call that changes something (the full deadline)."""
        return await self.backend.call(session.token, method, *args, action=True, **kw)

    def html(self, text: str, status: int = 200) -> web.Response:
        return web.Response(text=text, content_type="text/html", status=status)

    def page(
        self,
        request: web.Request,
        template: str,
        title: str,
        *,
        live: str = "",
        events: str = "",
        status: int = 200,
        **values: Any,
    ) -> web.Response:
        """A whole page for the request's session, with its flash messages (now shown).

        ``template``: the page's template, given ``values``; ``live``: where
        its live part is fetched again; ``events``: the event stream that
        says when (used only when the backend follows events).
        """
        session: Session | None = request.get("session")
        flash: list[tuple[str, str]] = []
        if session is not None:
            flash, session.flash = session.flash, []
        return self.html(
            page_html(
                template,
                title,
                session,
                path=request.path,
                flash=flash,
                live=live,
                events=events if self.backend.watches_events else "",
                outage=self.backend.outage,
                **values,
            ),
            status=status,
        )

    def outage_part(self, outage: Outage) -> web.Response:
        """What a live part answers while the coordinator is not answering: the
        banner every page shows then (503; the page's script shows it above its
        live part and greys what it shows)."""
        response = self.html(templating.render("outage.html", outage=outage), status=503)
        response.headers["X-Coordinator-Down"] = "1"
        return response

    def error_page(self, request: web.Request, text: str, status: int) -> web.Response:
        return self.page(request, "error.html", "Error", status=status, text=text)

    def set_session_cookie(self, response: web.StreamResponse, session: Session) -> None:
        response.set_cookie(
            COOKIE,
            session.id,
            httponly=True,
            samesite="Strict",
            secure=self.config.secure_cookie,
            path="/",
        )


SITE: web.AppKey[Site] = web.AppKey("site", Site)


def page_html(
    template: str,
    title: str,
    session: Session | None,
    *,
    path: str,
    flash: list[tuple[str, str]] | None = None,
    live: str = "",
    events: str = "",
    outage: Any = None,
    **values: Any,
) -> str:
    """A page's HTML: ``template`` (over ``layout.html``) with the navigation
    the session may use and who it is."""
    signed_in = session is not None and session.logged_in
    nav = [
        (href, name)
        for href, name in (views.NAV if signed_in else ())
        if not (session is not None and session.tenant_id and href in views.ALL_TENANT_PAGES)
    ]
    return templating.render(
        template,
        session,
        title=title,
        path=path,
        nav=nav,
        signed_in=signed_in,
        flash=flash or [],
        live=live,
        events=events,
        outage=outage,
        **values,
    )
