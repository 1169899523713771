"""Acquisition: what the dispatcher (dispatch.py) calls to read candidates,
lease them (one statement where the store can, the counting path under
concurrency and rate limits) and hand back jobs leased to a worker that left.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from coordinator.engine.admission import Admission
from coordinator.engine.core import EngineCore, admission_for
from coordinator.engine.rates import RateBucket, add_exclusion, merge_exclusions
from coordinator.model import Candidate, Claim, Exclusions, JobRow

log = logging.getLogger(__name__)


class Acquisition(EngineCore):
    """The store side of a dispatcher pass: candidates, claims, orphans."""

    async def _candidates(
        self,
        job_types: Sequence[str],
        per_lane: int,
        now: int,
        tenants: frozenset[str] | None = None,
    ) -> list[Candidate]:
        exclude, throttled = await self.exclusions(now)
        if throttled:
            self._throttled(throttled, now)
        return await self.run_store(
            self.store.job_candidates, job_types, per_lane, now, exclude, tenants
        )

    async def exclusions(self, now: int) -> tuple[Exclusions | None, dict[Any, int]]:
        """The scopes acquisition reads no candidate from at ``now`` (their
        concurrency limit is full, or their rate limit admits no start), and
        the throttled rate-limit scopes with when each next admits a start."""
        exclude = None
        if self.limits:
            running = await self.run_store(self.store.job_running_counts, self.limits.kinds)
            exclude = self.limits.exclusions(running)
        throttled: dict[Any, int] = {}
        if self.rates:
            # A scope whose rate limit admits no start now is left out (its jobs
            # stay untouched); the dispatcher wakes when it next admits one.
            buckets = await self.run_store(self.store.rate_bucket_list, self.rates.kinds)
            throttled = self.rates.throttled(
                {key: RateBucket(*row) for key, row in buckets.items()}, now
            )
            if throttled:
                ex = Exclusions()
                for kind, value in throttled:
                    add_exclusion(ex, kind, value)
                exclude = merge_exclusions(exclude, ex)
        return exclude, throttled

    async def _claim_fair(
        self,
        job_types: Sequence[str],
        tenants: frozenset[str] | None,
        owners: list[str],
        token: str,
        now: int,
    ) -> list[JobRow] | None:
        """One-statement acquisition on PostgreSQL when no concurrency or rate limit applies.

        None sends the pass to the counting path: when this replica knows of
        limits, or when the store has limits this replica has not loaded yet
        (they are loaded now).
        """
        if (
            self.limits
            or self.rates
            or not self.store.capabilities.one_statement_claim
            or not owners
        ):
            return None
        rows = await self.run_store(
            self.store.job_claim_fair,
            job_types,
            tenants,
            owners,
            self.fair.snapshot(),
            token,
            now,
            self.config.default_lease_ms,
        )
        if rows is None:
            await self.reload_limits()
            return None
        self._leased(rows, now)
        return rows

    async def _claim(
        self, claims: Sequence[Claim], picks: Sequence[Candidate], token: str, now: int
    ) -> list[JobRow]:
        # Admission is decided from the limits as stored, read in the claim's
        # own transaction: a limit set on another replica holds here before
        # this replica has reloaded it.
        built: list[Admission] = []

        def admission(limit_rows: Sequence[Any], rate_rows: Sequence[Any]) -> Admission:
            built.append(admission_for(claims, picks, now, limit_rows, rate_rows))
            return built[-1]

        rows = await self.run_store(
            self.store.job_claim, claims, token, now, self.config.default_lease_ms, admission
        )
        self._leased(rows, now)
        if built and built[-1].throttled:
            self._throttled(built[-1].throttled, now)
        return rows

    def _throttled(self, throttled: dict[tuple[int, str], int], now: int) -> None:
        """Rate limits hold scopes back until the given times: a pass runs then."""
        self.dispatcher.wake_at(throttled.values())
        self.telemetry.rate_throttled(
            {key: (self.rates.limit_for(key), until) for key, until in throttled.items()}, now
        )

    async def _hand_back_orphans(self, refs: Sequence[tuple[str, str]]) -> None:
        """Jobs leased to a worker that left before they were delivered go back."""
        await self.attempts.hand_back(refs, "worker disconnected")


__all__ = ["Acquisition"]
