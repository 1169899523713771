"""Pauses: pausing and unpausing a scope (tenant, job type, definition,
instance, category), listing pauses, and how every message words a pause scope
(``pause_scope_text``). The fair-share weights are ``weights.py``.
"""

from __future__ import annotations

import base64
import logging

from coordinator.clock import Clock
from coordinator.engine.dispatch import Dispatcher
from coordinator.engine.runner import StoreRunner
from coordinator.engine.validation import category_value
from coordinator.errors import InvalidArgument, NotFound
from coordinator.ids import is_valid_id, new_id
from coordinator.model import PauseKind, PauseRecord, PauseScope, scope_text
from coordinator.store import Store

log = logging.getLogger(__name__)


def pause_scope_text(scope: PauseScope, *, with_tenant: bool = True) -> str:
    """A pause scope as every message words it: "tenant acme" for a tenant
    pause; otherwise its kind and value ("definition d-1", "job type
    send-email", "category integration"), followed by "(tenant acme)" when it
    has a tenant and ``with_tenant`` (a job's own pause leaves it out: the
    tenant is the job's)."""
    if scope.kind == PauseKind.TENANT:
        return f"tenant {scope.tenant_id}"
    text = scope_text(scope.kind, scope.value)
    return f"{text} (tenant {scope.tenant_id})" if with_tenant and scope.tenant_id else text


class Pauses:
    """Pauses by scope; the dispatcher wakes when one lifts."""

    def __init__(
        self, *, store: Store, run_store: StoreRunner, clock: Clock, dispatcher: Dispatcher
    ) -> None:
        self._store = store
        self._run = run_store
        self._clock = clock
        self._dispatcher = dispatcher

    async def pause(
        self, scope: PauseScope, actor: str, reason: str, expires_at: int | None
    ) -> PauseRecord:
        scope = _check_scope(scope)
        now = self._clock.now_us()
        if expires_at is not None and expires_at <= now:
            raise InvalidArgument("expire_time must be in the future")
        record = await self._run(
            self._store.pause_create, new_id(), scope, actor, reason, expires_at, now
        )
        if expires_at is not None:
            self._dispatcher.wake(expires_at)
        return record

    async def unpause(self, scope: PauseScope, actor: str) -> list[PauseRecord]:
        scope = _check_scope(scope)
        lifted = await self._run(self._store.pause_lift, scope, actor, self._clock.now_us())
        if not lifted:
            raise NotFound(f"no active pause on {pause_scope_text(scope)}")
        self._dispatcher.wake()
        return lifted

    async def wake_at_pause_expiries(self) -> None:
        """Wake the dispatcher at the expiry of every active timed pause.

        ``pause`` wakes this replica's dispatcher at the expiry it sets (and the
        others through the store's wake notification); a coordinator starting
        after that reads the expiries here, so a timed pause lifts at its
        expiry rather than at the next idle poll.
        """
        expiries = await self._run(self._store.pause_expiries, self._clock.now_us())
        self._dispatcher.wake_at(expiries)

    async def list_pauses(
        self, include_lifted: bool, tenant_id: str, page_size: int = 0, page_token: str = ""
    ) -> tuple[list[PauseRecord], str]:
        """One page of pauses (oldest first) and the token of the next ("" on the last).

        Raises:
            InvalidArgument: ``page_size`` is outside 0..1000 (0: the default,
                500), or ``page_token`` is not one this server issued.
        """
        if not 0 <= page_size <= MAX_PAUSE_PAGE:
            raise InvalidArgument(
                f"page_size must be between 1 and {MAX_PAUSE_PAGE}, got {page_size}"
            )
        size = page_size or DEFAULT_PAUSE_PAGE
        after = _decode_pause_token(page_token) if page_token else None
        rows = await self._run(
            self._store.pause_list,
            self._clock.now_us(),
            include_lifted=include_lifted,
            tenant_id=tenant_id,
            after=after,
            limit=size + 1,
        )
        if len(rows) <= size:
            return rows, ""
        rows = rows[:size]
        return rows, _encode_pause_token(rows[-1].created_at, rows[-1].id)


# ListPauses pages: the default and the largest size.
DEFAULT_PAUSE_PAGE = 500
MAX_PAUSE_PAGE = 1000


def _encode_pause_token(created_at: int, pause_id: str) -> str:
    """``p1:<created_at>:<pause id>``, base64url."""
    return base64.urlsafe_b64encode(f"p1:{created_at}:{pause_id}".encode()).decode()


def _decode_pause_token(token: str) -> tuple[int, str]:
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        text = ""
    parts = text.split(":")
    if (
        len(parts) != 3
        or parts[0] != "p1"
        or not parts[1].isascii()
        or not parts[1].isdigit()
        or not is_valid_id(parts[2])
    ):
        raise InvalidArgument("page_token is not one this server issued; start without it")
    return int(parts[1]), parts[2]


def _check_scope(scope: PauseScope) -> PauseScope:
    """The scope as stored (a category by its number), or InvalidArgument."""
    if scope.kind == PauseKind.TENANT:
        if not scope.tenant_id:
            raise InvalidArgument("a tenant pause needs tenant_id")
        if scope.value:
            raise InvalidArgument("a tenant pause takes no value; put the tenant in tenant_id")
    elif not scope.value:
        raise InvalidArgument(f"a {scope.kind.name.lower()} pause needs value (the id to pause)")
    elif scope.kind == PauseKind.CATEGORY:
        return PauseScope(scope.kind, scope.tenant_id, category_value(scope.value))
    return scope


__all__ = ["Pauses", "pause_scope_text"]
