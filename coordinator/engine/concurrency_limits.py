"""Concurrency limits: never more RUNNING jobs in a scope than its limit.

A limit names a scope kind (tenant, job type, definition, concurrency key,
category: its number as text) and
a value, or ``"*"`` for "each value of that kind". A specific value's limit
replaces the wildcard for that value. Limits hold cluster-wide: the store
counts running jobs and leases inside one transaction that holds an advisory
lock per limited scope it touches, so two replicas cannot both fill the last
slot. Before reading candidates, full scopes are excluded so a saturated
scope's backlog cannot crowd out jobs that could run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Generic, TypeVar

from coordinator.model import Candidate, ConcurrencyLimit, Exclusions, LimitKind, scope_text
from coordinator.store.rows import ConcurrencyLimitRow

ScopeKey = tuple[int, str]
# What a book holds per scope: a concurrency limit's count, a rate limit.
V = TypeVar("V")

WILDCARD = "*"


def scope_value(kind: LimitKind, job: Candidate) -> str | None:
    """The value of ``job`` in scopes of ``kind``, as the store's
    ``LIMIT_COLUMNS`` expression for that kind reads it from the job row."""
    if kind == LimitKind.TENANT:
        return job.tenant_id
    if kind == LimitKind.JOB_TYPE:
        return job.job_type
    if kind == LimitKind.DEFINITION:
        return job.definition_id
    if kind == LimitKind.CATEGORY:
        return str(int(job.category))
    return job.concurrency_key


def limit_scope_text(kind: int, value: str) -> str:
    """How messages name a limited scope: "job type send-email", "category integration"."""
    return scope_text(LimitKind(kind), value)


class ScopeBook(Generic[V]):
    """Settings by limited scope: a value's own, else its kind's wildcard
    (``"*"``), answering which limited scopes a job falls in. Concurrency
    limits (``LimitBook``) and rate limits (``RateBook``, rate_limits.py) are both one."""

    def __init__(self, entries: Iterable[tuple[int, str, V]] = ()) -> None:
        self._exact: dict[ScopeKey, V] = {}
        self._wildcard: dict[int, V] = {}
        for kind, value, setting in entries:
            if value == WILDCARD:
                self._wildcard[int(kind)] = setting
            else:
                self._exact[(int(kind), value)] = setting
        self.kinds = sorted({k for k, _ in self._exact} | set(self._wildcard))

    def __bool__(self) -> bool:
        return bool(self._exact or self._wildcard)

    def limit_for(self, key: ScopeKey) -> V | None:
        exact = self._exact.get(key)
        return exact if exact is not None else self._wildcard.get(key[0])

    def scopes_of(self, job: Candidate) -> list[tuple[ScopeKey, V]]:
        """Every limited scope ``job`` belongs to, with its limit."""
        out = []
        for kind in self.kinds:
            value = scope_value(LimitKind(kind), job)
            if value is None:
                continue
            limit = self.limit_for((kind, value))
            if limit is not None:
                out.append(((kind, value), limit))
        return out


class LimitBook(ScopeBook[int]):
    """The configured concurrency limits (most RUNNING jobs by scope)."""

    def __init__(self, limits: Iterable[ConcurrencyLimit] = ()) -> None:
        super().__init__((limit.kind, limit.value, limit.max_running) for limit in limits)

    def lock_keys(self, jobs: Sequence[Candidate]) -> list[str]:
        """Advisory-lock names for the limited scopes of ``jobs``, sorted (no deadlocks)."""
        keys = {f"wfj_limit:{k}:{v}" for job in jobs for (k, v), _ in self.scopes_of(job)}
        return sorted(keys)

    def fit(self, jobs: Sequence[Candidate], running: dict[ScopeKey, int]) -> list[Candidate]:
        """The jobs, in order, that fit under every limit given ``running`` counts."""
        counts = dict(running)
        allowed = []
        for job in jobs:
            scopes = self.scopes_of(job)
            if all(counts.get(key, 0) < limit for key, limit in scopes):
                for key, _ in scopes:
                    counts[key] = counts.get(key, 0) + 1
                allowed.append(job)
        return allowed

    def exclusions(self, running: dict[ScopeKey, int]) -> Exclusions:
        """Scopes already at their limit."""
        out = Exclusions()
        for key, count in running.items():
            limit = self.limit_for(key)
            if limit is not None and count >= limit:
                add_exclusion(out, *key)
        return out


def add_exclusion(out: Exclusions, kind: int, value: str) -> None:
    """Leave scope (``kind``, ``value``) out of the candidates."""
    if kind == int(LimitKind.TENANT):
        out.tenants.add(value)
    elif kind == int(LimitKind.JOB_TYPE):
        out.job_types.add(value)
    elif kind == int(LimitKind.DEFINITION):
        out.definitions.add(value)
    elif kind == int(LimitKind.CONCURRENCY_KEY):
        out.concurrency_keys.add(value)
    else:
        out.categories.add(int(value))


def limit_book_of(rows: Iterable[ConcurrencyLimitRow]) -> LimitBook:
    """The limits in stored rows (wfj_concurrency_limits)."""
    return LimitBook(ConcurrencyLimit(LimitKind(r.kind), r.value, r.max_running) for r in rows)
