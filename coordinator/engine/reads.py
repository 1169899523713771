"""Reads: jobs by id and by filter, waiting for a job to finish, stats."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.engine.core import EngineCore, check_id
from coordinator.errors import InvalidArgument, NotFound
from coordinator.ids import is_valid_id
from coordinator.model import (
    FINISHED_STATUSES,
    AttemptRow,
    JobFilter,
    JobRow,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ListPage:
    jobs: list[JobRow]
    next_page_token: str


class Reads(EngineCore):
    """Jobs by id and by filter, waiting for a job to finish, stats."""

    async def ping_store(self) -> None:
        """Raise ``StoreUnavailable`` unless the database answers."""
        await self.run_store(self.store.ping)

    async def job_tenants(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The tenant of each job that exists (for credential tenant scopes)."""
        ids = [j for j in job_ids if is_valid_id(j)]
        if not ids:
            return {}
        rows = await self.run_store(self.store.job_get_many, ids)
        return {r.id: r.tenant_id for r in rows}

    async def get_job(
        self, job_id: str, with_attempts: bool = False
    ) -> tuple[JobRow, list[AttemptRow]]:
        check_id(job_id)
        row = await self.run_store(self.store.job_get, job_id)
        if row is None:
            raise NotFound(f"job {job_id} not found")
        attempts = await self.run_store(self.store.job_attempts, job_id) if with_attempts else []
        return row, attempts

    async def list_jobs(self, flt: JobFilter, page_size: int, page_token: str) -> ListPage:
        if page_size < 0 or page_size > 1000:
            raise InvalidArgument("page_size must be between 1 and 1000 (0 means 100)")
        size = page_size or 100
        after = _decode_page_token(page_token) if page_token else None
        rows = await self.run_store(self.store.job_list, flt, after, size + 1)
        next_token = _encode_page_token(rows[size - 1].id) if len(rows) > size else ""
        return ListPage(rows[:size], next_token)

    async def wait_for_finish(self, job_id: str) -> JobRow:
        """Return the job once it is COMPLETED, FAULTED or CANCELLED.

        Wakes at once for outcomes recorded by this coordinator and re-reads
        every second for those recorded elsewhere; the caller's deadline bounds it.
        """
        while True:
            row, _ = await self.get_job(job_id)
            if row.status in FINISHED_STATUSES:
                return row
            event = self.attempts.waiters.event(job_id)
            try:
                await asyncio.wait_for(event.wait(), timeout=1.0)
            except TimeoutError:
                pass
            finally:
                self.attempts.waiters.done_with(job_id, event)


def _encode_page_token(last_id: str) -> str:
    return base64.urlsafe_b64encode(f"v1:{last_id}".encode()).decode()


def _decode_page_token(token: str) -> str:
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        text = ""
    if not text.startswith("v1:") or not is_valid_id(text[3:]):
        raise InvalidArgument("page_token is not one this server issued; start without it")
    return text[3:]


__all__ = ["ListPage", "Reads"]
