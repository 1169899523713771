"""Acquisition: what the dispatcher (dispatch.py) calls to read candidates,
lease them (one statement where the store can, the counting path under
concurrency limits) and hand back jobs leased to a worker that left.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from coordinator.engine.core import EngineCore, admission_for
from coordinator.model import Candidate, Claim, JobRow

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
        exclude = None
        if self.limits:
            running = await self.run_store(self.store.job_running_counts, self.limits.kinds)
            exclude = self.limits.exclusions(running)
        return await self.run_store(
            self.store.job_candidates, job_types, per_lane, now, exclude, tenants
        )

    async def _claim_fair(
        self,
        job_types: Sequence[str],
        tenants: frozenset[str] | None,
        owners: list[str],
        token: str,
        now: int,
    ) -> list[JobRow] | None:
        """One-statement acquisition on PostgreSQL when no concurrency limit applies.

        None sends the pass to the counting path: when this replica knows of
        limits, or when the store has limits this replica has not loaded yet
        (they are loaded now).
        """
        if self.limits or not self.store.capabilities.one_statement_claim or not owners:
            return None
        fair_tenants, starts, weights, floor = self.fair.snapshot()
        rows = await self.run_store(
            self.store.job_claim_fair,
            job_types,
            tenants,
            owners,
            (fair_tenants, starts, weights, floor),
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
        admission = functools.partial(admission_for, claims, picks)
        rows = await self.run_store(
            self.store.job_claim, claims, token, now, self.config.default_lease_ms, admission
        )
        self._leased(rows, now)
        return rows

    async def _hand_back_orphans(self, refs: Sequence[tuple[str, str]]) -> None:
        """Jobs leased to a worker that left before they were delivered go back."""
        await self.attempts.hand_back(refs, "worker disconnected")


__all__ = ["Acquisition"]
