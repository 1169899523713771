"""Limit settings: concurrency limits, rate limits and job type defaults as
operators set and list them, and as this replica last loaded them (the
admission rules are concurrency_limits.py and rate_limits.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from coordinator.clock import Clock
from coordinator.engine.concurrency_limits import LimitBook, limit_book_of
from coordinator.engine.fairness import FairScheduler
from coordinator.engine.rate_limits import (
    RateBook,
    RateBucket,
    level_at,
    next_start_at,
    rate_book_of,
)
from coordinator.engine.runner import StoreRunner
from coordinator.engine.validation import (
    category_value,
    check_job_type_name,
    check_retry_policy,
    check_timeout,
)
from coordinator.errors import InvalidArgument
from coordinator.model import (
    ConcurrencyLimit,
    JobTypeDefaults,
    LimitKind,
    OrderingFailure,
    RateLimit,
    RetryPolicy,
)
from coordinator.store import Store
from workflowjobs.contract import LONGEST_SPAN_DAYS, LONGEST_SPAN_MS

# Longest rate limit period accepted.
MAX_RATE_PERIOD_MS = LONGEST_SPAN_MS

log = logging.getLogger(__name__)


class LimitSettings:
    """Concurrency limits, rate limits and job type defaults: set, listed, and
    held as loaded (the fair-share weights are loaded with them)."""

    def __init__(
        self,
        *,
        store: Store,
        run_store: StoreRunner,
        clock: Clock,
        fair: FairScheduler,
        reloaded: Callable[[], None],
        max_string_length: int,
    ) -> None:
        self._store = store
        self._run = run_store
        self._clock = clock
        self._fair = fair
        # Told after every reload: a changed limit may admit waiting jobs now.
        self._reloaded = reloaded
        self._max_string_length = max_string_length
        # Concurrency limits as this replica last loaded them (the claim reads them as stored).
        self.limits = LimitBook()
        # Rate limits as this replica last loaded them (the claim reads them as stored).
        self.rates = RateBook()
        self.type_defaults: dict[str, JobTypeDefaults] = {}

    async def reload_limits(self) -> None:
        """Re-read concurrency limits, rate limits, job type defaults and
        fair-share weights (after a change here or on another replica)."""
        self.limits = limit_book_of(await self._run(self._store.limit_list))
        self.rates = rate_book_of(await self._run(self._store.rate_limit_list))
        self.type_defaults = {
            r.job_type: JobTypeDefaults(
                RetryPolicy.from_json(r.retry_policy),
                r.execution_timeout_ms,
                r.heartbeat_timeout_ms,
                OrderingFailure(r.ordering_failure) if r.ordering_failure else None,
            )
            for r in await self._run(self._store.job_type_defaults_list)
        }
        self._fair.set_weights(await self._run(self._store.tenant_weights))
        self._fair.set_category_weights(await self._run(self._store.category_weights))
        self._reloaded()

    async def set_job_type_defaults(self, job_type: str, defaults: JobTypeDefaults) -> None:
        if not job_type:
            raise InvalidArgument("defaults.job_type is required")
        limit = self._max_string_length
        if len(job_type) > limit:
            raise InvalidArgument(
                f"defaults.job_type is {len(job_type)} characters long; the limit is {limit}"
            )
        check_job_type_name(job_type, "defaults.job_type")
        check_retry_policy(defaults.retry_policy, "defaults.retry_policy", limit)
        for name, value in (
            ("execution_timeout", defaults.execution_timeout_ms),
            ("heartbeat_timeout", defaults.heartbeat_timeout_ms),
        ):
            if value is not None and value <= 0:
                raise InvalidArgument(f"{name} must be positive when set")
            check_timeout(value, f"defaults.{name}")
        await self._run(
            self._store.job_type_defaults_set,
            job_type,
            defaults.retry_policy.to_json(),
            defaults.execution_timeout_ms,
            defaults.heartbeat_timeout_ms,
            int(defaults.ordering_failure) if defaults.ordering_failure else None,
        )
        await self.reload_limits()

    async def set_limit(self, limit: ConcurrencyLimit) -> None:
        if limit.max_running < 0:
            raise InvalidArgument("max_running must be >= 0 (0 removes the limit)")
        if not limit.value:
            raise InvalidArgument(
                "value is required: a tenant, job type, definition, key, category or '*'"
            )
        if limit.kind == LimitKind.CATEGORY and limit.value != "*":
            limit = ConcurrencyLimit(limit.kind, category_value(limit.value), limit.max_running)
        await self._run(
            self._store.limit_set,
            int(limit.kind),
            limit.value,
            limit.max_running,
            self._clock.now_us(),
        )
        await self.reload_limits()

    async def set_rate_limit(self, limit: RateLimit) -> None:
        """Set (or replace) a rate limit; it holds on every replica once this returns."""
        if not limit.value:
            raise InvalidArgument(
                "limit.value is required: a tenant, job type, definition, key, category or '*'"
            )
        if len(limit.value) > self._max_string_length:
            raise InvalidArgument(
                f"limit.value is {len(limit.value)} characters long; "
                f"the limit is {self._max_string_length}"
            )
        if limit.starts <= 0:
            raise InvalidArgument("limit.starts must be > 0 (RemoveRateLimit removes a limit)")
        if limit.period_ms <= 0:
            raise InvalidArgument("limit.period must be at least one millisecond")
        if limit.period_ms > MAX_RATE_PERIOD_MS:
            raise InvalidArgument(f"limit.period must be at most {LONGEST_SPAN_DAYS} days")
        if limit.burst < 0:
            raise InvalidArgument("limit.burst must be >= 1 (0 means starts)")
        limit = RateLimit(
            limit.kind,
            self._limit_value(limit.kind, limit.value),
            limit.starts,
            limit.period_ms,
            limit.burst or limit.starts,
        )
        await self._run(
            self._store.rate_limit_set,
            int(limit.kind),
            limit.value,
            limit.starts,
            limit.period_ms,
            limit.burst,
            self._clock.now_us(),
        )
        await self.reload_limits()

    async def remove_rate_limit(self, kind: LimitKind, value: str) -> bool:
        """Remove a rate limit; False when none was set for the scope."""
        if not value:
            raise InvalidArgument("value is required: the scope of the limit to remove, or '*'")
        removed = await self._run(
            self._store.rate_limit_set,
            int(kind),
            self._limit_value(kind, value),
            0,
            0,
            0,
            self._clock.now_us(),
        )
        await self.reload_limits()
        return bool(removed)

    async def list_rate_limits(self) -> list[tuple[RateLimit, int | None, int]]:
        """Every rate limit with when it next admits a start (None: now) and its
        slowdown level; for '*' limits, the most held-back value."""
        rows = await self._run(self._store.rate_limit_list)
        book = rate_book_of(rows)
        now = self._clock.now_us()
        buckets = await self._run(self._store.rate_bucket_list, book.kinds)
        result: list[tuple[RateLimit, int | None, int]] = []
        for r in rows:
            limit = RateLimit(LimitKind(r.kind), r.value, r.starts, r.period_ms, r.burst)
            until: int | None = None
            level = 0
            for key, state in buckets.items():
                if key[0] != r.kind or (r.value != "*" and key[1] != r.value):
                    continue
                if book.limit_for(key) != limit:
                    continue
                bucket = RateBucket(*state)
                at = next_start_at(limit, bucket, now)
                if at > now and (until is None or at > until):
                    until = at
                level = max(level, level_at(limit, bucket, now))
            result.append((limit, until, level))
        return result

    def _limit_value(self, kind: LimitKind, value: str) -> str:
        """A scope value as stored: a category by its number as text."""
        if kind == LimitKind.CATEGORY and value != "*":
            return category_value(value)
        return value

    async def list_limits(self) -> list[tuple[ConcurrencyLimit, int]]:
        """Every limit with its RUNNING count (for '*' limits: the fullest value)."""
        rows = await self._run(self._store.limit_list)
        limits = [ConcurrencyLimit(LimitKind(r.kind), r.value, r.max_running) for r in rows]
        running = await self._run(
            self._store.job_running_counts, sorted({int(x.kind) for x in limits})
        )
        out = []
        for limit in limits:
            if limit.value == "*":
                count = max((n for (k, _), n in running.items() if k == int(limit.kind)), default=0)
            else:
                count = running.get((int(limit.kind), limit.value), 0)
            out.append((limit, count))
        return out


__all__ = ["LimitSettings"]
