"""The one loop every background chore runs in.

A chore has a config dataclass, a ``run_once(now) -> Result`` that does one
bounded batch of its whole job and returns a small result, and this start/stop
loop around it: read the clock, run, log the result when it is worth a line
(``describe`` returns empty otherwise), sleep for the delay the chore asks for
(or until woken), repeat. A delay of 0 (a full batch) runs again at once. A
failed run is logged and the chore sleeps ``delay_after(None)``; it never ends
the loop. A run of failures (a database outage) logs the first one with its
traceback, then one short line per ``REPEAT_LOG_S`` of the chore's clock
(``still failing``, with the count and the last error), and one line when a
run succeeds again. ``start`` and ``stop`` are idempotent, and ``stop`` may be called
before ``start``. The supervisor (``coordinator/chores/__init__.py``) starts
and stops every chore.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from typing import Generic, TypeVar

from coordinator.clock import Clock

log = logging.getLogger(__name__)

R = TypeVar("R")

# While a chore keeps failing, at most one short line per this many seconds.
REPEAT_LOG_S = 60.0


class Chore(abc.ABC, Generic[R]):
    """Base of the chores; subclasses implement ``run_once`` and ``delay_after``."""

    name = "chore"
    # True for a chore one replica at a time does: on PostgreSQL its store
    # query takes a transaction-scoped advisory lock per run, and a replica
    # that does not get the lock does nothing that run.
    leader_only = False

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Consecutive failed runs, and when (clock µs) the last line about them was logged.
        self._failures = 0
        self._failure_logged_us = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    @property
    def running(self) -> bool:
        return self._task is not None

    def wake(self) -> None:
        """Run again now instead of waiting for the next interval."""
        self._wake.set()

    @abc.abstractmethod
    async def run_once(self, now: int | None = None) -> R:
        """One bounded batch of work as of ``now`` (default: the clock's time)."""

    @abc.abstractmethod
    def delay_after(self, result: R | None) -> float:
        """Seconds to sleep after a run (``result`` is None when the run failed)."""

    def describe(self, result: R) -> str:
        """A log line for a result worth logging; empty when there is nothing to say."""
        return ""

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            result: R | None
            try:
                result = await self.run_once(self.clock.now_us())
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self._failed(e)
                result = None
            if result is not None:
                if self._failures:
                    log.info("%s recovered after %d failed run(s)", self.name, self._failures)
                    self._failures = 0
                line = self.describe(result)
                if line:
                    log.info("%s: %s", self.name, line)
            delay = self.delay_after(result)
            if delay <= 0:
                await asyncio.sleep(0)
                continue
            # Not ``asyncio.wait_for``: on Python 3.11 it drops a cancel that
            # lands in the tick the wake does, and ``stop`` would wait forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    def _failed(self, error: Exception) -> None:
        """Log a failed run: the traceback once per run of failures, then rarely."""
        self._failures += 1
        now = self.clock.now_us()
        if self._failures == 1:
            self._failure_logged_us = now
            log.exception("%s run failed", self.name)
        elif now - self._failure_logged_us >= REPEAT_LOG_S * 1_000_000:
            self._failure_logged_us = now
            log.warning(
                "%s still failing (%d runs in a row): %s: %s",
                self.name,
                self._failures,
                type(error).__name__,
                error,
            )


__all__ = ["Chore"]
