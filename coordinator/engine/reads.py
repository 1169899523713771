"""Reads: jobs by id and by filter, waiting for a job to finish."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.engine.attempts import FinishWaiters
from coordinator.engine.runner import StoreRunner
from coordinator.engine.validation import check_id
from coordinator.errors import InvalidArgument, NotFound
from coordinator.ids import is_valid_id
from coordinator.model import (
    FINISHED_STATUSES,
    AttemptRow,
    JobFilter,
    JobRow,
)
from coordinator.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ListPage:
    jobs: list[JobRow]
    next_page_token: str
    prev_page_token: str = ""
    # Every job the filter matches (when asked for).
    total: int = 0


class Reads:
    """Jobs by id and by filter, and waiting for a job to finish."""

    def __init__(self, *, store: Store, run_store: StoreRunner, waiters: FinishWaiters) -> None:
        self._store = store
        self._run = run_store
        # Woken by the one path for ended attempts (attempts.py).
        self._waiters = waiters

    async def ping_store(self) -> None:
        """Raise ``StoreUnavailable`` unless the database answers.

        On PostgreSQL the ping runs on a thread of its own, not the store's:
        it neither waits behind store calls (a busy coordinator is not a
        silent database) nor, when the database is silent and the ping hangs,
        holds up the engine's shutdown. The health watch sends one at a time.
        """
        if not self._store.is_postgres:
            await self._run(self._store.ping)
            return
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if answered.done():
                return
            if error is None:
                answered.set_result(None)
            else:
                answered.set_exception(error)

        def ping() -> None:
            error: BaseException | None = None
            try:
                self._store.ping()
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                error = e
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(settle, error)

        threading.Thread(target=ping, name="wfj-store-ping", daemon=True).start()
        await answered

    async def job_tenants(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The tenant of each job that exists (for credential tenant scopes)."""
        ids = [j for j in job_ids if is_valid_id(j)]
        if not ids:
            return {}
        rows = await self._run(self._store.job_get_many, ids)
        return {r.id: r.tenant_id for r in rows}

    async def get_job(
        self, job_id: str, with_attempts: bool = False
    ) -> tuple[JobRow, list[AttemptRow]]:
        check_id(job_id)
        row = await self._run(self._store.job_get, job_id)
        if row is None:
            raise NotFound(f"job {job_id} not found")
        attempts = await self._run(self._store.job_attempts, job_id) if with_attempts else []
        return row, attempts

    async def list_jobs(
        self,
        flt: JobFilter,
        page_size: int,
        page_token: str,
        *,
        newest_first: bool = False,
        include_total: bool = False,
        last_page: bool = False,
    ) -> ListPage:
        """One page of the jobs matching ``flt``, oldest or newest first.

        Keyset paging over job ids: a token names a job id and a direction
        (the page after it, or the page before it, in the list's order), and
        the order it belongs to. The page before is read in the opposite
        order and turned round; so is the last page.
        """
        if page_size < 0 or page_size > 1000:
            raise InvalidArgument("page_size must be between 1 and 1000 (0 means 100)")
        if last_page and page_token:
            raise InvalidArgument("last_page reads the last page: send it without page_token")
        size = page_size or 100
        backward, after = False, None
        if page_token:
            backward, after = decode_page_token(page_token, newest_first)
        elif last_page:
            backward = True
        rows = await self._run(
            self._store.job_list, flt, after, size + 1, newest_first=newest_first != backward
        )
        more = len(rows) > size
        rows = rows[:size]
        if backward:
            rows.reverse()
            before, beyond = more, not last_page and bool(rows)
        else:
            before, beyond = after is not None and bool(rows), more
        total = await self._run(self._store.job_count, flt) if include_total else 0
        return ListPage(
            rows,
            encode_page_token(rows[-1].id, newest_first, False) if beyond else "",
            encode_page_token(rows[0].id, newest_first, True) if before else "",
            total,
        )

    async def wait_for_finish(self, job_id: str) -> JobRow:
        """Return the job once it is COMPLETED, FAULTED or CANCELLED.

        Wakes at once for outcomes recorded by this coordinator and re-reads
        every second for those recorded elsewhere; the caller's deadline bounds it.
        """
        while True:
            row, _ = await self.get_job(job_id)
            if row.status in FINISHED_STATUSES:
                return row
            event = self._waiters.event(job_id)
            try:
                async with asyncio.timeout(1.0):
                    await event.wait()
            except TimeoutError:
                pass
            finally:
                self._waiters.done_with(job_id, event)


def encode_page_token(job_id: str, newest_first: bool, backward: bool) -> str:
    """``v2:<order>:<direction>:<job id>``: o(ldest)/n(ewest) first, a(fter)/b(efore)."""
    text = f"v2:{'n' if newest_first else 'o'}:{'b' if backward else 'a'}:{job_id}"
    return base64.urlsafe_b64encode(text.encode()).decode()


def decode_page_token(token: str, newest_first: bool) -> tuple[bool, str]:
    """(backward, job id) of a token of a list in this order (v1: oldest first, after)."""
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        text = ""
    order, direction, job_id = "o", "a", ""
    if text.startswith("v1:"):
        job_id = text[3:]
    elif text.startswith("v2:") and text.count(":") == 3:
        _, order, direction, job_id = text.split(":")
    if order not in ("o", "n") or direction not in ("a", "b") or not is_valid_id(job_id):
        raise InvalidArgument("page_token is not one this server issued; start without it")
    if (order == "n") != newest_first:
        raise InvalidArgument(
            "page_token belongs to a list in the other order; ask in the order it came "
            "from, or start without it"
        )
    return direction == "b", job_id


__all__ = ["ListPage", "Reads", "decode_page_token", "encode_page_token"]
