"""The engine: lifecycle and wiring of the rules of enqueue, acquisition,
leases, retries and pauses.

Design note. Each concept is an object of its own module that owns its state
and is handed, when it is built here, what it needs (the store and its runner,
the clock, the dispatcher, the objects of other concepts):

- ``LimitSettings`` (limit_settings.py): concurrency and rate limits and job
  type defaults as set, listed and loaded; ``Weights`` (weights.py) the
  fair-share weights; ``Pauses`` (pauses.py) pauses by scope;
- ``Acquisition`` (acquisition.py) leases jobs and books every lease; the
  ``Dispatcher`` (dispatch.py) holds the sessions and calls it;
- ``Attempts`` (attempts.py), the one path of an ended attempt;
- ``Enqueue`` (enqueue.py), ``Outcomes`` (outcomes.py), ``Reads`` (reads.py),
  ``Operations`` (operations.py: operator actions, drain, stats),
  ``JobGroups`` (groups.py), ``JobExplainer`` (explain.py) and ``Scaling``
  (scaling.py: the backlog KEDA, GetStats and the gauges read).

The API layer calls the engine's operations (each one a concept's method,
named on the engine below) with domain values; they validate, decide and call
the store's named queries through the store runner so the event loop never
blocks on the database. No concept module imports this one; the chores
(coordinator/chores, started after the engine and stopped before it) are
built from it by their supervisor. This module also starts and stops the
engine and opens and closes worker sessions.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Collection
from typing import Any

from coordinator.clock import Clock, DatabaseClock, SystemClock
from coordinator.engine.acquisition import Acquisition
from coordinator.engine.attempts import Attempts
from coordinator.engine.concurrency_limits import LimitBook
from coordinator.engine.config import ChoreHooks, EngineConfig
from coordinator.engine.dispatch import Dispatcher
from coordinator.engine.enqueue import Enqueue
from coordinator.engine.events import EventHub
from coordinator.engine.explain import JobExplainer
from coordinator.engine.fairness import FairScheduler
from coordinator.engine.groups import JobGroups
from coordinator.engine.limit_settings import LimitSettings
from coordinator.engine.operations import Operations
from coordinator.engine.outcomes import LeaseAnswer, OutcomeResult, Outcomes
from coordinator.engine.pauses import Pauses
from coordinator.engine.rate_limits import RateBook
from coordinator.engine.reads import ListPage, Reads
from coordinator.engine.runner import StoreRunner
from coordinator.engine.scaling import Scaling
from coordinator.engine.sessions import WorkerSession
from coordinator.engine.set_aside import SetAsideBook
from coordinator.engine.weights import Weights
from coordinator.errors import InvalidArgument
from coordinator.ids import new_id
from coordinator.model import JobTypeDefaults
from coordinator.store import Store
from coordinator.telemetry.hooks import NO_TELEMETRY, EngineTelemetry

log = logging.getLogger(__name__)


class Engine:
    """Owns the store, the dispatcher and the concept objects, and wires them;
    the API calls its operations, the chores run on it."""

    def __init__(
        self,
        store: Store,
        config: EngineConfig | None = None,
        clock: Clock | None = None,
        coordinator_id: str | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.config = config = config or EngineConfig()
        if clock is None and store.capabilities.database_clock:
            # Replicas keep the database's time, not their hosts' (docs/design.md).
            clock = DatabaseClock(store.database_time_us)
        self.clock = clock = clock or SystemClock()
        # Every store call of the engine, its chores and operator actions runs here.
        most = store.capabilities.max_store_threads
        threads = min(most, config.store_threads) if most else config.store_threads
        self.run_store = run_store = StoreRunner(threads)
        self.coordinator_id = coordinator_id or new_id()
        # Draws the backoff jitter of every retry decision.
        self.rng = rng or random.Random()
        self.fair = FairScheduler()
        # Set by the chore supervisor (coordinator/chores); no-ops without it.
        self.hooks = ChoreHooks()
        # Metrics and spans; replaced by coordinator.telemetry when configured
        # (the concepts read it through ``telemetry`` below, so a replacement holds).
        self.telemetry: EngineTelemetry = NO_TELEMETRY

        def telemetry() -> EngineTelemetry:
            return self.telemetry

        # Limits, job type defaults and weights: set, listed, loaded (limit_settings.py).
        self.limit_settings = LimitSettings(
            store=store,
            run_store=run_store,
            clock=clock,
            fair=self.fair,
            reloaded=lambda: self.dispatcher.wake(),
            max_string_length=config.max_string_length,
        )
        # Leases jobs, and books every lease however it was granted (acquisition.py).
        self.acquisition = Acquisition(
            store=store,
            run_store=run_store,
            fair=self.fair,
            settings=self.limit_settings,
            hooks=self.hooks,
            attempts=lambda: self.attempts,
            telemetry=telemetry,
            default_lease_ms=config.default_lease_ms,
        )
        self.dispatcher = Dispatcher(
            clock=clock,
            acquisition=self.acquisition,
            acquire_batch_max=config.acquire_batch_max,
            idle_poll_s=config.idle_poll_s,
        )
        # Rows the chores and outcome reports could not process (see set_aside.py).
        self.set_aside = SetAsideBook(lambda chore, n: self.telemetry.rows_set_aside(chore, n))
        # The one path for "an attempt ended" (attempts.py).
        self.attempts = Attempts(
            store=store,
            run_store=run_store,
            dispatcher=self.dispatcher,
            set_aside=self.set_aside,
            telemetry=telemetry,
            concurrency_limited=lambda: bool(self.limit_settings.limits),
            now=clock.now_us,
        )
        self._listener: Any = None
        # Watchers of the job event log, woken by the store's commits (events.py).
        self.events = EventHub(
            store,
            run_store,
            config.events,
            notify_replicas=store.capabilities.listen_notify,
        )
        store.add_event_listener(self.events.on_store_events)
        self.reads = Reads(store=store, run_store=run_store, waiters=self.attempts.waiters)
        self.pauses = Pauses(
            store=store, run_store=run_store, clock=clock, dispatcher=self.dispatcher
        )
        self.weights = Weights(
            store=store, run_store=run_store, fair=self.fair, settings=self.limit_settings
        )
        self.enqueues = Enqueue(
            config=config,
            clock=clock,
            store=store,
            run_store=run_store,
            dispatcher=self.dispatcher,
            acquisition=self.acquisition,
            attempts=self.attempts,
            settings=self.limit_settings,
            reads=self.reads,
            telemetry=telemetry,
        )
        self.outcomes = Outcomes(
            config=config,
            clock=clock,
            store=store,
            run_store=run_store,
            dispatcher=self.dispatcher,
            attempts=self.attempts,
            settings=self.limit_settings,
            rng=self.rng,
        )
        # Operator actions; the drain state (operations.py).
        self.ops = Operations(
            store=store,
            run_store=run_store,
            clock=clock,
            dispatcher=self.dispatcher,
            attempts=self.attempts,
            hooks=self.hooks,
            coordinator_id=self.coordinator_id,
            config=config.operations,
        )
        self.groups = JobGroups(
            store=store,
            run_store=run_store,
            clock=clock,
            dispatcher=self.dispatcher,
            enqueue=self.enqueues,
            telemetry=telemetry,
        )
        # The backlog KEDA, GetStats and the gauges read (scaling.py).
        self.scaling = Scaling(
            store=store,
            run_store=run_store,
            clock=clock,
            settings=self.limit_settings,
            operations=self.ops,
        )
        self.explainer = JobExplainer(
            store=store,
            run_store=run_store,
            clock=clock,
            reads=self.reads,
            settings=self.limit_settings,
            acquisition=self.acquisition,
            operations=self.ops,
            fair=self.fair,
        )
        # The operations the API calls, each owned by its concept.
        self.ping_store = self.reads.ping_store
        self.job_tenants = self.reads.job_tenants
        self.get_job = self.reads.get_job
        self.list_jobs = self.reads.list_jobs
        self.wait_for_finish = self.reads.wait_for_finish
        self.prepare = self.enqueues.prepare
        self.enqueue = self.enqueues.enqueue
        self.enqueue_unique = self.enqueues.enqueue_unique
        self.enqueue_tick = self.enqueues.enqueue_tick
        self.enqueue_one = self.enqueues.enqueue_one
        self.enqueue_inline = self.enqueues.enqueue_inline
        self.heartbeat = self.outcomes.heartbeat
        self.report = self.outcomes.report
        self.report_each = self.outcomes.report_each
        self.report_one = self.outcomes.report_one
        self.pause = self.pauses.pause
        self.unpause = self.pauses.unpause
        self.wake_at_pause_expiries = self.pauses.wake_at_pause_expiries
        self.list_pauses = self.pauses.list_pauses
        self.set_tenant_weight = self.weights.set_tenant_weight
        self.list_tenant_weights = self.weights.list_tenant_weights
        self.set_category_weight = self.weights.set_category_weight
        self.remove_category_weight = self.weights.remove_category_weight
        self.list_category_weights = self.weights.list_category_weights
        self.set_job_type_defaults = self.limit_settings.set_job_type_defaults
        self.set_limit = self.limit_settings.set_limit
        self.set_rate_limit = self.limit_settings.set_rate_limit
        self.remove_rate_limit = self.limit_settings.remove_rate_limit
        self.list_rate_limits = self.limit_settings.list_rate_limits
        self.list_limits = self.limit_settings.list_limits
        self.reload_limits = self.limit_settings.reload_limits
        self._loop: asyncio.AbstractEventLoop | None = None
        # Hand-backs of jobs a closed stream never sent (awaited by stop).
        self._handing_back: set[asyncio.Task[None]] = set()
        self._started = False

    @property
    def limits(self) -> LimitBook:
        """Concurrency limits as this replica last loaded them."""
        return self.limit_settings.limits

    @property
    def rates(self) -> RateBook:
        """Rate limits as this replica last loaded them."""
        return self.limit_settings.rates

    @property
    def type_defaults(self) -> dict[str, JobTypeDefaults]:
        """Job type defaults as this replica last loaded them."""
        return self.limit_settings.type_defaults

    @property
    def default_tenant_weight(self) -> int:
        return self.weights.default_tenant_weight

    async def start(self) -> None:
        """Check the schema, sync the clock, load tenant weights, limits and the
        cluster drain flag, start the wake listener, read the pause expiries to
        wake at, and start the dispatcher. Idempotent.

        The chores run on the engine: their supervisor starts after.
        """
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        self.events.start(self._loop)
        await self.run_store(self.store.check_schema)
        if isinstance(self.clock, DatabaseClock):
            # Before anything reads the clock; the clock-sync chore keeps it synced.
            await self.run_store(self.clock.sync)
        self.fair.set_weights(await self.run_store(self.store.tenant_weights))
        await self.run_store(self.store.limit_gate_ensure, self.clock.now_us())
        await self.reload_limits()
        if self.store.capabilities.listen_notify:
            from coordinator.store.notify import WakeListener

            self._listener = WakeListener(
                self.store.session_url,
                self._on_remote_wake,
                self.events.on_remote_events,
                bounds=self.store.bounds,
            )
            self._listener.start()
        if not self.store.capabilities.listen_notify:
            # A group's completion is stored by whatever ends its last member.
            loop = self._loop

            def wake_on_completion() -> None:
                loop.call_soon_threadsafe(self.dispatcher.wake)

            self.store.set_completion_listener(wake_on_completion)
        await self.ops.start()
        await self.wake_at_pause_expiries()
        self.dispatcher.start()
        self._started = True

    async def stop(self) -> None:
        """Stop the dispatcher, the listener, then release the store. Idempotent.

        The chores run on the engine: their supervisor stops first.
        """
        if not self._started:
            self.run_store.shutdown()
            await self.store.loop_close()
            self.store.dispose()
            return
        self._started = False
        await self.dispatcher.stop()
        if self._handing_back:
            await asyncio.gather(*self._handing_back, return_exceptions=True)
        await self.events.stop()
        if self._listener is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._listener.stop)
            self._listener = None
        self.run_store.shutdown()
        await self.store.loop_close()
        self.store.dispose()

    def _on_remote_wake(self, due_at: int) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if due_at == -2:
            loop.call_soon_threadsafe(self.hooks.cluster_flags_changed)
        elif due_at < 0:
            asyncio.run_coroutine_threadsafe(self.reload_limits(), loop)
        else:
            loop.call_soon_threadsafe(self.dispatcher.wake, due_at)

    def open_session(self, session: WorkerSession) -> None:
        if not session.job_types:
            raise InvalidArgument("the worker must serve at least one job type")
        session.connected_at = session.last_heartbeat_at = self.clock.now_us()
        self.dispatcher.add_session(session)
        self.ops.session_opened(session)

    def close_session(self, session: WorkerSession) -> None:
        """The stream ended: forget the session, and hand back at once the jobs
        it never sent (queued, or in a message not yet handed to gRPC), which
        would otherwise wait out their lease. Jobs already sent stay leased:
        the worker may be running them and reports through unary calls."""
        self.dispatcher.remove_session(session)
        self.ops.session_closed(session)
        unsent = session.take_unsent()
        if unsent and self._loop is not None and not self._loop.is_closed():
            task = self._loop.create_task(self._hand_back(session, unsent))
            self._handing_back.add(task)
            task.add_done_callback(self._handing_back.discard)

    async def _hand_back(self, session: WorkerSession, refs: list[tuple[str, str]]) -> None:
        log.info(
            "handing back %d job(s) leased to worker %r that its stream ended before sending",
            len(refs),
            session.worker_id,
        )
        try:
            await self.attempts.hand_back(refs, "the worker's stream ended before the job was sent")
        except Exception:  # noqa: BLE001 - their leases expire and the reaper retries them
            log.warning(
                "could not hand back %d unsent job(s) of worker %r; their leases will expire",
                len(refs),
                session.worker_id,
                exc_info=True,
            )

    async def end_session(
        self,
        session: WorkerSession,
        error: Exception | None,
        reason: str,
        keep: Collection[str] = (),
    ) -> int:
        """End a stream from the coordinator's side.

        Nothing more is sent on it (queued batches included) and its call ends
        with ``error`` (cleanly when None). The jobs delivered on it, but those
        in ``keep``, are handed back at once with ``reason``, their attempt
        refunded. Returns how many were handed back.
        """
        session.close(error)
        refs = [
            (job_id, token) for job_id, token in session.in_flight.items() if job_id not in keep
        ]
        self.close_session(session)
        if refs:
            await self.attempts.hand_back(refs, reason)
        return len(refs)

    @property
    def draining(self) -> bool:
        """True while this coordinator (or the whole cluster) is drained."""
        return self.ops.draining

    def grant(self, session: WorkerSession, credits: int) -> None:
        if credits < 0:
            raise InvalidArgument(f"credits must be >= 0, got {credits}")
        self.dispatcher.grant(session, credits)


__all__ = ["Engine", "EngineConfig", "LeaseAnswer", "ListPage", "OutcomeResult"]
