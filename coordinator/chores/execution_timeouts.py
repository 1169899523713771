"""Execution timeouts: ends attempts that run past their job's execution timeout.

The worker SDK enforces a job's ``execution_timeout`` itself and reports the
failure; this chore is the coordinator's backstop for handlers that ignore it
(blocking code) and for workers that stopped reporting. Once an attempt has
run ``execution_timeout + grace`` it is ended with outcome TIMED_OUT and the
job is retried or faulted by its policy (``decide_timed_out``), through the
engine's one attempt path (``engine/attempts.py``). Its lease token is
cleared, so the worker's next heartbeat answers "lost" and the SDK cancels the
handler. Rows whose stored data makes the decision fail are set aside.

Safe on several replicas at once: ending an attempt is guarded by its lease
token, so a second replica finds nothing left to end.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.chores.loop import Chore
from coordinator.clock import US_PER_SECOND
from coordinator.engine.retries import decide_failure
from coordinator.model import AttemptEnd, AttemptOutcome, LeasedForFailure, RunningDeadline

if TYPE_CHECKING:
    from coordinator.clock import Clock
    from coordinator.engine.attempts import Attempts
    from coordinator.engine.runner import StoreRunner
    from coordinator.engine.set_aside import SetAsideBook
    from coordinator.store import Store

NAME = "execution-timeouts"


@dataclass
class ExecutionTimeoutsConfig:
    # Longest sleep between runs: how late a timeout is noticed at worst when
    # the attempt was leased by another replica (own leases are found by the
    # earliest-deadline wake-up, ``note_deadline``).
    max_interval_s: float = 15.0
    # Time past the deadline left to the worker to report the timeout itself.
    grace_s: float = 2.0
    # Running attempts read per run; a full batch of expired ones runs again at once.
    batch_size: int = 200


@dataclass
class TimeoutResult:
    # Attempts ended this run.
    ended: int
    # Earliest deadline (grace included) still ahead, or None.
    next_deadline: int | None
    # The batch was all past its deadline: more may wait.
    full_batch: bool = False


def decide_timed_out(
    deadlines: Mapping[str, RunningDeadline], now: int, rng: random.Random, row: LeasedForFailure
) -> AttemptEnd:
    """The fate of a job whose attempt ran past its deadline: a failed attempt, retried by policy."""
    overrun_s = (now - deadlines[row.id].deadline) / 1_000_000
    return decide_failure(
        row,
        now=now,
        error=f"execution timeout exceeded (still running {overrun_s:.1f}s past it)",
        error_kind="ExecutionTimeout",
        non_retryable=False,
        retry_at=None,
        outcome=AttemptOutcome.TIMED_OUT,
        rng=rng,
    )


class ExecutionTimeouts(Chore[TimeoutResult]):
    """Ends overrunning attempts in batches; ``note_deadline`` plans the next run."""

    name = NAME

    def __init__(
        self,
        config: ExecutionTimeoutsConfig,
        *,
        clock: Clock,
        store: Store,
        run_store: StoreRunner,
        attempts: Attempts,
        set_aside: SetAsideBook,
        rng: random.Random,
    ) -> None:
        super().__init__(clock)
        self.config = config
        self._store = store
        self._run_store = run_store
        # The one path of an ended attempt (engine/attempts.py).
        self._attempts = attempts
        self._set_aside = set_aside
        # Draws the backoff jitter of the retries it decides.
        self._rng = rng
        self._last_now = 0
        # When the next run is due (us); leases with earlier deadlines wake it.
        self._next_run: int | None = None

    def note_deadline(self, deadline_us: int) -> None:
        """An attempt was leased here that must end by ``deadline_us``."""
        due = deadline_us + int(self.config.grace_s * US_PER_SECOND)
        if self._next_run is None or due < self._next_run:
            self._next_run = due
            self.wake()

    async def run_once(self, now: int | None = None) -> TimeoutResult:
        now = self.clock.now_us() if now is None else now
        self._last_now = now
        grace = int(self.config.grace_s * US_PER_SECOND)
        skipped = self._set_aside.skipped(NAME, now)
        rows = await self._run_store(
            self._store.job_running_deadlines, self.config.batch_size, skipped
        )
        expired = {r.job_id: r for r in rows if r.deadline + grace <= now}
        ended = 0
        if expired:
            decide = functools.partial(decide_timed_out, expired, now, self._rng)
            refs = [(r.job_id, r.lease_token) for r in expired.values()]
            ended = len(await self._attempts.end(refs, decide, now, NAME))
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


__all__ = ["ExecutionTimeouts", "ExecutionTimeoutsConfig", "TimeoutResult", "decide_timed_out"]
