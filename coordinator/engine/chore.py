"""The loop every background chore of this package shares.

A chore has a config dataclass, a ``run_once() -> Result`` that does one
bounded batch of work and returns a small result, and this start/stop loop
around it: run, log a non-empty result, sleep for the delay the chore asks
for (or until woken), repeat. A failed run is logged and retried after the
chore's longest interval; it never ends the loop. ``start`` and ``stop`` are
idempotent, and ``stop`` may be called before ``start``.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

R = TypeVar("R")


class Chore(abc.ABC, Generic[R]):
    """Base of the periodic chores; subclasses implement ``run_once`` and ``delay_after``."""

    name = "chore"

    def __init__(self) -> None:
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

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
    async def run_once(self) -> R:
        """One bounded batch of work."""

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
                result = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s run failed", self.name)
                result = None
            if result is not None:
                line = self.describe(result)
                if line:
                    log.info("%s: %s", self.name, line)
            delay = self.delay_after(result)
            if delay <= 0:
                await asyncio.sleep(0)
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=delay)
            except TimeoutError:
                pass


__all__ = ["Chore"]
