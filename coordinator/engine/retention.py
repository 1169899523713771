"""Retention: purges finished jobs after a configurable age (off by default).

COMPLETED and CANCELLED jobs whose ``finished_at`` is older than
``finished_after_days`` are deleted with their attempt history, in batches.
FAULTED jobs are the dead-letter set and are never purged: an operator
retries or inspects them. On PostgreSQL one replica at a time purges (the
store takes an advisory lock per batch).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coordinator.clock import US_PER_SECOND, Clock
from coordinator.engine.chore import Chore

_DAY_US = 86_400 * US_PER_SECOND


@dataclass
class RetentionConfig:
    # Purge finished (COMPLETED, CANCELLED) jobs older than this many days; 0 keeps them forever.
    finished_after_days: float = 0.0
    # Sleep between runs once nothing is left to purge.
    interval_s: float = 3600.0
    # Jobs deleted per transaction; a full batch runs again at once.
    batch_size: int = 1000


@dataclass
class RetentionResult:
    purged: int
    full_batch: bool = False


class RetentionCleaner(Chore[RetentionResult]):
    """Start/stop loop around ``run_once``; ``start`` does nothing while disabled."""

    name = "retention"

    def __init__(
        self,
        config: RetentionConfig,
        clock: Clock,
        purge: Callable[[int, int], Awaitable[int]],
    ) -> None:
        super().__init__()
        self.config = config
        self._clock = clock
        self._purge = purge

    @property
    def enabled(self) -> bool:
        return self.config.finished_after_days > 0

    def start(self) -> None:
        if self.enabled:
            super().start()

    async def run_once(self) -> RetentionResult:
        if not self.enabled:
            return RetentionResult(0)
        before = self._clock.now_us() - int(self.config.finished_after_days * _DAY_US)
        purged = await self._purge(before, self.config.batch_size)
        return RetentionResult(purged, full_batch=purged >= self.config.batch_size)

    def delay_after(self, result: RetentionResult | None) -> float:
        if result is not None and result.full_batch:
            return 0
        return self.config.interval_s

    def describe(self, result: RetentionResult) -> str:
        return f"purged {result.purged} finished job(s)" if result.purged else ""


__all__ = ["RetentionCleaner", "RetentionConfig", "RetentionResult"]
