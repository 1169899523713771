"""Connected workers as the engine sees them.

A ``WorkerSession`` is one open AcquireJobs stream. Credits are the jobs the
worker said it can take; the dispatcher never leases more than that. Leased
jobs are queued on the session's outbox for the API layer to send.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from coordinator.model import JobRow


@dataclass(frozen=True, slots=True)
class LeaseBatch:
    """Jobs leased to one worker in one acquisition, under one lease token."""

    jobs: list[JobRow]
    lease_token: str


@dataclass(frozen=True, slots=True)
class DrainSignal:
    """Tells the worker to stop asking for work."""

    reason: str


OutboxItem = LeaseBatch | DrainSignal | None


@dataclass(eq=False)
class WorkerSession:
    worker_id: str
    job_types: frozenset[str]
    slots: int = 0
    hostname: str = ""
    pid: int = 0
    sdk_version: str = ""
    max_batch_size: int = 100
    # Tenants this worker's credential may receive jobs of; None = every tenant.
    tenants: frozenset[str] | None = None
    connected_at: int = 0
    last_heartbeat_at: int = 0
    credits: int = 0
    draining: bool = False
    closed: bool = False
    in_flight: set[str] = field(default_factory=set)
    outbox: asyncio.Queue[OutboxItem] = field(default_factory=asyncio.Queue)

    def close(self) -> None:
        """End the session; the stream's sender stops at the ``None`` marker."""
        if not self.closed:
            self.closed = True
            self.credits = 0
            self.outbox.put_nowait(None)
