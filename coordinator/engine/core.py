"""The engine's state and settings, shared by the modules of its concepts.

Design note. ``Engine`` is assembled from one class per concept, each in its
own module and each built on ``EngineCore``: ``enqueue.py`` (the enqueue
paths, group commit, direct dispatch offers), ``outcomes.py`` (outcomes and heartbeats), ``pauses.py``
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
from collections.abc import Sequence

from coordinator.clock import Clock
from coordinator.engine.acquisition import Acquisition
from coordinator.engine.attempts import Attempts
from coordinator.engine.config import ChoreHooks, EngineConfig
from coordinator.engine.dispatch import Dispatcher
from coordinator.engine.events import EventHub
from coordinator.engine.fairness import FairScheduler
from coordinator.engine.limits import LimitBook, limit_book_of
from coordinator.engine.rates import RateBook, rate_book_of
from coordinator.engine.runner import StoreRunner
from coordinator.engine.set_aside import SetAsideBook
from coordinator.engine.validation import check_id
from coordinator.errors import InvalidArgument
from coordinator.model import JobTypeDefaults, OrderingFailure, RetryPolicy
from coordinator.store import Store
from coordinator.telemetry.hooks import EngineTelemetry

log = logging.getLogger(__name__)


class EngineCore:
    """The engine's state, shared by the modules of its concepts.

    ``Engine`` (engine.py) builds it; each concept module (enqueue,
    outcomes, pauses, limit settings, reads) adds its methods on
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
    # Leases jobs, and books every lease however it was granted (acquisition.py).
    acquisition: Acquisition
    limits: LimitBook
    # Rate limits as this replica last loaded them (the claim reads them as stored).
    rates: RateBook
    type_defaults: dict[str, JobTypeDefaults]

    async def reload_limits(self) -> None:
        """Re-read concurrency limits, job type defaults and fair-share weights
        (after a change here or on another replica)."""
        self.limits = limit_book_of(await self.run_store(self.store.limit_list))
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

    def _check_refs(self, refs: Sequence[tuple[str, str]]) -> None:
        if len(refs) > self.config.max_batch_size:
            raise InvalidArgument(
                f"{len(refs)} entries exceed the batch limit of {self.config.max_batch_size}"
            )
        for job_id, token in refs:
            check_id(job_id)
            if not token:
                raise InvalidArgument(f"lease_token is required for job {job_id}")


__all__ = ["EngineCore"]
