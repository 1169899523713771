"""Store health watch: NOT_SERVING while the database cannot be reached.

Design note. The coordinator says SERVING until the store fails a call with
``StoreUnavailable``, or does not answer a liveness ping in time. Either
starts one probe task, which turns health to NOT_SERVING and pings the store
with capped backoff until a ping succeeds, then turns health back to SERVING.
Further failures while the probe runs change nothing, so a database outage
costs one ping per interval, not one per failed call.

A database that goes silent (the connection stays open, nothing answers)
fails no call: calls just wait. So while SERVING the watch also pings every
``liveness_interval_s`` (``watch``); a ping that has no answer after
``liveness_timeout_s`` starts the probe, which waits for that same ping
before it sends another (a silent database is not sent a ping per interval).
Health is thus NOT_SERVING at most ``liveness_interval_s +
liveness_timeout_s`` after the database stopped answering, and SERVING again
once it answers. After ``stop()`` the watch never touches health again
(shutdown owns it from then on).

    SERVING --call fails, or a ping goes unanswered--> NOT_SERVING (probing)
       ^                                                    |
       +------------------ ping succeeds -------------------+
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
    # While SERVING: seconds between liveness pings, and how long one may go
    # unanswered before health turns NOT_SERVING (store/liveness.py).
    liveness_interval_s: float = 2.0
    liveness_timeout_s: float = 5.0


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
        self._watch: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def probing(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the liveness pings (``watch``); idempotent."""
        if self._watch is None and not self._stopped:
            self._watch = asyncio.get_running_loop().create_task(
                self.watch(), name="store-liveness-watch"
            )

    def report_unavailable(self, pending: asyncio.Future[None] | None = None) -> None:
        """A call failed because the store is unreachable (or ``pending``, a
        ping, went unanswered); start probing (once)."""
        if self._stopped or self.probing:
            return
        self._task = asyncio.get_running_loop().create_task(
            self.run_once(pending), name="store-health-probe"
        )

    async def watch(self) -> None:
        """Ping every ``liveness_interval_s`` while not probing; a ping
        unanswered after ``liveness_timeout_s``, or failing, starts the probe."""
        while not self._stopped:
            await asyncio.sleep(self.config.liveness_interval_s)
            if self.probing or self._stopped:
                continue
            ping = asyncio.ensure_future(self._ping())
            try:
                async with asyncio.timeout(self.config.liveness_timeout_s):
                    await asyncio.shield(ping)
            except TimeoutError:
                log.warning(
                    "database did not answer a ping within %.1fs",
                    self.config.liveness_timeout_s,
                )
                self.report_unavailable(ping)
            except StoreUnavailable:
                self.report_unavailable()
            except Exception:  # noqa: BLE001 - keep watching, but say why
                log.exception("store ping failed unexpectedly")

    async def run_once(self, pending: asyncio.Future[None] | None = None) -> ProbeResult:
        """NOT_SERVING, ping until the store answers, SERVING again.

        ``pending``, a ping already sent and not answered, is waited for
        before any other ping is sent."""
        log.warning("database unreachable: health is NOT_SERVING until it answers again")
        await self._set_serving(False)
        backoff = CappedBackoff(self.config.initial_interval_s, self.config.max_interval_s)
        pings = 0
        while not self._stopped:
            pings += 1
            try:
                if pending is not None:
                    ping, pending = pending, None
                    await ping
                else:
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
        for task in (self._watch, self._task):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        self._watch = self._task = None
