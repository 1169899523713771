"""The dashboard's web application (aiohttp): pages, actions, sessions, CSRF.

Sessions live in memory, keyed by a random id in an HttpOnly, SameSite=Strict
cookie. With login on, a session holds the token it logged in with and the
tenant it is scoped to; every call the dashboard makes for that session
carries that token, so the coordinator enforces the token's role and tenants.
Without login (loopback only), every session calls with the dashboard's own
token. Every POST must carry the session's CSRF token. A session is made only
when one is needed (a login, or a page visit without login) and there are at
most :data:`MAX_SESSIONS`; the login form, before any session, carries a CSRF
token that a cookie of its own repeats. Which host names are answered and how
failed logins are throttled: :mod:`.guard`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import logging
import math
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import grpc
from aiohttp import web

from worker_sdk import AdminClient, JobEventFilter, JobFilter, WorkflowJobsError
from worker_sdk._admin import pause_scope, pause_scope_text

from . import render
from .backend import Backend
from .guard import HostCheck, LoginThrottle

log = logging.getLogger("worker_sdk.dashboard")

COOKIE = "wfjobs_dashboard"
# The login form's CSRF token (no session exists before the login).
LOGIN_COOKIE = "wfjobs_login"
SESSION_IDLE_S = 12 * 3600
# Sessions kept at once; past this the one unused longest is dropped.
MAX_SESSIONS = 1000
# The live part of a page is fetched this often while it is open (at most 1/s).
LIVE_INTERVAL_MS = 2000
# An event stream with nothing to say sends a comment this often, so a closed
# browser tab is noticed and its watch ended.
EVENTS_KEEPALIVE_S = 15.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclasses.dataclass
class Session:
    """One browser's session."""

    id: str
    csrf: str
    token: str
    tenant_id: str
    name: str
    # Logged in with a token (not the dashboard's own, as on loopback without login).
    by_login: bool = False
    last_seen: float = dataclasses.field(default_factory=time.monotonic)
    flash: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    # Every session is a signed-in one (render.page asks).
    logged_in = True


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


class Sessions:
    """The sessions in memory, at most ``limit``: past it, the one unused longest goes."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self._by_id: OrderedDict[str, Session] = OrderedDict()  # least recently seen first
        self._limit = limit

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        session = self._by_id.get(session_id)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.last_seen > SESSION_IDLE_S:
            del self._by_id[session_id]
            return None
        session.last_seen = now
        self._by_id.move_to_end(session_id)
        return session

    def new(self, *, token: str, tenant_id: str, name: str, by_login: bool) -> Session:
        now = time.monotonic()
        while self._by_id:
            oldest = next(iter(self._by_id.values()))
            if len(self._by_id) < self._limit and now - oldest.last_seen <= SESSION_IDLE_S:
                break
            del self._by_id[oldest.id]
        session = Session(
            id=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            token=token,
            tenant_id=tenant_id,
            name=name,
            by_login=by_login,
        )
        self._by_id[session.id] = session
        return session

    def drop(self, session: Session) -> None:
        self._by_id.pop(session.id, None)

    def tokens_in_use(self) -> set[str]:
        return {s.token for s in self._by_id.values()}


class FormError(ValueError):
    """A request body that is not a form the dashboard can read."""


async def read_form(request: web.Request) -> dict[str, str]:
    """The POSTed form as text fields; :class:`FormError` says what is wrong with it."""
    try:
        form = await request.post()
    except web.HTTPException:
        raise  # e.g. 413: the body is over the size limit
    except (ValueError, UnicodeError, aiohttp.ClientError, aiohttp.http.HttpProcessingError):
        raise FormError(
            "refused: the request body is not a form the dashboard can read "
            "(URL-encoded or multipart, in UTF-8)"
        ) from None
    fields = {}
    for key, value in form.items():
        if not isinstance(value, str):
            raise FormError(f"refused: the dashboard takes no file uploads (field {key!r})")
        fields[key] = value
    return fields


def same_csrf(sent: str, expected: str) -> bool:
    """Constant-time comparison of a form's CSRF token (any text) with the expected one."""
    return bool(sent) and hmac.compare_digest(sent.encode(), expected.encode())


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


def page_path(request: web.Request) -> str:
    """The page a request belongs to (a live part's is its page's), with its query."""
    path = request.path
    if path == "/live/overview":
        path = "/"
    elif path.startswith("/live/"):
        path = path.removeprefix("/live")
    return path + (f"?{request.query_string}" if request.query_string else "")


def _static(name: str) -> bytes:
    return resources.files("worker_sdk.dashboard").joinpath("static", name).read_bytes()


def _error_text(error: WorkflowJobsError) -> str:
    return f"{error.message} ({error.code.name})"


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
    sessions = Sessions()
    hosts = hosts or HostCheck(config.allowed_hosts, login=config.login)
    throttle = throttle or LoginThrottle()
    static = {
        "dashboard.css": (_static("dashboard.css"), "text/css"),
        "dashboard.js": (_static("dashboard.js"), "text/javascript"),
    }

    def set_cookie(response: web.StreamResponse, session: Session) -> None:
        response.set_cookie(
            COOKIE,
            session.id,
            httponly=True,
            samesite="Strict",
            secure=config.secure_cookie,
            path="/",
        )

    def session_of(request: web.Request) -> Session | None:
        return sessions.get(request.cookies.get(COOKIE))

    def refused(status: int, text: str) -> web.Response:
        return web.Response(status=status, text=text)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not hosts.allows(request.host):
            return refused(421, hosts.refusal(request.host))
        if request.path.startswith("/static/"):
            return await handler(request)
        live = request.path.startswith(("/live/", "/events/"))
        if request.method == "POST":
            try:
                request["form"] = await read_form(request)
            except FormError as exc:
                return refused(400, str(exc))
            origin = request.headers.get("Origin")
            if origin is not None and not hosts.allows_origin(origin):
                return refused(403, "refused: a cross-site request")
        render.PAGE.set(page_path(request))
        session = session_of(request)
        fresh = None
        if session is None:
            if config.login:
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
            fresh = session = sessions.new(
                token=config.token, tenant_id="", name=config.actor, by_login=False
            )
        request["session"] = session
        if request.method == "POST" and not same_csrf(
            request["form"].get("csrf", ""), session.csrf
        ):
            return refused(
                403, "refused: this form has no valid CSRF token; reload the page and try again"
            )
        try:
            response = await handler(request)
        except web.HTTPError as exc:
            response = exc
            if not live and exc.text:
                response = error_page(request, exc.text, exc.status)
        except web.HTTPException as exc:
            response = exc
        except WorkflowJobsError as exc:
            if exc.code == grpc.StatusCode.UNAUTHENTICATED and session.by_login:
                # The token was revoked: log in again.
                sessions.drop(session)
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
            if live:
                response = refused(status, _error_text(exc))
            else:
                response = error_page(request, _error_text(exc), status)
        if fresh is not None and not response.prepared:
            set_cookie(response, fresh)
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

    def error_page(request: web.Request, text: str, status: int) -> web.Response:
        return html(
            render.page(
                "Error",
                f'<p class="flash error" id="error">{render.e(text)}</p>'
                '<p><a href="/">back to the overview</a></p>',
                path=request.path,
                session=request.get("session"),
                outage=backend.outage,
            ),
            status=status,
        )

    def html(text: str, status: int = 200) -> web.Response:
        return web.Response(text=text, content_type="text/html", status=status)

    def page(
        request: web.Request, title: str, body: str, *, live: str = "", events: str = ""
    ) -> web.Response:
        session: Session = request["session"]
        flash, session.flash = session.flash, []
        return html(
            render.page(
                title,
                body,
                path=request.path,
                session=session,
                flash=flash,
                live=live,
                events=events if backend.watches_events else "",
                outage=backend.outage,
            )
        )

    def need_all_tenants(session: Session) -> None:
        if session.tenant_id:
            raise web.HTTPForbidden(
                text=f"this page acts on every tenant; your session is scoped to tenant "
                f"{session.tenant_id}"
            )

    def tenant_for(session: Session, asked: str) -> str:
        """The tenant a call is about: a scoped session's own, whatever the form says."""
        if session.tenant_id:
            if asked and asked != session.tenant_id:
                raise web.HTTPForbidden(
                    text=f"your session is scoped to tenant {session.tenant_id}, not {asked}"
                )
            return session.tenant_id
        return asked

    async def call(session: Session, method: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """A read for a page (a short deadline)."""
        return await backend.call(session.token, method, *args, **kw)

    async def act(session: Session, method: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """A call that changes something (the full deadline)."""
        return await backend.call(session.token, method, *args, action=True, **kw)

    # -- static and login -------------------------------------------------------------

    async def static_file(request: web.Request) -> web.Response:
        entry = static.get(request.match_info["name"])
        if entry is None:
            raise web.HTTPNotFound()
        body, content_type = entry
        return web.Response(
            body=body, content_type=content_type, headers={"Cache-Control": "max-age=300"}
        )

    async def login_form(request: web.Request) -> web.Response:
        if request.get("session") is not None:
            raise web.HTTPSeeOther("/")
        csrf = request.cookies.get(LOGIN_COOKIE, "")
        fresh = not (csrf.isascii() and len(csrf) == 43)
        if fresh:
            csrf = secrets.token_urlsafe(32)
        response = login_page(csrf)
        if fresh:
            set_login_cookie(response, csrf)
        return response

    def login_page(csrf: str, error: str = "", choices: list[str] | None = None) -> web.Response:
        return html(
            render.page(
                "Log in",
                render.login_body(csrf, error, choices or []),
                path="/login",
                session=None,
            ),
            status=401 if error else 200,
        )

    def set_login_cookie(response: web.StreamResponse, csrf: str) -> None:
        response.set_cookie(
            LOGIN_COOKIE,
            csrf,
            httponly=True,
            samesite="Strict",
            secure=config.secure_cookie,
            path="/login",
        )

    async def login(request: web.Request) -> web.StreamResponse:
        if not config.login or request.get("session") is not None:
            raise web.HTTPSeeOther("/")
        form: dict[str, str] = request["form"]
        csrf = request.cookies.get(LOGIN_COOKIE, "")
        if not csrf or not same_csrf(form.get("csrf", ""), csrf):
            return refused(
                403, "refused: this form has no valid CSRF token; reload the login page"
            )
        address = request.remote or ""
        wait = throttle.wait_s(address)
        if wait > 0:
            response = login_page(
                csrf, f"too many failed logins from {address}; try again in {wait:.0f} s"
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
            try:
                # The coordinator says whose token this is and what it may touch.
                me = await backend.call(token, AdminClient.who_am_i)
            except WorkflowJobsError as exc:
                if exc.code == grpc.StatusCode.UNAUTHENTICATED:
                    error = "the coordinator does not know this token"
                    throttle.failed(address)
                else:
                    error = f"cannot check the token: {_error_text(exc)}"
            else:
                tenants = [t for t in me.tenants if t != "*"]
                name = me.name
                if "admin" not in me.roles:
                    error = (
                        f"the token {me.name!r} has no admin role (roles: "
                        f"{', '.join(me.roles) or 'none'}); log in with an admin token"
                    )
                    throttle.failed(address)
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
            if token and token not in sessions.tokens_in_use():
                backend.forget(token)
            return login_page(csrf, error, choices)
        fresh = sessions.new(token=token, tenant_id=tenant, name=name, by_login=True)
        log.info("dashboard login as %s (%s)", fresh.name, tenant or "all tenants")
        response = web.HTTPSeeOther("/")
        set_cookie(response, fresh)
        response.del_cookie(LOGIN_COOKIE, path="/login")
        return response

    async def logout(request: web.Request) -> web.StreamResponse:
        session: Session = request["session"]
        sessions.drop(session)
        if session.token not in sessions.tokens_in_use():
            backend.forget(session.token)
        response = web.HTTPSeeOther("/login" if config.login else "/")
        response.del_cookie(COOKIE, path="/")
        return response

    # -- overview ---------------------------------------------------------------------

    async def overview(request: web.Request) -> web.Response:
        session: Session = request["session"]
        view = await backend.overview(session.token, session.tenant_id)
        sort = request.query.get("sort", "")
        return page(
            request,
            "Overview",
            f'<div id="live">{render.overview_live(view, session, sort, backend.outage)}</div>',
            live="/live/overview" + (f"?{urlencode({'sort': sort})}" if sort else ""),
            events="/events/overview",
        )

    async def overview_live(request: web.Request) -> web.Response:
        session: Session = request["session"]
        view = await backend.overview(session.token, session.tenant_id)
        sort = request.query.get("sort", "")
        return html(render.overview_live(view, session, sort, backend.outage))

    # -- jobs -------------------------------------------------------------------------

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
        session: Session = request["session"]
        values = filter_values(request, session)
        job_filter = _job_filter(values)
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
                job = await call(session, AdminClient.get_job, values["q"])
            except WorkflowJobsError as exc:
                if exc.code not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                    raise
                searched = f"no job has the id {values['q']!r}"
            else:
                raise web.HTTPSeeOther(f"/jobs/{job.id}")
        if values["q"] and values["q_in"] == "payload":
            found, scanned = await payload_search(session, job_filter, values)
            searched = (
                f"{len(found)} of the {scanned} {values['order']} job(s) matching the other "
                f"filters have {values['q']!r} in their payload (at most "
                f"{PAYLOAD_SCAN_JOBS} are searched, {values['page_size']} shown)"
            )
            listing = render.JobListing(found, total=len(found), note=searched)
        else:
            result = await call(
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
        return page(request, "Jobs", body)

    async def payload_search(
        session: Session, job_filter: JobFilter, values: dict[str, Any]
    ) -> tuple[list[Any], int]:
        """The jobs among the first :data:`PAYLOAD_SCAN_JOBS` of the filter whose
        payload holds the text (as UTF-8 bytes), at most a page of them."""
        needle, wanted = values["q"].encode(), values["page_size"]
        found: list[Any] = []
        scanned, token = 0, ""
        while scanned < PAYLOAD_SCAN_JOBS and len(found) < wanted:
            chunk = await call(
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
        session: Session = request["session"]
        job_id = request.match_info["job_id"]
        view = await _job_view(session, job_id)
        live = render.job_live(view, session)
        body = f'<div id="live">{live}</div>{render.job_static(view.job)}'
        return page(
            request,
            f"Job {view.job.job_type}",
            body,
            live=f"/live/jobs/{job_id}",
            events=f"/events/jobs/{job_id}",
        )

    async def job_live(request: web.Request) -> web.Response:
        session: Session = request["session"]
        view = await _job_view(session, request.match_info["job_id"])
        return html(render.job_live(view, session))

    async def _job_view(session: Session, job_id: str) -> render.JobPage:
        job = await call(session, AdminClient.get_job, job_id)
        if job.status.value != "PENDING":
            return render.JobPage(job)
        explanation = await call(session, AdminClient.explain_job, job_id)
        reasons = explanation.reasons
        held_by = {r.pause_id for r in reasons if r.pause_id}
        holding = []
        if held_by:
            # The pauses that hold it, so the page offers to lift each.
            active = await call(session, AdminClient.list_pauses, tenant_id=job.tenant_id)
            holding = [p for p in active if p.id in held_by]
        return render.JobPage(job, reasons, explanation.last_failure, holding)

    # -- live updates from the job event stream (server-sent events) ------------------

    streams: set[asyncio.Task[Any]] = set()

    async def event_stream(request: web.Request, event_filter: JobEventFilter) -> web.StreamResponse:
        """Tell the page each time a job it shows changes: ``event: change`` per batch.

        The page then fetches its live part again (at most once a second). A
        watch the coordinator refuses (a token without the scheduler role)
        ends with ``event: unavailable``, and the page goes back to polling.
        """
        session: Session = request["session"]
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Content-Type-Options": "nosniff",
            }
        )
        await response.prepare(request)
        changes: asyncio.Queue[str | WorkflowJobsError] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for event in backend.watch(session.token, event_filter):
                    changes.put_nowait(event.cursor)
            except WorkflowJobsError as exc:
                changes.put_nowait(exc)

        pumping = asyncio.get_running_loop().create_task(pump())
        task = asyncio.current_task()
        if task is not None:
            streams.add(task)
        try:
            await response.write(b"retry: 5000\nevent: ready\ndata: watching\n\n")
            while True:
                try:
                    item = await asyncio.wait_for(changes.get(), EVENTS_KEEPALIVE_S)
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
                    continue
                # A burst of events is one change for the page.
                batch = [item]
                while not changes.empty():
                    batch.append(changes.get_nowait())
                cursors = [c for c in batch if isinstance(c, str)]
                refused = [c for c in batch if isinstance(c, WorkflowJobsError)]
                if cursors:
                    await response.write(f"event: change\ndata: {cursors[-1]}\n\n".encode())
                if refused:
                    text = _error_text(refused[0]).replace("\n", " ")
                    await response.write(f"event: unavailable\ndata: {text}\n\n".encode())
                    break
        except ConnectionResetError:
            pass  # the page was closed
        finally:
            if task is not None:
                streams.discard(task)
            pumping.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pumping
        return response

    async def job_events(request: web.Request) -> web.StreamResponse:
        session: Session = request["session"]
        job_id = request.match_info["job_id"]
        return await event_stream(
            request, JobEventFilter(job_id=job_id, tenant_id=session.tenant_id)
        )

    async def overview_events(request: web.Request) -> web.StreamResponse:
        session: Session = request["session"]
        return await event_stream(request, JobEventFilter(tenant_id=session.tenant_id))

    async def end_streams(app: web.Application) -> None:
        for task in list(streams):
            task.cancel()

    # -- pauses, tenants, limits, workers ---------------------------------------------

    async def pauses(request: web.Request) -> web.Response:
        session: Session = request["session"]
        active = await call(session, AdminClient.list_pauses, tenant_id=session.tenant_id)
        history = await call(
            session, AdminClient.list_pauses, include_lifted=True, tenant_id=session.tenant_id
        )
        history = sorted(history, key=lambda p: p.create_time.ToNanoseconds(), reverse=True)
        prefill = {k: request.query.get(k, "") for k in ("kind", "value", "tenant_id")}
        return page(request, "Pauses", render.pauses_body(active, history, session, prefill))

    async def tenants(request: web.Request) -> web.Response:
        session: Session = request["session"]
        stats = await call(session, AdminClient.get_stats, tenant_id=session.tenant_id)
        active = await call(session, AdminClient.list_pauses, tenant_id=session.tenant_id)
        weights = await call(session, AdminClient.list_tenant_weights, tenant_id=session.tenant_id)
        disabled = {p.scope.tenant_id: p for p in active if render.pause_kind(p.scope) == "tenant"}
        set_weights = {w.tenant_id: w.weight for w in weights.weights}
        names = sorted({c.tenant_id for c in stats.counts} | set(disabled) | set(set_weights))
        if session.tenant_id:
            names = [session.tenant_id]
        categories = await call(
            session, AdminClient.list_category_weights, tenant_id=session.tenant_id
        )
        body = render.tenants_body(
            names,
            disabled,
            set_weights,
            weights.default_weight,
            session,
            category_weights=categories.weights,
        )
        return page(request, "Tenants", body)

    async def limits(request: web.Request) -> web.Response:
        session: Session = request["session"]
        need_all_tenants(session)
        items = await call(session, AdminClient.list_concurrency_limits)
        rates = await call(session, AdminClient.list_rate_limits)
        body = render.limits_body(items, session) + render.rate_limits_body(rates, session)
        return page(request, "Limits", body)

    async def workers(request: web.Request) -> web.Response:
        session: Session = request["session"]
        need_all_tenants(session)
        return page(
            request,
            "Workers",
            f'<div id="live">{await workers_html(session)}</div>',
            live="/live/workers",
        )

    async def workers_live(request: web.Request) -> web.Response:
        session: Session = request["session"]
        need_all_tenants(session)
        return html(await workers_html(session))

    async def workers_html(session: Session) -> str:
        items = await call(session, AdminClient.list_workers)
        stats = await call(session, AdminClient.get_stats)
        return render.workers_body(items, stats, session)

    # -- actions ----------------------------------------------------------------------

    async def action(request: web.Request) -> web.StreamResponse:
        session: Session = request["session"]
        form: dict[str, str] = request["form"]
        op = form.get("op", "")
        spec = ACTIONS.get(op)
        if spec is None:
            raise web.HTTPBadRequest(text=f"unknown action {op!r}")
        back = safe_back(form.get("back", "/"))
        try:
            summary, danger = await spec.describe(session, form)
        except ValueError as exc:
            session.flash.append(("error", str(exc)))
            raise web.HTTPSeeOther(back) from None
        if form.get("confirmed") != "1":
            fields = {k: v for k, v in form.items() if k not in ("csrf", "confirmed")}
            fields["back"] = back
            return page(
                request,
                "Confirm",
                render.confirm_body(
                    render.e(summary), fields, session.csrf, danger=danger, back=back
                ),
            )
        try:
            message, where = await spec.run(session, form)
        except WorkflowJobsError as exc:
            if exc.code == grpc.StatusCode.UNAUTHENTICATED:
                raise
            session.flash.append(("error", f"{spec.verb} failed: {_error_text(exc)}"))
            raise web.HTTPSeeOther(back) from None
        except ValueError as exc:
            session.flash.append(("error", str(exc)))
            raise web.HTTPSeeOther(back) from None
        log.info("dashboard: %s by %s: %s", op, session.name, message)
        session.flash.append(("ok", message))
        raise web.HTTPSeeOther(where or back)

    # Each action: how to describe it (for the confirmation) and how to run it.
    @dataclasses.dataclass(frozen=True)
    class Action:
        verb: str
        describe: Callable[[Session, dict[str, str]], Awaitable[tuple[str, bool]]]
        run: Callable[[Session, dict[str, str]], Awaitable[tuple[str, str]]]

    def job_action(verb: str, method: Callable[..., Any], danger: bool) -> Action:
        def job_id(form: dict[str, str]) -> str:
            value = form.get("job_id", "").strip()
            if not value:
                raise ValueError(f"name the job to {verb} (job_id)")
            return value

        async def describe(session: Session, form: dict[str, str]) -> tuple[str, bool]:
            job = await call(session, AdminClient.get_job, job_id(form))
            return (
                f"{verb.capitalize()} job {job.id} ({job.job_type}, tenant {job.tenant_id}, "
                f"now {job.status.value})?",
                danger,
            )

        async def run(session: Session, form: dict[str, str]) -> tuple[str, str]:
            kwargs: dict[str, Any] = {}
            if method is AdminClient.retry_job:
                kwargs["keep_attempts"] = form.get("keep_attempts") == "1"
            if method is AdminClient.cancel_job:
                kwargs["reason"] = form.get("reason", "") or f"cancelled by {session.name}"
            job = await act(session, method, job_id(form), **kwargs)
            return f"{verb} job {job.id}: now {job.status.value}", f"/jobs/{job.id}"

        return Action(verb, describe, run)

    def bulk_filter(session: Session, form: dict[str, str]) -> JobFilter:
        values: dict[str, Any] = {
            k: form.get(k, "")
            for k in (
                "job_type",
                "definition_id",
                "instance_id",
                "correlation_id",
                "parent_job_id",
                "category",
                *render.TIME_FILTERS,
            )
        }
        values["tenant_id"] = tenant_for(session, form.get("tenant_id", ""))
        values["statuses"] = [s for s in form.get("statuses", "").split(",") if s]
        return _job_filter(values)

    def bulk_action(verb: str, method: Callable[..., Any]) -> Action:
        async def describe(session: Session, form: dict[str, str]) -> tuple[str, bool]:
            job_filter = bulk_filter(session, form)
            result = await call(session, method, job_filter, dry_run=True)
            return (
                f"{verb.capitalize()} {result.matched} matching job(s) "
                f"({_filter_text(job_filter)})? This dry run changed nothing.",
                True,
            )

        async def run(session: Session, form: dict[str, str]) -> tuple[str, str]:
            kwargs: dict[str, Any] = {}
            if method is AdminClient.bulk_retry_jobs:
                kwargs["keep_attempts"] = form.get("keep_attempts") == "1"
            else:
                kwargs["reason"] = form.get("reason", "") or f"cancelled by {session.name}"
            result = await act(session, method, bulk_filter(session, form), **kwargs)
            return f"{verb}: {result.changed} of {result.matched} matching job(s) changed", ""

        return Action(verb, describe, run)

    async def describe_pause(session: Session, form: dict[str, str]) -> tuple[str, bool]:
        kind, value, tenant = _scope(session, form)
        expiry = render.duration_minutes(form.get("expire_minutes", ""))
        what = _scope_text(kind, value, tenant)
        until = f", lifting by itself in {form['expire_minutes']} min" if expiry else ""
        verb = "Disable" if kind == "tenant" else "Pause"
        return f"{verb} {what}{until}? Its pending jobs wait until it is lifted.", True

    async def run_pause(session: Session, form: dict[str, str]) -> tuple[str, str]:
        kind, value, tenant = _scope(session, form)
        expiry = render.duration_minutes(form.get("expire_minutes", ""))
        record = await act(
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

    async def describe_unpause(session: Session, form: dict[str, str]) -> tuple[str, bool]:
        kind, value, tenant = _scope(session, form)
        verb = "Enable" if kind == "tenant" else "Unpause"
        return f"{verb} {_scope_text(kind, value, tenant)}?", False

    async def run_unpause(session: Session, form: dict[str, str]) -> tuple[str, str]:
        kind, value, tenant = _scope(session, form)
        lifted = await act(
            session, AdminClient.unpause, kind, value, tenant_id=tenant, actor=session.name
        )
        return f"lifted {len(lifted)} pause(s) of {_scope_text(kind, value, tenant)}", ""

    def _scope(session: Session, form: dict[str, str]) -> tuple[str, str, str]:
        kind = form.get("kind", "")
        if kind not in dict(render.PAUSE_KINDS):
            raise ValueError(f"unknown pause scope {kind!r}")
        value = form.get("value", "").strip()
        tenant = tenant_for(session, form.get("tenant_id", "").strip())
        if kind == "tenant" and not tenant:
            raise ValueError("name the tenant to disable")
        if kind != "tenant" and not value:
            raise ValueError(f"name the {kind.replace('_', ' ')} to pause")
        return kind, ("" if kind == "tenant" else value), tenant

    async def describe_weight(session: Session, form: dict[str, str]) -> tuple[str, bool]:
        tenant, weight = _weight(session, form)
        return f"Set tenant {tenant}'s fair-share weight to {weight}?", False

    async def run_weight(session: Session, form: dict[str, str]) -> tuple[str, str]:
        tenant, weight = _weight(session, form)
        await act(session, AdminClient.set_tenant_weight, tenant, weight)
        return f"tenant {tenant} now has weight {weight}", ""

    def _weight(session: Session, form: dict[str, str]) -> tuple[str, int]:
        tenant = tenant_for(session, form.get("tenant_id", "").strip())
        weight = whole(form.get("weight", ""), "the weight must be a whole number above 0")
        if not tenant:
            raise ValueError("name the tenant")
        return tenant, weight

    async def describe_category_weight(session: Session, form: dict[str, str]) -> tuple[str, bool]:
        tenant, category, weight = _category_weight(session, form, with_weight=True)
        return f"Set the weight of category {category} in tenant {tenant} to {weight}?", False

    async def run_category_weight(session: Session, form: dict[str, str]) -> tuple[str, str]:
        tenant, category, weight = _category_weight(session, form, with_weight=True)
        await act(session, AdminClient.set_category_weight, tenant, category, weight)
        return f"category {category} of tenant {tenant} now has weight {weight}", ""

    async def describe_category_weight_remove(
        session: Session, form: dict[str, str]
    ) -> tuple[str, bool]:
        tenant, category, _ = _category_weight(session, form, with_weight=False)
        return (
            f"Remove the weight of category {category} in tenant {tenant} (back to 1)?",
            True,
        )

    async def run_category_weight_remove(
        session: Session, form: dict[str, str]
    ) -> tuple[str, str]:
        tenant, category, _ = _category_weight(session, form, with_weight=False)
        await act(session, AdminClient.remove_category_weight, tenant, category)
        return f"category {category} of tenant {tenant} is back to weight 1", ""

    def _category_weight(
        session: Session, form: dict[str, str], *, with_weight: bool
    ) -> tuple[str, str, int]:
        tenant = tenant_for(session, form.get("tenant_id", "").strip())
        if not tenant:
            raise ValueError("name the tenant")
        category = form.get("category", "").strip().lower()
        known = ("UNSPECIFIED", *render.CATEGORIES)
        if category.upper() not in known:
            names = ", ".join(c.lower() for c in known)
            raise ValueError(f"unknown category {category!r}; choose one of {names}")
        if not with_weight:
            return tenant, category, 0
        weight = whole(form.get("weight", ""), "the weight must be a whole number from 1 to 10000")
        return tenant, category, weight

    async def describe_limit(session: Session, form: dict[str, str]) -> tuple[str, bool]:
        need_all_tenants(session)
        kind, value, most = _limit(form)
        what = f"{kind.replace('_', ' ')} {value}"
        if most == 0:
            return f"Remove the concurrency limit of {what}?", True
        return f"Let at most {most} job(s) of {what} run at once?", False

    async def run_limit(session: Session, form: dict[str, str]) -> tuple[str, str]:
        need_all_tenants(session)
        kind, value, most = _limit(form)
        await act(session, AdminClient.set_concurrency_limit, kind, value, most)
        return f"limit of {kind.replace('_', ' ')} {value}: {most or 'removed'}", ""

    def _limit(form: dict[str, str]) -> tuple[str, str, int]:
        kind = form.get("kind", "")
        if kind not in dict(render.LIMIT_KINDS):
            raise ValueError(f"unknown limit scope {kind!r}")
        value = form.get("value", "").strip()
        if not value:
            raise ValueError("name what the limit applies to")
        most = whole(form.get("max_running", ""), "the limit must be a whole number (0 removes it)")
        return kind, value, most

    async def describe_rate_limit(session: Session, form: dict[str, str]) -> tuple[str, bool]:
        need_all_tenants(session)
        kind, value, starts, period, burst = _rate_limit(form)
        what = f"{kind.replace('_', ' ')} {value}"
        return (
            f"Let at most {starts} job(s) of {what} start per {period:g}s "
            f"(bursts of {burst or starts})?",
            False,
        )

    async def run_rate_limit(session: Session, form: dict[str, str]) -> tuple[str, str]:
        need_all_tenants(session)
        kind, value, starts, period, burst = _rate_limit(form)
        await act(session, AdminClient.set_rate_limit, kind, value, starts, period, burst=burst)
        return f"rate limit of {kind.replace('_', ' ')} {value}: {starts} per {period:g}s", ""

    def _rate_limit(form: dict[str, str]) -> tuple[str, str, int, float, int]:
        kind = form.get("kind", "")
        if kind not in dict(render.LIMIT_KINDS):
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
        session: Session, form: dict[str, str]
    ) -> tuple[str, bool]:
        need_all_tenants(session)
        kind, value = form.get("kind", ""), form.get("value", "")
        return f"Remove the rate limit of {kind.replace('_', ' ')} {value}?", True

    async def run_rate_limit_remove(session: Session, form: dict[str, str]) -> tuple[str, str]:
        need_all_tenants(session)
        kind, value = form.get("kind", ""), form.get("value", "")
        if kind not in dict(render.LIMIT_KINDS) or not value:
            raise ValueError("name the rate limit to remove")
        removed = await act(session, AdminClient.remove_rate_limit, kind, value)
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

        async def describe(session: Session, form: dict[str, str]) -> tuple[str, bool]:
            need_all_tenants(session)
            _, _, what = target(form)
            if undo:
                return f"Let {what} hand out jobs again?", False
            return f"Drain {what}: no new jobs are handed out until it is undrained?", True

        async def run(session: Session, form: dict[str, str]) -> tuple[str, str]:
            need_all_tenants(session)
            worker_id, cluster, what = target(form)
            method = AdminClient.undrain if undo else AdminClient.drain
            await act(session, method, cluster=cluster, worker_id=worker_id)
            return f"{'undrained' if undo else 'drained'} {what}", "/workers"

        return Action(verb, describe, run)

    ACTIONS: dict[str, Action] = {
        "retry": job_action("retry", AdminClient.retry_job, False),
        "cancel": job_action("cancel", AdminClient.cancel_job, True),
        "unlock": job_action("unlock", AdminClient.unlock_job, True),
        "replay": job_action("replay", AdminClient.replay_job, False),
        "bulk_retry": bulk_action("bulk retry", AdminClient.bulk_retry_jobs),
        "bulk_cancel": bulk_action("bulk cancel", AdminClient.bulk_cancel_jobs),
        "pause": Action("pause", describe_pause, run_pause),
        "unpause": Action("unpause", describe_unpause, run_unpause),
        "weight": Action("set weight", describe_weight, run_weight),
        "category_weight": Action(
            "set category weight", describe_category_weight, run_category_weight
        ),
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

    app = web.Application(middlewares=[middleware], client_max_size=256 * 1024)
    app.on_response_prepare.append(security_headers)
    app.router.add_get("/", overview)
    app.router.add_get("/live/overview", overview_live)
    app.router.add_get("/jobs", jobs)
    app.router.add_get("/jobs/{job_id}", job_detail)
    app.router.add_get("/live/jobs/{job_id}", job_live)
    app.router.add_get("/events/overview", overview_events)
    app.router.add_get("/events/jobs/{job_id}", job_events)
    app.on_shutdown.append(end_streams)
    app.router.add_get("/pauses", pauses)
    app.router.add_get("/tenants", tenants)
    app.router.add_get("/limits", limits)
    app.router.add_get("/workers", workers)
    app.router.add_get("/live/workers", workers_live)
    app.router.add_post("/action", action)
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    app.router.add_get("/static/{name}", static_file)
    return app


# A payload search reads at most this many jobs of the filter, this many a call.
PAYLOAD_SCAN_JOBS = 2000
PAYLOAD_SCAN_PAGE = 500
# The longest rate-limit period the coordinator takes (docs/limits.md).
MAX_RATE_PERIOD_S = 366 * 86400
INT32_MAX = 2**31 - 1


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


def _local_time(text: str, what: str) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (ValueError, OverflowError):
        raise web.HTTPBadRequest(
            text=f"{what} must be a date and time from year 1 to 9999 in UTC, "
            f"not {text[:60]!r}"
        ) from None


def _job_filter(values: dict[str, Any]) -> JobFilter:
    return JobFilter(
        statuses=values.get("statuses", ()),
        tenant_id=values.get("tenant_id", ""),
        job_types=_job_types(values.get("job_type", "")),
        definition_id=values.get("definition_id", ""),
        instance_id=values.get("instance_id", ""),
        correlation_id=values.get("correlation_id", ""),
        parent_job_id=values.get("parent_job_id", ""),
        category=values.get("category") or None,
        created_after=_local_time(values.get("created_after", ""), "created after"),
        created_before=_local_time(values.get("created_before", ""), "created before"),
        due_after=_local_time(values.get("due_after", ""), "due after"),
        due_before=_local_time(values.get("due_before", ""), "due before"),
    )


def _job_types(text: str) -> list[str]:
    """The job types of the filter's field: comma-separated, a job of any of them matches."""
    return [t for t in (part.strip() for part in text.split(",")) if t]


def _filter_text(f: JobFilter) -> str:
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
        ("category", f.category),
        ("created after", f.created_after),
        ("created before", f.created_before),
        ("due after", f.due_after),
        ("due before", f.due_before),
    ):
        if value:
            parts.append(f"{label} {value}")
    return ", ".join(parts) or "every job"


def _scope_text(kind: str, value: str, tenant: str) -> str:
    scope = pause_scope(kind, value, tenant)
    return pause_scope_text(scope, in_tenant=" in tenant {}", every_tenant=" in every tenant")
