"""Clock sync: keeps the engine's ``DatabaseClock`` on the database's time.

Every ``interval_s`` the chore re-measures the offset between this host's
monotonic clock and the database server's clock (a few ``clock_timestamp()``
round trips; see ``coordinator/clock.py``). Between runs only the monotonic
clock's rate drift (parts per million) accumulates, so the engine's "now"
stays within the measured uncertainty plus a few microseconds of the
database's. A host whose wall clock differs from the database's by more than
``warn_skew_s`` gets a WARNING once per run: it changes nothing the engine
decides, but timestamps in that host's own logs are off by that much.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coordinator.chores.loop import Chore
from coordinator.clock import US_PER_SECOND, DatabaseClock

log = logging.getLogger(__name__)


@dataclass
class ClockSyncConfig:
    # Seconds between re-measurements of the offset to the database clock.
    interval_s: float = 30.0
    # Seconds between attempts while the database cannot be reached.
    retry_s: float = 2.0
    # Host wall clocks further than this from the database's are logged.
    warn_skew_s: float = 1.0


class ClockSync(Chore[int]):
    """Start/stop loop around ``DatabaseClock.sync`` (run in the store's threads)."""

    name = "clock-sync"

    def __init__(
        self,
        config: ClockSyncConfig,
        clock: DatabaseClock,
        run_store: Callable[[Callable[[], int]], Awaitable[int]],
    ) -> None:
        super().__init__(clock)
        self.config = config
        self.clock: DatabaseClock = clock
        self._run_store = run_store

    async def run_once(self, now: int | None = None) -> int:
        uncertainty = await self._run_store(self.clock.sync)
        skew = self.clock.host_skew_us or 0
        if abs(skew) > self.config.warn_skew_s * US_PER_SECOND:
            log.warning(
                "this host's clock is %.3fs %s the database; the coordinator keeps "
                "time by the database",
                abs(skew) / US_PER_SECOND,
                "ahead of" if skew < 0 else "behind",
            )
        return uncertainty

    def delay_after(self, result: int | None) -> float:
        return self.config.retry_s if result is None else self.config.interval_s


__all__ = ["ClockSync", "ClockSyncConfig"]
