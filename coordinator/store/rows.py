"""Rows that store queries answer with as stored: SQLAlchemy rows read by
column name. Each protocol names the columns its readers use, so the queries
that return them are typed without copying every row into a new value.

Queries whose answers the engine builds on (``JobRow``, ``PauseRecord``,
``GroupRow``) answer with values of ``coordinator/model.py`` instead.
"""

from __future__ import annotations

from typing import Protocol


class ConcurrencyLimitRow(Protocol):
    """A stored concurrency limit (``wfj_concurrency_limits``; ``limit_list``)."""

    @property
    def kind(self) -> int: ...
    @property
    def value(self) -> str: ...
    @property
    def max_running(self) -> int: ...


class RateLimitRow(Protocol):
    """A stored rate limit (``wfj_rate_limits``; ``rate_limit_list``)."""

    @property
    def kind(self) -> int: ...
    @property
    def value(self) -> str: ...
    @property
    def starts(self) -> int: ...
    @property
    def period_ms(self) -> int: ...
    @property
    def burst(self) -> int: ...


class JobTypeDefaultsRow(Protocol):
    """A job type's stored defaults (``wfj_job_type_defaults``; ``job_type_defaults_list``)."""

    @property
    def job_type(self) -> str: ...
    @property
    def retry_policy(self) -> str | None: ...
    @property
    def execution_timeout_ms(self) -> int | None: ...
    @property
    def heartbeat_timeout_ms(self) -> int | None: ...
    @property
    def ordering_failure(self) -> int | None: ...


class WorkerRow(Protocol):
    """A worker registry row (``wfj_workers``; ``worker_list``)."""

    @property
    def coordinator_id(self) -> str: ...
    @property
    def worker_id(self) -> str: ...
    @property
    def hostname(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def sdk_version(self) -> str: ...
    # JSON list of job types.
    @property
    def job_types(self) -> str: ...
    @property
    def slots(self) -> int: ...
    @property
    def connected_at(self) -> int: ...
    @property
    def last_seen_at(self) -> int: ...
    @property
    def draining(self) -> bool: ...
    # JSON list of the credential's tenants; None: every tenant.
    @property
    def tenants(self) -> str | None: ...


class StatusCountRow(Protocol):
    """Jobs of one tenant and type in one status (``job_count_by_status``)."""

    @property
    def tenant_id(self) -> str: ...
    @property
    def job_type(self) -> str: ...
    @property
    def status(self) -> int: ...
    @property
    def n(self) -> int: ...


class BacklogRow(Protocol):
    """Due PENDING jobs of one tenant, type and category (``job_backlog_by_tenant_type``)."""

    @property
    def tenant_id(self) -> str: ...
    @property
    def job_type(self) -> str: ...
    @property
    def category(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def oldest_due_at(self) -> int: ...


class OrderingBlockerRow(Protocol):
    """The job holding another back in its ordering key (``job_ordering_blocker``)."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> int: ...


__all__ = [
    "BacklogRow",
    "ConcurrencyLimitRow",
    "JobTypeDefaultsRow",
    "OrderingBlockerRow",
    "RateLimitRow",
    "StatusCountRow",
    "WorkerRow",
]
