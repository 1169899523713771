"""Limit settings: concurrency limits and job type defaults as operators set
and list them (the admission rule itself is limits.py).
"""

from __future__ import annotations

import logging

from coordinator.engine.bounds import category_value, check_retry_policy, check_timeout
from coordinator.engine.core import EngineCore
from coordinator.errors import InvalidArgument
from coordinator.model import ConcurrencyLimit, JobTypeDefaults, LimitKind

log = logging.getLogger(__name__)


class LimitSettings(EngineCore):
    """Concurrency limits and job type defaults as operators set them."""

    async def set_job_type_defaults(self, job_type: str, defaults: JobTypeDefaults) -> None:
        if not job_type:
            raise InvalidArgument("defaults.job_type is required")
        limit = self.config.max_string_length
        if len(job_type) > limit:
            raise InvalidArgument(
                f"defaults.job_type is {len(job_type)} characters long; the limit is {limit}"
            )
        check_retry_policy(defaults.retry_policy, "defaults.retry_policy", limit)
        for name, value in (
            ("execution_timeout", defaults.execution_timeout_ms),
            ("heartbeat_timeout", defaults.heartbeat_timeout_ms),
        ):
            if value is not None and value <= 0:
                raise InvalidArgument(f"{name} must be positive when set")
            check_timeout(value, f"defaults.{name}")
        await self.run_store(
            self.store.job_type_defaults_set,
            job_type,
            defaults.retry_policy.to_json(),
            defaults.execution_timeout_ms,
            defaults.heartbeat_timeout_ms,
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
        await self.run_store(
            self.store.limit_set,
            int(limit.kind),
            limit.value,
            limit.max_running,
            self.clock.now_us(),
        )
        await self.reload_limits()

    async def list_limits(self) -> list[tuple[ConcurrencyLimit, int]]:
        """Every limit with its RUNNING count (for '*' limits: the fullest value)."""
        rows = await self.run_store(self.store.limit_list)
        limits = [ConcurrencyLimit(LimitKind(r.kind), r.value, r.max_running) for r in rows]
        running = await self.run_store(
            self.store.job_running_counts, sorted({int(x.kind) for x in limits})
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
