"""Logging in and out.

The login asks for a token only: the coordinator says whose it is
(``WhoAmI``: name, roles, tenants). A token without the ``admin`` role is
refused; a token of one tenant is scoped to it, one of several is asked to
choose. A login makes the session (a new id: none planted before it counts).
Every login with a token is counted per client address before the
coordinator checks it, so concurrent guesses cannot all pass before one is
counted, and refused with 429 past the limit (:class:`.guard.LoginThrottle`).
"""

from __future__ import annotations

import logging
import secrets

import grpc
from aiohttp import web

from worker_sdk import AdminClient, WorkflowJobsError

from .session import COOKIE, LOGIN_COOKIE, same_csrf
from .site import SITE, Site, error_text, page_html

log = logging.getLogger("wfjobs_dashboard")


async def login_form(request: web.Request) -> web.Response:
    site = request.app[SITE]
    if request.get("session") is not None:
        raise web.HTTPSeeOther("/")
    csrf = request.cookies.get(LOGIN_COOKIE, "")
    fresh = not (csrf.isascii() and len(csrf) == 43)
    if fresh:
        csrf = secrets.token_urlsafe(32)
    response = login_page(site, csrf)
    if fresh:
        set_login_cookie(site, response, csrf)
    return response


def login_page(
    site: Site, csrf: str, error: str = "", choices: list[str] | None = None
) -> web.Response:
    return site.html(
        page_html(
            "login.html",
            "Log in",
            None,
            path="/login",
            login_csrf=csrf,
            error=error,
            tenants=choices or [],
        ),
        status=401 if error else 200,
    )


def set_login_cookie(site: Site, response: web.StreamResponse, csrf: str) -> None:
    response.set_cookie(
        LOGIN_COOKIE,
        csrf,
        httponly=True,
        samesite="Strict",
        secure=site.config.secure_cookie,
        path="/login",
    )


async def login(request: web.Request) -> web.StreamResponse:
    site = request.app[SITE]
    if not site.config.login or request.get("session") is not None:
        raise web.HTTPSeeOther("/")
    form: dict[str, str] = request["form"]
    csrf = request.cookies.get(LOGIN_COOKIE, "")
    if not csrf or not same_csrf(form.get("csrf", ""), csrf):
        return web.Response(
            status=403, text="refused: this form has no valid CSRF token; reload the login page"
        )
    address = request.remote or ""
    wait = site.throttle.wait_s(address)
    if wait > 0:
        response = login_page(
            site, csrf, f"too many failed logins from {address}; try again in {wait:.0f} s"
        )
        response.set_status(429)
        response.headers["Retry-After"] = str(max(1, round(wait)))
        return response
    token = form.get("token", "").strip()
    chosen = form.get("tenant_id", "").strip()
    error, tenant, name, choices = "", "", "", []
    if not token:
        error = "enter a token"
    else:
        # Counted before the check, which awaits the coordinator: a burst of
        # concurrent guesses all passed the throttle before any was counted.
        site.throttle.failed(address)
        try:
            # The coordinator says whose token this is and what it may touch.
            me = await site.backend.call(token, AdminClient.who_am_i)
        except WorkflowJobsError as exc:
            if exc.code == grpc.StatusCode.UNAUTHENTICATED:
                error = "the coordinator does not know this token"
            else:
                error = f"cannot check the token: {error_text(exc)}"
        else:
            tenants = [t for t in me.tenants if t != "*"]
            name = me.name
            if "admin" not in me.roles:
                error = (
                    f"the token {me.name!r} has no admin role (roles: "
                    f"{', '.join(me.roles) or 'none'}); log in with an admin token"
                )
            elif "*" in me.tenants:
                tenant = ""
            elif len(tenants) == 1:
                tenant = tenants[0]
            elif chosen in tenants:
                tenant = chosen
            else:
                choices = tenants
                error = (
                    f"the token {me.name!r} covers tenants {', '.join(tenants)}; "
                    "choose the one to administer and enter the token again"
                )
    if error:
        if token and token not in site.sessions.tokens_in_use():
            site.backend.forget(token)
        return login_page(site, csrf, error, choices)
    site.throttle.forgive(address)  # counted before the check, which it passed
    fresh = site.sessions.new(token=token, tenant_id=tenant, name=name, by_login=True)
    log.info("dashboard login as %s (%s)", fresh.name, tenant or "all tenants")
    response = web.HTTPSeeOther("/")
    site.set_session_cookie(response, fresh)
    response.del_cookie(LOGIN_COOKIE, path="/login")
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    site, session = Site.of(request)
    site.sessions.drop(session)
    if session.token not in site.sessions.tokens_in_use():
        site.backend.forget(session.token)
    response = web.HTTPSeeOther("/login" if site.config.login else "/")
    response.del_cookie(COOKIE, path="/")
    return response


ROUTES = [
    web.get("/login", login_form),
    web.post("/login", login),
    web.post("/logout", logout),
]
