"""The background chores and their supervisor.

Design note. Each chore is one module, whole: its config dataclass (a comment
on every field, defaults filled in), its decision rule, its store calls and a
``run_once(now) -> Result`` doing one bounded batch; all of them run in the
one loop of ``loop.py``, which logs a result only when it says something.
Chores depend on parts of the engine (its attempt path, its store runner, its
set-aside book, its operator actions) and the store, never the reverse: this
supervisor hands each chore the parts it uses, and what the engine has to tell a chore
(a lease granted, an execution deadline, the local workers changed, a cluster
flag changed elsewhere) goes through ``Engine.hooks``, which this supervisor
wires when it is built.

``serve`` starts the supervisor after the engine and stops it before the
engine. Start order (``ChoresConfig``'s field order), and stop in reverse,
each chore stopped before the next one stops:

1. ``clock-sync`` (PostgreSQL): the engine's clock stays on the database's
   (the engine synced it once at start, before anything read it);
2. ``cluster-sync``: this coordinator's workers in the registry, cluster flags
   applied; on stop it removes this coordinator's worker rows;
3. ``in-flight-audit``: forgets delivered jobs whose attempt ended elsewhere;
4. ``lease-reaper`` (one replica at a time): ends attempts whose lease expired;
5. ``execution-timeouts``: ends attempts past their execution timeout;
6. ``retention`` (one replica at a time): purges old finished jobs.

One replica at a time: on PostgreSQL each run of a ``leader_only`` chore takes
a transaction-scoped advisory lock in its store query, and a replica that does
not get it does nothing that run, so the chore runs on whichever replica holds
the lock for that run. A session-held leader lock would not survive a
transaction-mode connection pooler (docs/deployment.md); on SQLite one
coordinator owns the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from coordinator.chores.clock_sync import ClockSync, ClockSyncConfig
from coordinator.chores.cluster_sync import ClusterSync, ClusterSyncConfig
from coordinator.chores.execution_timeouts import ExecutionTimeouts, ExecutionTimeoutsConfig
from coordinator.chores.in_flight_audit import InFlightAudit, InFlightAuditConfig
from coordinator.chores.lease_reaper import LeaseReaper, LeaseReaperConfig
from coordinator.chores.loop import Chore
from coordinator.chores.retention import RetentionCleaner, RetentionConfig
from coordinator.clock import DatabaseClock

if TYPE_CHECKING:
    from coordinator.engine import Engine


@dataclass
class ChoresConfig:
    """Settings of every chore; every field has a production default.

    One field per chore, named like the chore's attribute on ``Chores``, in
    start order: ``Chores.in_order`` follows these fields.
    """

    # Re-measuring the offset to the database clock (PostgreSQL; coordinator/clock.py).
    clock_sync: ClockSyncConfig = field(default_factory=ClockSyncConfig)
    # Worker registry refresh and cluster flag polling.
    cluster_sync: ClusterSyncConfig = field(default_factory=ClusterSyncConfig)
    # Forgets delivered jobs whose attempt ended through another replica.
    in_flight_audit: InFlightAuditConfig = field(default_factory=InFlightAuditConfig)
    # Ends attempts whose lease expired.
    lease_reaper: LeaseReaperConfig = field(default_factory=LeaseReaperConfig)
    # Backstop for attempts running past their execution timeout.
    execution_timeouts: ExecutionTimeoutsConfig = field(default_factory=ExecutionTimeoutsConfig)
    # Purge of old finished jobs (default: each finished status kept 7 days).
    retention: RetentionConfig = field(default_factory=RetentionConfig)


class Chores:
    """Builds, wires, starts and stops the chores of one engine."""

    def __init__(self, engine: Engine, config: ChoresConfig | None = None) -> None:
        self.config = config or ChoresConfig()
        c = self.config
        self.clock_sync = (
            ClockSync(c.clock_sync, engine.clock, engine.run_store)
            if isinstance(engine.clock, DatabaseClock)
            else None
        )
        clock, store, run_store = engine.clock, engine.store, engine.run_store
        self.cluster_sync = ClusterSync(
            c.cluster_sync,
            clock=clock,
            store=store,
            run_store=run_store,
            operations=engine.ops,
            set_aside=engine.set_aside,
            coordinator_id=engine.coordinator_id,
        )
        self.in_flight_audit = InFlightAudit(
            c.in_flight_audit,
            clock=clock,
            store=store,
            run_store=run_store,
            dispatcher=engine.dispatcher,
        )
        self.lease_reaper = LeaseReaper(
            c.lease_reaper,
            clock=clock,
            store=store,
            run_store=run_store,
            attempts=engine.attempts,
            set_aside=engine.set_aside,
            rng=engine.rng,
            telemetry=lambda: engine.telemetry,
        )
        self.execution_timeouts = ExecutionTimeouts(
            c.execution_timeouts,
            clock=clock,
            store=store,
            run_store=run_store,
            attempts=engine.attempts,
            set_aside=engine.set_aside,
            rng=engine.rng,
        )
        self.retention = RetentionCleaner(
            c.retention,
            clock=clock,
            store=store,
            run_store=run_store,
            attempts=engine.attempts,
            dispatcher=engine.dispatcher,
        )
        hooks = engine.hooks
        hooks.lease_expires = self.lease_reaper.note_expiry
        hooks.execution_deadline = self.execution_timeouts.note_deadline
        hooks.workers_changed = self.cluster_sync.mark_dirty
        hooks.cluster_flags_changed = self.cluster_sync.wake
        engine.dispatcher.on_in_flight_growth = self.in_flight_audit.note_growth
        self._started = False

    @property
    def in_order(self) -> list[Chore[Any]]:
        """Every chore of this coordinator, in start order (``ChoresConfig``'s fields)."""
        chores: list[Chore[Any] | None] = [getattr(self, f.name) for f in fields(ChoresConfig)]
        return [chore for chore in chores if chore is not None]

    async def start(self) -> None:
        """Start every chore, in order (after the engine has started). Idempotent."""
        if self._started:
            return
        self._started = True
        for chore in self.in_order:
            chore.start()

    async def stop(self) -> None:
        """Stop every chore, in reverse order (before the engine stops).

        Idempotent; may be called before ``start``.
        """
        self._started = False
        for chore in reversed(self.in_order):
            await chore.stop()


__all__ = [
    "Chores",
    "ChoresConfig",
    "ClockSync",
    "ClusterSync",
    "ExecutionTimeouts",
    "InFlightAudit",
    "LeaseReaper",
    "RetentionCleaner",
]
