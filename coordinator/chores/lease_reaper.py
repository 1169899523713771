"""Lease reaper: ends attempts whose lease expired.

An expired attempt counts as failed ("lease expired") and the job is retried
or faulted by its policy (``decide_expired``), ended through the engine's one
attempt path (``engine/attempts.py``). On PostgreSQL each run takes a
transaction-level advisory lock, so one replica at a time does the work. The
reaper sleeps until the earliest known lease expiry, capped at
``max_interval_s``; a lease granted here re-arms it (``note_expiry``, wired by
the supervisor to the engine's lease-granted hook). Rows whose stored data
makes the decision fail are set aside (``engine/set_aside.py``).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.chores.loop import Chore
from coordinator.clock import US_PER_SECOND
from coordinator.engine.retries import decide_failure
from coordinator.model import AttemptEnd, AttemptOutcome, LeasedForFailure

if TYPE_CHECKING:
    import random
    from collections.abc import Callable

    from coordinator.clock import Clock
    from coordinator.engine.attempts import Attempts
    from coordinator.engine.runner import StoreRunner
    from coordinator.engine.set_aside import SetAsideBook
    from coordinator.store import Store
    from coordinator.telemetry.hooks import EngineTelemetry

NAME = "lease-reaper"


@dataclass
class LeaseReaperConfig:
    # Longest sleep between runs, also the delay for leases granted by other replicas.
    max_interval_s: float = 15.0
    # Attempts ended per run; a full batch triggers another run at once.
    batch_size: int = 500
    # Wait before the next run when one ended nothing although a lease it saw
    # had expired before it began: another replica holds the reaper's lock (and
    # reclaims it) or a write holds the row; retrying at once would spin.
    contended_retry_s: float = 1.0


@dataclass
class ReaperResult:
    # Attempts ended this run.
    reclaimed: int
    # Earliest lease expiry still ahead (set-aside rows excluded), or None.
    next_expiry: int | None


def decide_expired(now: int, rng: random.Random, row: LeasedForFailure) -> AttemptEnd:
    """The fate of a job whose lease ran out: a failed attempt, retried at once by policy."""
    return decide_failure(
        row,
        now=now,
        error="lease expired",
        error_kind="LeaseExpired",
        non_retryable=False,
        retry_at=now,
        outcome=AttemptOutcome.LEASE_EXPIRED,
        rng=rng,
    )


class LeaseReaper(Chore[ReaperResult]):
    """Reclaims expired leases in batches; ``note_expiry`` plans the next run."""

    name = NAME
    leader_only = True

    def __init__(
        self,
        config: LeaseReaperConfig,
        *,
        clock: Clock,
        store: Store,
        run_store: StoreRunner,
        attempts: Attempts,
        set_aside: SetAsideBook,
        rng: random.Random,
        telemetry: Callable[[], EngineTelemetry],
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
        self._telemetry = telemetry
        self._next_known: int | None = None
        # Earliest expiry noted while a run is in progress (the run's own
        # answer may predate those leases).
        self._noted_in_run: int | None = None
        self._in_run = False
        # The time the last run reclaimed up to.
        self._run_now: int | None = None

    def note_expiry(self, expires_at: int) -> None:
        """A lease was granted that expires at ``expires_at``."""
        if self._in_run:
            if self._noted_in_run is None or expires_at < self._noted_in_run:
                self._noted_in_run = expires_at
            return
        known = self._next_known
        if known is None or expires_at < known or known <= self.clock.now_us():
            # Earlier than the planned run, or the planned one is already
            # under way: plan for this expiry.
            self._next_known = expires_at
            self.wake()

    async def run_once(self, now: int | None = None) -> ReaperResult:
        now = self.clock.now_us() if now is None else now
        started_ns = time.time_ns()
        self._in_run, self._noted_in_run, self._run_now = True, None, now
        try:
            result = await self.reap(now)
        finally:
            self._in_run = False
        self._telemetry().reaper_ran(result.reclaimed, started_ns)
        return result

    async def reap(self, now: int) -> ReaperResult:
        """End one batch of expired attempts and find the next expiry."""
        store, attempts = self._store, self._attempts
        # The token each job was delivered here under, read while the store
        # holds the expired row: forgetting its in-flight entry is token-guarded.
        tokens: dict[str, str] = {}

        def decide(row: LeasedForFailure) -> AttemptEnd:
            token = attempts.token_here(row.id)
            if token is not None:
                tokens[row.id] = token
            return self.decide(now, row)

        skipped = self._set_aside.skipped(NAME, now)
        ends, _ = await attempts.in_store(
            NAME,
            now,
            functools.partial(
                store.lease_reclaim_expired, decide, now, self.config.batch_size, skipped
            ),
        )
        attempts.ended(
            ends,
            now,
            forget=[(e.job_id, tokens[e.job_id]) for e in ends if e.job_id in tokens],
            lease_expired=True,
        )
        next_expiry = await self._run_store(
            store.lease_next_expiry, self._set_aside.skipped(NAME, now)
        )
        return ReaperResult(len(ends), next_expiry)

    def decide(self, now: int, row: LeasedForFailure) -> AttemptEnd:
        """The decision rule (``decide_expired`` with the engine's jitter)."""
        return decide_expired(now, self._rng, row)

    def delay_after(self, result: ReaperResult | None) -> float:
        if result is not None and result.reclaimed >= self.config.batch_size:
            return 0
        # The earliest of what the run found and what was leased during it.
        found = result.next_expiry if result is not None else None
        known = [t for t in (found, self._noted_in_run) if t is not None]
        self._next_known = min(known) if known else None
        delay = self.config.max_interval_s
        run_now = self._run_now
        if (
            result is not None
            and result.reclaimed == 0
            and found is not None
            and run_now is not None
            and found < run_now
        ):
            return min(delay, self.config.contended_retry_s)
        if self._next_known is not None:
            delay = min(delay, (self._next_known - self.clock.now_us()) / US_PER_SECOND + 0.01)
        return max(delay, 0.01)

    def describe(self, result: ReaperResult) -> str:
        return f"reclaimed {result.reclaimed} expired lease(s)" if result.reclaimed else ""


__all__ = ["LeaseReaper", "LeaseReaperConfig", "ReaperResult", "decide_expired"]
