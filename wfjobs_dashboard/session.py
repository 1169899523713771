"""Sessions: who a browser is, kept in memory; the forms' CSRF tokens.

Sessions live in memory, keyed by a random id in an HttpOnly, SameSite=Strict
cookie. With login on, a session holds the token it logged in with and the
tenant it is scoped to; every call the dashboard makes for that session
carries that token, so the coordinator enforces the token's role and tenants.
Without login (loopback only), every session calls with the dashboard's own
token. Every POST must carry the session's CSRF token. A session is made only
when one is needed (a login, or a page visit without login) and there are at
most :data:`MAX_SESSIONS`; the login form, before any session, carries a CSRF
token that a cookie of its own repeats (:mod:`.login`).
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
import time
from collections import OrderedDict

import aiohttp
from aiohttp import web

COOKIE = "wfjobs_dashboard"
# The login form's CSRF token (no session exists before the login).
LOGIN_COOKIE = "wfjobs_login"
SESSION_IDLE_S = 12 * 3600
# Sessions kept at once; past this the one unused longest is dropped.
MAX_SESSIONS = 1000


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

    # Every session is a signed-in one (the page layout asks).
    logged_in = True


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


def need_all_tenants(session: Session) -> None:
    """Refuse a session scoped to one tenant a page or action that acts on every tenant."""
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
