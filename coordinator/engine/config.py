"""The engine's settings (``EngineConfig``, ``OperationsConfig``) and what it
tells its background chores (``ChoreHooks``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coordinator.engine.events import EventWatchConfig
from workflowjobs.contract import MAX_PAYLOAD_BYTES, MAX_STRING_LENGTH


@dataclass
class OperationsConfig:
    """Settings of the operator actions; every field has a default."""

    # Worker registry rows not refreshed for this long are treated as gone
    # (their coordinator died): not listed, and deleted by the cluster sync.
    stale_after_s: float = 60.0
    # Another replica's registry rows not refreshed for this long (it rewrites
    # them every 15 s, so two rewrites were missed: it is likely dead) are
    # listed with ``stale`` set until ``stale_after_s`` removes them.
    quiet_after_s: float = 35.0


@dataclass
class EngineConfig:
    """Engine settings; every field has a production default."""

    # Lease length when a job sets no heartbeat timeout.
    default_lease_ms: int = 30_000
    # Largest payload accepted at enqueue.
    max_payload_bytes: int = MAX_PAYLOAD_BYTES
    # Largest EnqueueBatch / ReportOutcomes / Heartbeat.
    max_batch_size: int = 5_000
    # Longest accepted identifier or job type.
    max_string_length: int = MAX_STRING_LENGTH
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


__all__ = ["ChoreHooks", "EngineConfig", "OperationsConfig"]
