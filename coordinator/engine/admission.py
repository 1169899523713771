"""Admission: which claims of one acquisition may start.

A claim is admitted when its job fits under every concurrency limit of its
scopes (concurrency_limits.py) and every rate limit of its scopes admits a start now
(rate_limits.py). The store builds the admission from the limits as stored, inside
the claim's transaction, and stores the rate buckets ``charge`` returns for
the jobs it actually leased.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from coordinator.engine.concurrency_limits import LimitBook, ScopeKey, limit_book_of
from coordinator.engine.rate_limits import RateBook, RateBucket, rate_book_of
from coordinator.model import Candidate, Claim
from coordinator.store.rows import ConcurrencyLimitRow, RateLimitRow


class Admission:
    """Admits the claims of one acquisition that fit under the limits: every
    concurrency limit and every rate limit (rate_limits.py) of their scopes."""

    def __init__(
        self,
        book: LimitBook,
        claims: Sequence[Claim],
        picks: Sequence[Candidate],
        rates: RateBook | None = None,
        now: int = 0,
    ) -> None:
        self._book = book
        self._rates = rates
        self._now = now
        self._claims = claims
        by_id = {p.id: p for p in picks}
        self._jobs = [by_id[c.job_id] for c in claims]
        self.rate_keys: list[ScopeKey] = rates.keys_of(self._jobs) if rates else []
        self.lock_keys = sorted(
            book.lock_keys(self._jobs) + [f"wfj_rate:{k}:{v}" for k, v in self.rate_keys]
        )
        self.kinds = book.kinds
        self._buckets: dict[ScopeKey, RateBucket] = {}
        # Rate-limited scopes that turned a claim away, with when they next admit one.
        self.throttled: dict[ScopeKey, int] = {}
        # Ids of the claims turned away for a rate limit.
        self.rate_refused: set[str] = set()

    @property
    def limited(self) -> bool:
        """Some claim falls in a limited scope (the store must count and lock)."""
        return bool(self.lock_keys)

    def admit(
        self,
        running: dict[ScopeKey, int],
        buckets: dict[ScopeKey, tuple[int, int, int]] | None = None,
    ) -> list[Claim]:
        """The claims that fit, given RUNNING counts and the stored rate buckets
        (``(tat, slow_level, slowed_at)`` by scope)."""
        self._buckets = {key: RateBucket(*row) for key, row in (buckets or {}).items()}
        if self._rates is None or not self.rate_keys:
            allowed = {job.id for job in self._book.fit(self._jobs, running)}
            return [c for c in self._claims if c.job_id in allowed]
        counts = dict(running)
        trial = {key: RateBucket(*b.as_row()) for key, b in self._buckets.items()}
        allowed = set()
        for job in self._jobs:
            scopes = self._book.scopes_of(job)
            if not all(counts.get(key, 0) < limit for key, limit in scopes):
                continue
            if not self._rates.admits(job, trial, self._now):
                self.rate_refused.add(job.id)
                continue
            for key, _ in scopes:
                counts[key] = counts.get(key, 0) + 1
            self._rates.charge(job, trial, self._now)
            allowed.add(job.id)
        self.throttled = self._rates.throttled(
            {k: v for k, v in trial.items() if k in self.rate_keys}, self._now
        )
        return [c for c in self._claims if c.job_id in allowed]

    def charge(self, leased: Collection[str]) -> dict[ScopeKey, tuple[int, int, int]]:
        """The rate buckets to store once the jobs ``leased`` (ids) have started:
        each takes a start from its scopes, in claim order. Admitted claims the
        store could not lease take nothing."""
        if self._rates is None or not self.rate_keys:
            return {}
        buckets = self._buckets
        for job in self._jobs:
            if job.id in leased:
                self._rates.charge(job, buckets, self._now)
        return {key: b.as_row() for key, b in buckets.items() if key in self.rate_keys}


def admission_for(
    claims: Sequence[Claim],
    picks: Sequence[Candidate],
    now: int,
    limit_rows: Sequence[ConcurrencyLimitRow],
    rate_rows: Sequence[RateLimitRow],
) -> Admission:
    """The admission of ``claims`` under the limits as stored (read by the claim)."""
    return Admission(limit_book_of(limit_rows), claims, picks, rate_book_of(rate_rows), now)
