"""The engine's state and settings, shared by the modules of its concepts.

Design note. ``Engine`` is assembled from one class per concept, each in its
own module and each built on ``EngineCore``: ``enqueue.py`` (the enqueue
paths, group commit, direct dispatch offers), ``acquisition.py`` (what the
dispatcher calls), ``outcomes.py`` (outcomes and heartbeats), ``pauses.py``
(pauses and tenant weights), ``limit_settings.py`` (concurrency limits and job
type defaults), ``reads.py`` (reads, waits, stats); ``engine.py`` holds the
lifecycle and the wiring. Operator actions (``operations.py``, built by the
engine) are typed on these classes, never on ``engine.py``, so no module of the
engine imports ``engine.py`` back; the chores (``coordinator/chores``) use the
engine, never the reverse.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from coordinator.clock import Clock
from coordinator.engine.admission import Admission
from coordinator.engine.attempts import Attempts
from coordinator.engine.dispatch import Dispatcher
from coordinator.engine.events import EventHub, EventWatchConfig
from coordinator.engine.fairness import FairScheduler
from coordinator.engine.limits import LimitBook
from coordinator.engine.rates import RateBook
from coordinator.engine.runner import StoreRunner
from coordinator.engine.set_aside import SetAsideBook
from coordinator.errors import InvalidArgument
from coordinator.ids import is_valid_id
from coordinator.model import (
    Candidate,
    Claim,
    ConcurrencyLimit,
    JobRow,
    JobTypeDefaults,
    LimitKind,
    OrderingFailure,
    RateLimit,
    RetryPolicy,
)
from coordinator.store import Store
from coordinator.telemetry.hooks import EngineTelemetry

log = logging.getLogger(__name__)


@dataclass
class OperationsConfig:
    """Settings of the operator actions; every field has a default."""

    # Worker registry rows not refreshed for this long are treated as gone
    # (their coordinator died): not listed, and deleted by the cluster sync.
    stale_after_s: float = 60.0


@dataclass
class EngineConfig:
    """Engine settings; every field has a production default."""

    # Lease length when a job sets no heartbeat timeout.
    default_lease_ms: int = 30_000
    # Largest payload accepted at enqueue.
    max_payload_bytes: int = 1024 * 1024
    # Largest EnqueueBatch / ReportOutcomes / Heartbeat.
    max_batch_size: int = 5_000
    # Longest accepted identifier or job type.
    max_string_length: int = 512
    # Most jobs leased by one acquisition statement.
    acquire_batch_max: int = 500
    # Re-check for eligible work this often while workers wait with credit.
    idle_poll_s: float = 15.0
    # Operator actions: drain, the cluster's worker list.
    operations: OperationsConfig = field(default_factory=OperationsConfig)
    # Threads running store calls (the SQLite store uses one).
    store_threads: int = 8
    # Watchers of the job event log (WatchJobEvents; engine/events.py).
    events: EventWatchConfig = field(default_factory=EventWatchConfig)


def _ignore(*_: Any) -> None:
    return None


@dataclass
class ChoreHooks:
    """What the engine tells the background chores (``coordinator/chores``).

    The engine imports no chore: the chore supervisor sets these when it is
    built; without it they do nothing.
    """

    # A lease was granted that expires at this time (the lease reaper re-arms).
    lease_expires: Callable[[int], None] = _ignore
    # An attempt was leased that must end by this time (execution timeouts re-arm).
    execution_deadline: Callable[[int], None] = _ignore
    # The local workers or their drain state changed (the worker registry is rewritten).
    workers_changed: Callable[[], None] = _ignore
    # Another replica changed a cluster flag (the flags are read now).
    cluster_flags_changed: Callable[[], None] = _ignore


class EngineCore:
    """The engine's state, shared by the modules of its concepts.

    ``Engine`` (engine.py) builds it; each concept module (enqueue,
    acquisition, outcomes, pauses, limit settings, reads) adds its methods on
    top, and operator actions and chores reach the engine through it.
    """

    store: Store
    config: EngineConfig
    # The engine's time (the database's on PostgreSQL).
    clock: Clock
    # Every store call of the engine, its chores and operator actions runs here.
    run_store: StoreRunner
    coordinator_id: str
    # Draws the backoff jitter of every retry decision.
    rng: random.Random
    fair: FairScheduler
    dispatcher: Dispatcher
    # What the engine tells the chores; set by their supervisor.
    hooks: ChoreHooks
    # Metrics and spans; replaced by coordinator.telemetry when configured.
    telemetry: EngineTelemetry
    # Rows the chores and outcome reports could not process (see set_aside.py).
    set_aside: SetAsideBook
    # The one path for "an attempt ended" (attempts.py).
    attempts: Attempts
    # Watchers of the job event log (events.py).
    events: EventHub
    limits: LimitBook
    # True once this replica enqueued or leased a job with an ordering key: from
    # then on every ended attempt wakes acquisition here and on every replica, as
    # under concurrency limits (it may free the head of a key a job waits behind).
    ordered_work_seen: bool
    # Rate limits as this replica last loaded them (the claim reads them as stored).
    rates: RateBook
    type_defaults: dict[str, JobTypeDefaults]

    async def reload_limits(self) -> None:
        """Re-read concurrency limits, job type defaults and fair-share weights
        (after a change here or on another replica)."""
        self.limits = book_of(await self.run_store(self.store.limit_list))
        self.rates = rate_book_of(await self.run_store(self.store.rate_limit_list))
        self.type_defaults = {
            r.job_type: JobTypeDefaults(
                RetryPolicy.from_json(r.retry_policy),
                r.execution_timeout_ms,
                r.heartbeat_timeout_ms,
                OrderingFailure(r.ordering_failure) if r.ordering_failure else None,
            )
            for r in await self.run_store(self.store.job_type_defaults_list)
        }
        self.fair.set_weights(await self.run_store(self.store.tenant_weights))
        self.fair.set_category_weights(await self.run_store(self.store.category_weights))
        self.dispatcher.wake()

    def _leased(self, rows: Sequence[JobRow], now: int) -> None:
        """Bookkeeping for jobs just leased, however they were leased: the
        reaper and the timeout chore learn their deadlines (``hooks``), metrics count them."""
        if not rows:
            return
        if not self.ordered_work_seen and any(r.ordering_key is not None for r in rows):
            self.ordered_work_seen = True
        self.hooks.lease_expires(min(r.lease_expires_at or now for r in rows))
        deadlines = [now + r.execution_timeout_ms * 1000 for r in rows if r.execution_timeout_ms]
        if deadlines:
            self.hooks.execution_deadline(min(deadlines))
        self.telemetry.leased(rows, now)

    def _check_refs(self, refs: Sequence[tuple[str, str]]) -> None:
        if len(refs) > self.config.max_batch_size:
            raise InvalidArgument(
                f"{len(refs)} entries exceed the batch limit of {self.config.max_batch_size}"
            )
        for job_id, token in refs:
            check_id(job_id)
            if not token:
                raise InvalidArgument(f"lease_token is required for job {job_id}")


def book_of(rows: Iterable[Any]) -> LimitBook:
    """The limits in stored rows (wfj_concurrency_limits)."""
    return LimitBook(ConcurrencyLimit(LimitKind(r.kind), r.value, r.max_running) for r in rows)


def rate_book_of(rows: Iterable[Any]) -> RateBook:
    """The rate limits in stored rows (wfj_rate_limits)."""
    return RateBook(
        RateLimit(LimitKind(r.kind), r.value, r.starts, r.period_ms, r.burst) for r in rows
    )


def admission_for(
    claims: Sequence[Claim],
    picks: Sequence[Candidate],
    now: int,
    limit_rows: Sequence[Any],
    rate_rows: Sequence[Any],
) -> Admission:
    """The admission of ``claims`` under the limits as stored (read by the claim)."""
    return Admission(book_of(limit_rows), claims, picks, rate_book_of(rate_rows), now)


def check_id(job_id: str) -> None:
    if not job_id:
        raise InvalidArgument("job_id is required")
    if not is_valid_id(job_id):
        raise InvalidArgument(
            f"job_id {job_id[:80]!r} is malformed; job ids are lower-case UUIDs "
            "like 0190b6e2-5c1a-7d3e-8f00-123456789abc"
        )


__all__ = [
    "ChoreHooks",
    "EngineConfig",
    "EngineCore",
    "OperationsConfig",
    "admission_for",
    "book_of",
    "rate_book_of",
    "check_id",
]
