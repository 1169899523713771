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
deleted. Heartbeats and credit grants do not write here, so the registry
costs one small write per coordinator per ``refresh_s`` however busy the
workers are.

The same run reads ``wfj_cluster_flags`` (the cluster drain, and drain and
undrain requests for workers connected to this replica), so a flag set
through one replica reaches the others within ``sync_interval_s``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coordinator.clock import US_PER_SECOND, Clock
from coordinator.engine.chore import Chore


@dataclass
class RegistryConfig:
    # How often cluster flags are read when no NOTIFY arrives (a safety net: a
    # flag set on another replica is announced at once on PostgreSQL).
    sync_interval_s: float = 15.0
    # How often this coordinator's worker rows are rewritten when nothing changed.
    refresh_s: float = 15.0
    # Rows not refreshed for this long are treated as gone (their coordinator died).
    stale_after_s: float = 60.0


@dataclass
class SyncResult:
    # Worker rows written (0 when the registry was not rewritten this run).
    written: int
    # Stale rows of dead coordinators removed.
    removed: int


class ClusterSync(Chore[SyncResult]):
    """Start/stop loop around ``run_once``; ``mark_dirty`` asks for a rewrite now."""

    name = "cluster-sync"

    def __init__(
        self,
        config: RegistryConfig,
        clock: Clock,
        sync: Callable[[int, bool], Awaitable[SyncResult]],
    ) -> None:
        super().__init__()
        self.config = config
        self._clock = clock
        self._sync = sync
        self._dirty = True
        self._last_write = 0

    def mark_dirty(self) -> None:
        """The set of local workers changed: rewrite the registry now."""
        self._dirty = True
        self.wake()

    async def run_once(self) -> SyncResult:
        now = self._clock.now_us()
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

    def delay_after(self, result: SyncResult | None) -> float:
        return self.config.sync_interval_s

    def describe(self, result: SyncResult) -> str:
        if result.removed:
            return f"removed {result.removed} stale worker row(s) of stopped coordinators"
        return ""


__all__ = ["ClusterSync", "RegistryConfig", "SyncResult"]
