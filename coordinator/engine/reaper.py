"""Lease reaper: ends attempts whose lease expired.

An expired attempt counts as failed ("lease expired") and the job is retried
or faulted by its policy. On PostgreSQL each run takes a transaction-level
advisory lock, so one replica at a time does the work. The reaper sleeps until
the earliest known lease expiry, capped at ``max_interval_s``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coordinator.clock import US_PER_SECOND, Clock
from coordinator.telemetry.hooks import NO_TELEMETRY, EngineTelemetry

log = logging.getLogger(__name__)


@dataclass
class ReaperConfig:
    # Longest sleep between runs, also the delay for leases granted by other replicas.
    max_interval_s: float = 15.0
    # Attempts ended per run; a full batch triggers another run at once.
    batch_size: int = 500


@dataclass
class ReaperResult:
    reclaimed: int
    next_expiry: int | None


class LeaseReaper:
    """Start/stop loop around ``run_once``."""

    # Spans of runs; replaced by coordinator.telemetry when configured.
    telemetry: EngineTelemetry = NO_TELEMETRY

    def __init__(
        self,
        config: ReaperConfig,
        clock: Clock,
        run_once: Callable[[int], Awaitable[ReaperResult]],
    ) -> None:
        self.config = config
        self._clock = clock
        self._run_once = run_once
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._next_known: int | None = None
        # Earliest expiry noted while a run is in progress (the run's own
        # answer may predate those leases).
        self._noted_in_run: int | None = None
        self._running = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="lease-reaper")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    def note_expiry(self, expires_at: int) -> None:
        """A lease was granted that expires at ``expires_at``."""
        if self._running:
            if self._noted_in_run is None or expires_at < self._noted_in_run:
                self._noted_in_run = expires_at
            return
        known = self._next_known
        if known is None or expires_at < known or known <= self._clock.now_us():
            # Earlier than the planned run, or the planned one is already
            # under way: plan for this expiry.
            self._next_known = expires_at
            self._wake.set()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            now = self._clock.now_us()
            started_ns = time.time_ns()
            self._running, self._noted_in_run = True, None
            try:
                result = await self._run_once(now)
                self.telemetry.reaper_ran(result.reclaimed, started_ns)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("lease reaper run failed")
                result = ReaperResult(0, None)
            finally:
                self._running = False
            if result.reclaimed:
                log.info("lease reaper reclaimed %d expired lease(s)", result.reclaimed)
            if result.reclaimed >= self.config.batch_size:
                continue
            # The earliest of what the run found and what was leased during it.
            known = [t for t in (result.next_expiry, self._noted_in_run) if t is not None]
            self._next_known = min(known) if known else None
            delay = self.config.max_interval_s
            if self._next_known is not None:
                delay = min(delay, (self._next_known - self._clock.now_us()) / US_PER_SECOND + 0.01)
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=max(delay, 0.01))
            except TimeoutError:
                pass
