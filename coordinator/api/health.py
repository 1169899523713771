"""Store health watch: NOT_SERVING while the database cannot be reached.

Design note. Health is not polled: the coordinator says SERVING until a call
fails with ``StoreUnavailable``. That failure starts one probe task, which
turns health to NOT_SERVING and pings the store with capped backoff until a
ping succeeds, then turns health back to SERVING. Further failures while the
probe runs change nothing, so a database outage costs one ping per interval,
not one per failed call. After ``stop()`` the watch never touches health again
(shutdown owns it from then on).

    SERVING --call fails: store unavailable--> NOT_SERVING (probing)
       ^                                            |
       +------------- ping succeeds ----------------+
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coordinator.backoff import CappedBackoff
from coordinator.errors import StoreUnavailable

log = logging.getLogger(__name__)


@dataclass
class HealthWatchConfig:
    # First wait between pings while the database is unreachable, in seconds.
    initial_interval_s: float = 0.2
    # Cap on the wait between pings, in seconds.
    max_interval_s: float = 2.0


@dataclass
class ProbeResult:
    # Pings sent before the store answered.
    pings: int


class StoreHealthWatch:
    """Flips health to NOT_SERVING while the store is unreachable."""

    def __init__(
        self,
        ping: Callable[[], Awaitable[None]],
        set_serving: Callable[[bool], Awaitable[None]],
        config: HealthWatchConfig | None = None,
    ) -> None:
        self.config = config or HealthWatchConfig()
        self._ping = ping
        self._set_serving = set_serving
        self._task: asyncio.Task[ProbeResult] | None = None
        self._stopped = False

    @property
    def probing(self) -> bool:
        return self._task is not None and not self._task.done()

    def report_unavailable(self) -> None:
        """A call failed because the store is unreachable; start probing (once)."""
        if self._stopped or self.probing:
            return
        self._task = asyncio.get_running_loop().create_task(
            self.run_once(), name="store-health-probe"
        )

    async def run_once(self) -> ProbeResult:
        """NOT_SERVING, ping until the store answers, SERVING again."""
        log.warning("database unreachable: health is NOT_SERVING until it answers again")
        await self._set_serving(False)
        backoff = CappedBackoff(self.config.initial_interval_s, self.config.max_interval_s)
        pings = 0
        while not self._stopped:
            pings += 1
            try:
                await self._ping()
            except StoreUnavailable:
                pass
            except Exception:  # noqa: BLE001 - keep probing, but say why
                log.exception("store ping failed unexpectedly")
            else:
                if not self._stopped:
                    await self._set_serving(True)
                    log.info("database reachable again after %d ping(s): health is SERVING", pings)
                break
            await asyncio.sleep(backoff.next_delay())
        return ProbeResult(pings)

    async def stop(self) -> None:
        """Stop probing; idempotent."""
        self._stopped = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
