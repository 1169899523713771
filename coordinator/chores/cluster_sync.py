"""Cluster sync: the worker registry and cluster-wide flags, kept in the store.

Each coordinator knows its own workers (their AcquireJobs streams) in memory.
So that ``ListWorkers`` on any replica shows every worker, each coordinator
writes its workers to ``wfj_workers``: at once when one connects, leaves or
is drained or undrained (the chore is woken), and every ``refresh_s``
otherwise. Each write sets ``last_seen_at`` to now for every open stream: the
stream is alive (gRPC keepalive closes one whose peer is gone), whether or
not the worker sent anything. That time is the "last seen" ``ListWorkers``
shows on every replica, local workers included, so all replicas agree. Rows
not refreshed for ``stale_after_s`` belong to a coordinator that died and are
deleted; before that, once they have gone ``quiet_after_s`` without a rewrite,
``ListWorkers`` marks them stale. Heartbeats and credit grants do not write
here, so the registry costs one small write per coordinator per ``refresh_s``
however busy the workers are.

The same run reads ``wfj_cluster_flags`` (the cluster drain, and drain and
undrain requests for workers connected to this replica), so a flag set
through one replica reaches the others within ``sync_interval_s`` (at once
on PostgreSQL, where setting a flag notifies every replica). What a flag means
(drain state) is the engine's (``engine/operations.py``,
``Operations.apply_cluster_flags``); this chore reads, writes and clears the
rows. On stop it removes this coordinator's worker rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.chores.loop import Chore
from coordinator.clock import US_PER_SECOND

if TYPE_CHECKING:
    from coordinator.clock import Clock
    from coordinator.engine.operations import Operations
    from coordinator.engine.runner import StoreRunner
    from coordinator.engine.set_aside import SetAsideBook
    from coordinator.store import Store

log = logging.getLogger(__name__)

NAME = "cluster-sync"


@dataclass
class ClusterSyncConfig:
    # How often cluster flags are read when no NOTIFY arrives (a safety net: a
    # flag set on another replica is announced at once on PostgreSQL).
    sync_interval_s: float = 15.0
    # How often this coordinator's worker rows are rewritten when nothing changed.
    refresh_s: float = 15.0


@dataclass
class SyncResult:
    # Worker rows written (0 when the registry was not rewritten this run).
    written: int
    # Stale rows of dead coordinators removed.
    removed: int


class ClusterSync(Chore[SyncResult]):
    """Writes the worker registry and applies cluster flags; ``mark_dirty`` asks for a rewrite now."""

    name = NAME

    def __init__(
        self,
        config: ClusterSyncConfig,
        *,
        clock: Clock,
        store: Store,
        run_store: StoreRunner,
        operations: Operations,
        set_aside: SetAsideBook,
        coordinator_id: str,
    ) -> None:
        super().__init__(clock)
        self.config = config
        self._store = store
        self._run_store = run_store
        # The drain state and the local workers (engine/operations.py).
        self._operations = operations
        self._set_aside = set_aside
        self._coordinator_id = coordinator_id
        self._dirty = True
        self._last_write = 0

    def mark_dirty(self) -> None:
        """The set of local workers changed: rewrite the registry now."""
        self._dirty = True
        self.wake()

    async def stop(self) -> None:
        """Stop the loop and remove this coordinator's worker rows (best effort)."""
        was_running = self.running
        await super().stop()
        if not was_running:
            return
        try:
            await self._run_store(
                self._store.worker_sync, self._coordinator_id, [], self.clock.now_us()
            )
        except Exception:  # noqa: BLE001 - rows expire as stale anyway
            log.warning("could not remove this coordinator's worker rows", exc_info=True)

    async def run_once(self, now: int | None = None) -> SyncResult:
        now = self.clock.now_us() if now is None else now
        refresh_due = now - self._last_write >= int(self.config.refresh_s * US_PER_SECOND)
        write = self._dirty or refresh_due
        self._dirty = False
        try:
            result = await self._sync(now, write)
        except BaseException:
            self._dirty = self._dirty or write
            raise
        if write:
            self._last_write = now
        return result

    async def _sync(self, now: int, write: bool) -> SyncResult:
        ops, store, run = self._operations, self._store, self._run_store
        written = removed = 0
        if write:
            records = ops.worker_records()
            refused = await run(store.worker_sync, self._coordinator_id, records, now)
            self._set_aside.record(NAME, refused, now, what="worker")
            removed = await run(store.worker_delete_stale, now - ops.stale_us())
            written = len(records)
        flags = await run(store.cluster_flag_list)
        # A worker drain request applies to one connection only: the flag goes once handled.
        for name in ops.apply_cluster_flags(flags):
            await run(store.cluster_flag_set, name, None, now)
        return SyncResult(written, removed)

    def delay_after(self, result: SyncResult | None) -> float:
        return self.config.sync_interval_s

    def describe(self, result: SyncResult) -> str:
        if result.removed:
            return f"removed {result.removed} stale worker row(s) of stopped coordinators"
        return ""


__all__ = ["ClusterSync", "ClusterSyncConfig", "SyncResult"]
