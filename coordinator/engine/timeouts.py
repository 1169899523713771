"""Execution timeouts: ends attempts that run past their job's execution timeout.

The worker SDK enforces a job's ``execution_timeout`` itself and reports the
failure; this chore is the coordinator's backstop for handlers that ignore it
(blocking code) and for workers that stopped reporting. Once an attempt has
run ``execution_timeout + grace`` it is ended with outcome TIMED_OUT and the
job is retried or faulted by its policy. Its lease token is cleared, so the
worker's next heartbeat answers "lost" and the SDK cancels the handler.

Safe on several replicas at once: ending an attempt is guarded by its lease
token, so a second replica finds nothing left to end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from coordinator.clock import US_PER_SECOND, Clock
from coordinator.engine.chore import Chore
from coordinator.model import RunningDeadline


@dataclass
class TimeoutConfig:
    # Longest sleep between runs: how late a timeout is noticed at worst when
    # the attempt was leased by another replica (own leases are found by the
    # earliest-deadline wake-up below).
    max_interval_s: float = 15.0
    # Time past the deadline left to the worker to report the timeout itself.
    grace_s: float = 2.0
    # Running attempts read per run; a full batch of expired ones runs again at once.
    batch_size: int = 200


@dataclass
class TimeoutResult:
    ended: int
    # Earliest deadline (grace included) still ahead, or None.
    next_deadline: int | None
    full_batch: bool = False


class ExecutionTimeouts(Chore[TimeoutResult]):
    """Start/stop loop around ``run_once``."""

    name = "execution-timeouts"

    def __init__(
        self,
        config: TimeoutConfig,
        clock: Clock,
        deadlines: Callable[[int], Awaitable[list[RunningDeadline]]],
        end: Callable[[Sequence[RunningDeadline], int], Awaitable[int]],
    ) -> None:
        super().__init__()
        self.config = config
        self._clock = clock
        self._deadlines = deadlines
        self._end = end
        self._last_now = 0
        # When the next run is due (us); leases with earlier deadlines wake it.
        self._next_run: int | None = None

    def note_deadline(self, deadline_us: int) -> None:
        """An attempt was leased here that must end by ``deadline_us``."""
        due = deadline_us + int(self.config.grace_s * US_PER_SECOND)
        if self._next_run is None or due < self._next_run:
            self._next_run = due
            self.wake()

    async def run_once(self) -> TimeoutResult:
        now = self._clock.now_us()
        self._last_now = now
        grace = int(self.config.grace_s * US_PER_SECOND)
        rows = await self._deadlines(self.config.batch_size)
        expired = [r for r in rows if r.deadline + grace <= now]
        ended = await self._end(expired, now) if expired else 0
        ahead = [r.deadline + grace for r in rows if r.deadline + grace > now]
        return TimeoutResult(
            ended=ended,
            next_deadline=min(ahead) if ahead else None,
            full_batch=len(expired) >= self.config.batch_size,
        )

    def delay_after(self, result: TimeoutResult | None) -> float:
        if result is None:
            return self.config.max_interval_s
        if result.full_batch:
            return 0
        delay = self.config.max_interval_s
        if result.next_deadline is not None:
            delay = min(delay, (result.next_deadline - self._last_now) / US_PER_SECOND + 0.01)
        delay = max(delay, 0.01)
        self._next_run = self._last_now + int(delay * US_PER_SECOND)
        return delay

    def describe(self, result: TimeoutResult) -> str:
        return (
            f"ended {result.ended} attempt(s) past their execution timeout" if result.ended else ""
        )


__all__ = ["ExecutionTimeouts", "TimeoutConfig", "TimeoutResult"]
