"""In-flight audit: forgets delivered jobs whose attempt ended elsewhere.

Each coordinator remembers, per worker stream, the jobs it delivered until
their attempt ends (``ListWorkers`` shows them; a stream ended by the
coordinator hands them back). An outcome reported through this coordinator
forgets its job at once. One reported through another replica (round-robin
load balancing) cannot, so this chore asks the store which of the remembered
(job id, lease token) pairs still hold their lease, and forgets the rest.

It runs every ``interval_s``, and sooner when a stream's entries grow past
twice what the last audit left (at least ``floor``): the maps stay within a
small multiple of what is really in flight, for the life of the stream,
while a stream with many genuinely running jobs is not audited on every
delivery. One run at a time; forgetting is token-guarded, so a job delivered
again meanwhile keeps its new entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.chores.loop import Chore

if TYPE_CHECKING:
    from coordinator.clock import Clock
    from coordinator.engine.dispatch import Dispatcher
    from coordinator.engine.runner import StoreRunner
    from coordinator.store import Store


@dataclass
class InFlightAuditConfig:
    # Longest time between audits while jobs are remembered.
    interval_s: float = 10.0
    # A stream's entries may reach max(floor, 2 x what the last audit left)
    # before an audit runs early.
    floor: int = 64


@dataclass
class InFlightAuditResult:
    # In-flight entries checked against the store.
    checked: int
    # Entries forgotten: their attempt had ended elsewhere.
    forgotten: int


class InFlightAudit(Chore[InFlightAuditResult]):
    name = "in-flight-audit"

    def __init__(
        self,
        config: InFlightAuditConfig,
        *,
        clock: Clock,
        store: Store,
        run_store: StoreRunner,
        dispatcher: Dispatcher,
    ) -> None:
        super().__init__(clock)
        self.config = config
        self._store = store
        self._run_store = run_store
        # Holds the in-flight entries this chore checks and forgets.
        self._dispatcher = dispatcher

    def note_growth(self, entries: int, after_last_audit: int) -> None:
        """A stream's entries grew to ``entries`` (the last audit left ``after_last_audit``)."""
        if entries > max(self.config.floor, 2 * after_last_audit):
            self.wake()

    async def run_once(self, now: int | None = None) -> InFlightAuditResult:
        refs = self._dispatcher.in_flight_refs()
        if not refs:
            return InFlightAuditResult(0, 0)
        held = await self._run_store(self._store.lease_held_many, refs)
        ended = [ref for ref in refs if ref[0] not in held]
        self._dispatcher.forget(ended)
        self._dispatcher.mark_audited()
        return InFlightAuditResult(len(refs), len(ended))

    def delay_after(self, result: InFlightAuditResult | None) -> float:
        return self.config.interval_s

    def describe(self, result: InFlightAuditResult) -> str:
        return ""


__all__ = ["InFlightAudit", "InFlightAuditConfig", "InFlightAuditResult"]
