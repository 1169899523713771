"""Acquisition: leasing eligible jobs to workers, and the bookkeeping every
lease needs however it was granted.

Design note. The dispatcher (dispatch.py) decides *who* gets work: which
sessions share a pass and, per position, which worker a leased job goes to.
``Acquisition`` decides *what* is leased and leases it (``lease``): in one
statement where the store ranks by the fair rule itself (PostgreSQL without
concurrency or rate limits), otherwise by reading candidates outside full
limits, letting the fair scheduler pick across tenants and categories, and
claiming the picks under admission read from the limits as stored.

Every lease, from a pass, at insert (enqueue's direct dispatch) or to an
inline caller, goes through ``leased``: the reaper and the execution-timeout
chore learn the deadlines, metrics count the jobs, an ordering key is noted,
and (but for inline runs, which no fair pick chose) the tenants' and
categories' fair shares are charged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from coordinator.engine.admission import Admission, admission_for
from coordinator.engine.concurrency_limits import add_exclusion
from coordinator.engine.config import ChoreHooks
from coordinator.engine.dispatch import AcquisitionBatch
from coordinator.engine.fairness import FairScheduler
from coordinator.engine.rate_limits import RateBook, RateBucket, merge_exclusions
from coordinator.engine.runner import StoreRunner
from coordinator.model import Candidate, Claim, Exclusions, FairClaim, JobRow
from coordinator.store import Store
from coordinator.store.rows import ConcurrencyLimitRow, RateLimitRow
from coordinator.telemetry.hooks import EngineTelemetry

if TYPE_CHECKING:
    from coordinator.engine.attempts import Attempts
    from coordinator.engine.concurrency_limits import LimitBook

log = logging.getLogger(__name__)


class LimitsInForce(Protocol):
    """The concurrency and rate limits as this replica last loaded them."""

    @property
    def limits(self) -> LimitBook: ...

    @property
    def rates(self) -> RateBook: ...

    async def reload_limits(self) -> None: ...


class Acquisition:
    """Leases jobs (``lease``), books every lease (``leased``), hands back orphans."""

    def __init__(
        self,
        *,
        store: Store,
        run_store: StoreRunner,
        fair: FairScheduler,
        settings: LimitsInForce,
        hooks: ChoreHooks,
        attempts: Callable[[], Attempts],
        telemetry: Callable[[], EngineTelemetry],
        default_lease_ms: int,
    ) -> None:
        self._store = store
        self._run = run_store
        self._fair = fair
        self._settings = settings
        self._hooks = hooks
        # Built after the dispatcher, which holds this object: read when used.
        self._attempts = attempts
        self._telemetry = telemetry
        self._default_lease_ms = default_lease_ms

    async def lease(
        self,
        job_types: Sequence[str],
        tenants: frozenset[str] | None,
        owners: Sequence[str],
        token: str,
        now: int,
    ) -> AcquisitionBatch:
        """Lease up to ``len(owners)`` eligible jobs of ``job_types`` (of
        ``tenants``; None: every tenant), the job at position i to worker
        ``owners[i]``, under ``token``; every leased row is booked (``leased``)."""
        if not owners:
            return AcquisitionBatch([])
        claimed = await self._lease_in_one_statement(job_types, tenants, owners, token, now)
        if claimed is not None:
            self.leased(claimed.rows, now)
            return AcquisitionBatch(claimed.rows, claimed.skipped)
        wanted = len(owners)
        exclude, throttled = await self.exclusions(now)
        if throttled:
            self._throttled(throttled, now)
        candidates = await self._run(
            self._store.job_candidates, job_types, wanted, now, exclude, tenants
        )
        picks = self._fair.pick(candidates, wanted)
        if not picks:
            return AcquisitionBatch([], 0, list(throttled.values()))
        claims = [Claim(pick.id, owner) for pick, owner in zip(picks, owners, strict=False)]
        rows, held_until = await self._claim(claims, picks, token, now)
        self.leased(rows, now)
        return AcquisitionBatch(
            rows, len(claims) - len(rows), [*throttled.values(), *held_until.values()]
        )

    def leased(self, rows: Sequence[JobRow], now: int, *, fair_share: bool = True) -> None:
        """Bookkeeping for jobs just leased, however they were leased: the
        reaper and the timeout chore learn their deadlines (``hooks``), metrics
        count them, and with ``fair_share`` their tenants' and categories'
        shares are charged (a lease at insert counts like one from a pass)."""
        if not rows:
            return
        if any(r.ordering_key is not None for r in rows):
            self._attempts().ordered_work_seen = True
        self._hooks.lease_expires(min(r.lease_expires_at or now for r in rows))
        deadlines = [now + r.execution_timeout_ms * 1000 for r in rows if r.execution_timeout_ms]
        if deadlines:
            self._hooks.execution_deadline(min(deadlines))
        self._telemetry().leased(rows, now)
        if fair_share:
            self._fair.charge([r.tenant_id for r in rows], [r.category for r in rows])

    async def hand_back(self, refs: Sequence[tuple[str, str]]) -> None:
        """Jobs leased to a worker that left before they were delivered go back."""
        await self._attempts().hand_back(refs, "worker disconnected")

    async def exclusions(self, now: int) -> tuple[Exclusions | None, dict[Any, int]]:
        """The scopes acquisition reads no candidate from at ``now`` (their
        concurrency limit is full, or their rate limit admits no start), and
        the throttled rate-limit scopes with when each next admits a start."""
        limits, rates = self._settings.limits, self._settings.rates
        exclude = None
        if limits:
            running = await self._run(self._store.job_running_counts, limits.kinds)
            exclude = limits.exclusions(running)
        throttled: dict[Any, int] = {}
        if rates:
            # A scope whose rate limit admits no start now is left out (its jobs
            # stay untouched); the dispatcher wakes when it next admits one.
            buckets = await self._run(self._store.rate_bucket_list, rates.kinds)
            throttled = rates.throttled(
                {key: RateBucket(*row) for key, row in buckets.items()}, now
            )
            if throttled:
                ex = Exclusions()
                for kind, value in throttled:
                    add_exclusion(ex, kind, value)
                exclude = merge_exclusions(exclude, ex)
        return exclude, throttled

    async def _lease_in_one_statement(
        self,
        job_types: Sequence[str],
        tenants: frozenset[str] | None,
        owners: Sequence[str],
        token: str,
        now: int,
    ) -> FairClaim | None:
        """One-statement acquisition on PostgreSQL when no concurrency or rate limit applies.

        None sends the pass to the counting path: when this replica knows of
        limits, or when the store has limits this replica has not loaded yet
        (they are loaded now).
        """
        if (
            self._settings.limits
            or self._settings.rates
            or not self._store.capabilities.one_statement_claim
        ):
            return None
        claimed = await self._run(
            self._store.job_claim_fair,
            job_types,
            tenants,
            list(owners),
            self._fair.snapshot(),
            token,
            now,
            self._default_lease_ms,
        )
        if claimed is None:
            await self._settings.reload_limits()
        return claimed

    async def _claim(
        self, claims: Sequence[Claim], picks: Sequence[Candidate], token: str, now: int
    ) -> tuple[list[JobRow], dict[tuple[int, str], int]]:
        """Lease the picks under admission; returns the rows and the rate-limited
        scopes that held picks back, with when each next admits a start."""
        # Admission is decided from the limits as stored, read in the claim's
        # own transaction: a limit set on another replica holds here before
        # this replica has reloaded it.
        built: list[Admission] = []

        def admission(
            limit_rows: Sequence[ConcurrencyLimitRow], rate_rows: Sequence[RateLimitRow]
        ) -> Admission:
            built.append(admission_for(claims, picks, now, limit_rows, rate_rows))
            return built[-1]

        rows = await self._run(
            self._store.job_claim, claims, token, now, self._default_lease_ms, admission
        )
        throttled = built[-1].throttled if built else {}
        if throttled:
            self._throttled(throttled, now)
        return rows, dict(throttled)

    def _throttled(self, throttled: dict[tuple[int, str], int], now: int) -> None:
        """Rate limits hold scopes back until the given times (the dispatcher
        wakes then, from the batch): metrics hear of it."""
        rates = self._settings.rates
        self._telemetry().rate_throttled(
            {key: (rates.limit_for(key), until) for key, until in throttled.items()}, now
        )


__all__ = ["Acquisition", "LimitsInForce"]
