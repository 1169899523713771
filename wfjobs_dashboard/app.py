"""The dashboard's web application (aiohttp): the middleware every request passes, the routes.

The middleware decides, in this order: the host name (:mod:`.guard`: 421 for
a name the dashboard does not answer), the form (400 for a body no form
sends) and its ``Origin`` (403 cross-site), the session (made here without
login; else a redirect to the login), the CSRF token; then it runs the page's
handler and turns a coordinator's refusal into an error page with the right
status (a live part whose coordinator is not answering gets the banner every
page shows then, 503 with ``X-Coordinator-Down``, which the page's script
puts above what it shows). Every response then gets the security headers.

The pages are one module each (:mod:`.overview`, :mod:`.jobs`,
:mod:`.pauses`, :mod:`.tenants`, :mod:`.limits`, :mod:`.workers`), the
actions one table (:mod:`.actions`), the login :mod:`.login`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources

import grpc
from aiohttp import web

from worker_sdk import WorkflowJobsError

from . import actions, groups, jobs, limits, login, overview, pauses, templating, tenants, workers
from .backend import OUTAGE_CODES, Backend
from .events import end_streams
from .guard import HostCheck, LoginThrottle
from .session import COOKIE, FormError, Sessions, read_form, same_csrf
from .site import SITE, AppConfig, Site, error_text

__all__ = ["AppConfig", "build_app"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _static(name: str) -> bytes:
    return resources.files("wfjobs_dashboard").joinpath("static", name).read_bytes()


STATIC = {
    "dashboard.css": ("text/css", "dashboard.css"),
    "dashboard.js": ("text/javascript", "dashboard.js"),
}


def refused(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text)


def page_path(request: web.Request) -> str:
    """The page a request belongs to (a live part's is its page's), with its query."""
    path = request.path
    if path == "/live/overview":
        path = "/"
    elif path.startswith("/live/"):
        path = path.removeprefix("/live")
    return path + (f"?{request.query_string}" if request.query_string else "")


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    site = request.app[SITE]
    if not site.hosts.allows(request.host):
        return refused(421, site.hosts.refusal(request.host))
    if request.path.startswith("/static/"):
        return await handler(request)
    live = request.path.startswith(("/live/", "/events/"))
    if request.method == "POST":
        try:
            request["form"] = await read_form(request)
        except FormError as exc:
            return refused(400, str(exc))
        origin = request.headers.get("Origin")
        if origin is not None and not site.hosts.allows_origin(origin):
            return refused(403, "refused: a cross-site request")
    templating.PAGE.set(page_path(request))
    session = site.sessions.get(request.cookies.get(COOKIE))
    fresh = None
    if session is None:
        if site.config.login:
            if request.path == "/login":
                return await handler(request)
            if live:
                return refused(401, "log in again")
            return web.HTTPSeeOther("/login")
        if request.method != "GET" or live:
            # A form or live part of a page from a session that is gone.
            return refused(
                403 if request.method == "POST" else 401,
                "refused: this form has no valid CSRF token; reload the page and try again",
            )
        fresh = session = site.sessions.new(
            token=site.config.token, tenant_id="", name=site.config.actor, by_login=False
        )
    request["session"] = session
    if request.method == "POST" and not same_csrf(request["form"].get("csrf", ""), session.csrf):
        return refused(
            403, "refused: this form has no valid CSRF token; reload the page and try again"
        )
    try:
        response = await handler(request)
    except web.HTTPError as exc:
        response = exc
        if not live and exc.text:
            response = site.error_page(request, exc.text, exc.status)
    except web.HTTPException as exc:
        response = exc
    except WorkflowJobsError as exc:
        if exc.code == grpc.StatusCode.UNAUTHENTICATED and session.by_login:
            # The token was revoked: log in again.
            site.sessions.drop(session)
            if live:
                return refused(401, "log in again")
            return web.HTTPSeeOther("/login")
        status = {
            grpc.StatusCode.NOT_FOUND: 404,
            grpc.StatusCode.PERMISSION_DENIED: 403,
            grpc.StatusCode.UNAUTHENTICATED: 401,
            grpc.StatusCode.INVALID_ARGUMENT: 400,
            grpc.StatusCode.FAILED_PRECONDITION: 409,
            grpc.StatusCode.UNAVAILABLE: 503,
        }.get(exc.code, 502)
        if live and exc.code in OUTAGE_CODES and site.backend.outage is not None:
            # The same banner, in the same words, as a page opened now shows.
            response = site.outage_part(site.backend.outage)
        elif live:
            response = refused(status, error_text(exc))
        else:
            response = site.error_page(request, error_text(exc), status)
    if fresh is not None and not response.prepared:
        site.set_session_cookie(response, fresh)
    return response


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    # Every response, event streams and errors included, just before its headers go out.
    response.headers.popall("Server", None)
    response.headers.setdefault("Cache-Control", "no-store")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'",
    )


def static_files() -> Handler:
    """The stylesheet and the script, read once."""
    files = {name: (_static(path), kind) for name, (kind, path) in STATIC.items()}

    async def static_file(request: web.Request) -> web.Response:
        entry = files.get(request.match_info["name"])
        if entry is None:
            raise web.HTTPNotFound()
        body, content_type = entry
        return web.Response(
            body=body, content_type=content_type, headers={"Cache-Control": "max-age=300"}
        )

    return static_file


def build_app(
    backend: Backend,
    config: AppConfig,
    *,
    hosts: HostCheck | None = None,
    throttle: LoginThrottle | None = None,
) -> web.Application:
    """The aiohttp application serving the dashboard against ``backend``.

    ``hosts`` decides which host names are answered (its ``port`` is set once
    the dashboard listens); ``throttle`` counts failed logins.
    """
    app = web.Application(middlewares=[middleware], client_max_size=256 * 1024)
    app[SITE] = Site(
        backend=backend,
        config=config,
        sessions=Sessions(),
        hosts=hosts or HostCheck(config.allowed_hosts, login=config.login),
        throttle=throttle or LoginThrottle(),
    )
    app.on_response_prepare.append(security_headers)
    app.on_shutdown.append(end_streams)
    for module in (overview, jobs, groups, pauses, tenants, limits, workers, actions, login):
        app.add_routes(module.ROUTES)
    app.router.add_get("/static/{name}", static_files())
    return app
