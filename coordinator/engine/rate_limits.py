"""Rate limits: at most N job starts per period in a scope, with a burst.

Design note. A rate limit names a scope kind and value (as a concurrency limit
does, ``"*"`` for each value of the kind) and allows ``starts`` starts per
``period_ms``, with bursts of up to ``burst`` starts. It is a GCRA (the
generic cell rate algorithm, a token bucket kept as one number): each limited
scope value has a *theoretical arrival time* ``tat``; a start is admitted at
``now`` when ``tat - now <= (burst - 1) * T``, with ``T = period / starts``
the emission interval, and then moves ``tat`` to ``max(tat, now) + T``. So a
scope idle long enough admits ``burst`` starts at once, then one every ``T``.

The state lives in the store (``wfj_rate_buckets``), read and written by the
claim's own transaction under the scope's advisory lock, so the limit holds
across replicas. A throttled job is never touched: acquisition leaves its
scope out of the candidates until the limit next admits a start, and the
dispatcher wakes at that time (``next_start_at``), not before.

Adaptive push-back. A handler that reports the downstream pushed back
(``ctx.throttle(retry_after)`` or raising ``worker_sdk.Throttled``) slows every
rate limit covering its job: the limit admits no start before ``now +
retry_after`` (one emission interval at the slowed rate when not given), and
its emission interval doubles (``slow_level`` + 1, at most
``MAX_SLOW_LEVEL``: 1/16 of the configured rate). The slowdown recovers by one
level for every ``RECOVERY_PERIODS`` periods without a further report. Scopes
without a rate limit are not affected.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from coordinator.engine.concurrency_limits import (
    ScopeBook,
    ScopeKey,
    add_exclusion,
    limit_scope_text,
)
from coordinator.model import Candidate, Exclusions, LimitKind, RateLimit
from coordinator.store.rows import RateLimitRow

# Most doublings of the emission interval a push-back report can cause.
MAX_SLOW_LEVEL = 4
# Periods without push-back after which the slowdown drops one level.
RECOVERY_PERIODS = 10


@dataclass
class RateBucket:
    """The stored state of one rate-limited scope value (``wfj_rate_buckets``)."""

    tat: int = 0
    slow_level: int = 0
    slowed_at: int = 0

    def as_row(self) -> tuple[int, int, int]:
        return (self.tat, self.slow_level, self.slowed_at)


def period_us(limit: RateLimit) -> int:
    return limit.period_ms * 1000


def level_at(limit: RateLimit, bucket: RateBucket, now: int) -> int:
    """The slowdown in force at ``now``, after its recovery."""
    if bucket.slow_level <= 0:
        return 0
    recovered = max(0, now - bucket.slowed_at) // max(1, RECOVERY_PERIODS * period_us(limit))
    return max(0, bucket.slow_level - int(recovered))


def interval_us(limit: RateLimit, level: int = 0) -> int:
    """The emission interval (µs between starts) at slowdown ``level``."""
    return max(1, -(-(period_us(limit) << level) // max(1, limit.starts)))


def _tolerance(limit: RateLimit, interval: int) -> int:
    return (max(1, limit.burst) - 1) * interval


def next_start_at(limit: RateLimit, bucket: RateBucket, now: int) -> int:
    """The earliest time (>= ``now``) at which the limit admits one start."""
    interval = interval_us(limit, level_at(limit, bucket, now))
    return max(now, bucket.tat - _tolerance(limit, interval))


def starts_admitted(limit: RateLimit, bucket: RateBucket, now: int) -> int:
    """How many starts in a row the limit admits at ``now`` (0: it is throttled);
    an idle scope admits ``burst``."""
    interval = interval_us(limit, level_at(limit, bucket, now))
    room = now + _tolerance(limit, interval) - max(bucket.tat, now)
    return 0 if room < 0 else room // interval + 1


def take(limit: RateLimit, bucket: RateBucket, now: int) -> bool:
    """Admit one start at ``now`` if the limit allows it (updating ``bucket``)."""
    if next_start_at(limit, bucket, now) > now:
        return False
    level = level_at(limit, bucket, now)
    bucket.tat = max(bucket.tat, now) + interval_us(limit, level)
    return True


def push_back(limit: RateLimit, bucket: RateBucket, now: int, retry_after_us: int | None) -> None:
    """A handler reported push-back: slow the limit down and hold it (see the note)."""
    level = min(MAX_SLOW_LEVEL, level_at(limit, bucket, now) + 1)
    interval = interval_us(limit, level)
    hold = interval if retry_after_us is None or retry_after_us <= 0 else retry_after_us
    bucket.slow_level = level
    bucket.slowed_at = now
    # The next start is admitted no earlier than now + hold, and no burst follows.
    bucket.tat = max(bucket.tat, now + hold + _tolerance(limit, interval))


class RateBook(ScopeBook[RateLimit]):
    """The configured rate limits (starts per period by scope)."""

    def __init__(self, limits: Iterable[RateLimit] = ()) -> None:
        super().__init__((limit.kind, limit.value, limit) for limit in limits)

    def keys_of(self, jobs: Sequence[Candidate]) -> list[ScopeKey]:
        """The rate-limited scopes of ``jobs``, sorted."""
        return sorted({key for job in jobs for key, _ in self.scopes_of(job)})

    def admits(self, job: Candidate, buckets: dict[ScopeKey, RateBucket], now: int) -> bool:
        """Every rate limit of ``job`` admits a start at ``now``."""
        return all(
            next_start_at(limit, buckets.setdefault(key, RateBucket()), now) <= now
            for key, limit in self.scopes_of(job)
        )

    def charge(self, job: Candidate, buckets: dict[ScopeKey, RateBucket], now: int) -> None:
        """Count one start of ``job`` in each of its rate-limited scopes."""
        for key, limit in self.scopes_of(job):
            take(limit, buckets.setdefault(key, RateBucket()), now)

    def throttled(self, buckets: dict[ScopeKey, RateBucket], now: int) -> dict[ScopeKey, int]:
        """Scopes whose limit admits no start at ``now``, with when it next does."""
        out = {}
        for key, bucket in buckets.items():
            limit = self.limit_for(key)
            if limit is None:
                continue
            at = next_start_at(limit, bucket, now)
            if at > now:
                out[key] = at
        return out

    def exclusions(self, buckets: dict[ScopeKey, RateBucket], now: int) -> Exclusions:
        """Scopes whose limit admits no start now: acquisition skips their jobs."""
        out = Exclusions()
        for kind, value in self.throttled(buckets, now):
            add_exclusion(out, kind, value)
        return out


def merge_exclusions(a: Exclusions | None, b: Exclusions) -> Exclusions:
    if a is None:
        return b
    a.tenants |= b.tenants
    a.job_types |= b.job_types
    a.definitions |= b.definitions
    a.concurrency_keys |= b.concurrency_keys
    a.categories |= b.categories
    return a


def when_precise(us: int) -> str:
    """A time to the millisecond (rate limits admit starts within a second)."""
    return dt.datetime.fromtimestamp(us / 1e6, dt.UTC).isoformat(timespec="milliseconds")


def rate_limit_text(key: ScopeKey, limit: RateLimit) -> str:
    """How a message names a rate limit: "job type send-email (10 per 1s, burst 10)"."""
    period = limit.period_ms / 1000
    return f"{limit_scope_text(*key)} ({limit.starts} per {period:g}s, burst {limit.burst})"


def rate_book_of(rows: Iterable[RateLimitRow]) -> RateBook:
    """The rate limits in stored rows (wfj_rate_limits)."""
    return RateBook(
        RateLimit(LimitKind(r.kind), r.value, r.starts, r.period_ms, r.burst) for r in rows
    )


__all__ = [
    "MAX_SLOW_LEVEL",
    "RECOVERY_PERIODS",
    "RateBook",
    "RateBucket",
    "interval_us",
    "next_start_at",
    "push_back",
    "rate_book_of",
    "rate_limit_text",
    "take",
]
