"""Connected workers as the engine sees them.

A ``WorkerSession`` is one open AcquireJobs stream. Credits are the jobs the
worker said it can take; the dispatcher never leases more than that. Leased
jobs are queued on the session's outbox for the API layer to send.

Identity. The coordinator owns it: a session is the object itself (and its
``session_id``), opened under one credential (``principal``); the
``worker_id`` the client announces is a label. A lease granted to a session
is delivered to that session object or handed back, never to whichever
session holds the same label later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from coordinator import tenancy
from coordinator.ids import new_token
from coordinator.model import JobRow
from coordinator.tenancy import TenantScope


@dataclass(frozen=True, slots=True)
class LeaseBatch:
    """Jobs leased to one worker in one acquisition, under one lease token."""

    jobs: list[JobRow]
    lease_token: str


@dataclass(frozen=True, slots=True)
class DrainSignal:
    """Tells the worker to stop asking for work."""

    reason: str


@dataclass(frozen=True, slots=True)
class OutcomesAnswered:
    """The answers to one batch of outcomes the worker reported on its stream."""

    batch_id: int
    # engine.OutcomeResult, in the order the outcomes came.
    results: list[Any]


OutboxItem = LeaseBatch | DrainSignal | OutcomesAnswered | None

# Largest message a worker is assumed to accept when its hello does not say:
# gRPC's default max_receive_message_length.
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024


@dataclass(eq=False)
class WorkerSession:
    worker_id: str
    job_types: frozenset[str]
    slots: int = 0
    hostname: str = ""
    pid: int = 0
    sdk_version: str = ""
    max_batch_size: int = 100
    # Largest message the worker accepts (hello.max_receive_message_bytes).
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # Tenants this worker's credential may receive jobs of; None = every tenant.
    tenants: TenantScope = None
    # The credential that opened the stream (an opaque key; None = auth off),
    # and its name for messages.
    principal: str | None = None
    credential: str = ""
    # Unique per stream, assigned by the coordinator.
    session_id: str = field(default_factory=new_token)
    connected_at: int = 0
    last_heartbeat_at: int = 0
    credits: int = 0
    # Credit an acquisition pass holds while it awaits the store (part of
    # ``credits``): not for enqueue's direct path meanwhile.
    reserved: int = 0
    # The dispatcher's wake count when a pass last found nothing eligible for
    # this stream (``Dispatcher.grant``); -1: no such pass yet.
    found_nothing_at: int = -1
    draining: bool = False
    closed: bool = False
    # Jobs delivered on this stream whose attempt has not ended: job id -> lease token.
    in_flight: dict[str, str] = field(default_factory=dict)
    # How many of them the last in-flight audit left (coordinator/engine/in_flight.py).
    in_flight_audited: int = 0
    # Jobs of the batch being written to the stream whose message is not yet
    # handed to gRPC (the API layer keeps it): (job id, lease token).
    writing: list[tuple[str, str]] = field(default_factory=list)
    outbox: asyncio.Queue[OutboxItem] = field(default_factory=asyncio.Queue)
    # Set when the coordinator ends the stream with an error (e.g. a revoked
    # credential): the sender sends nothing more and ends the call with it.
    ended_by: Exception | None = None

    def close(self, error: Exception | None = None) -> None:
        """End the session; the stream's sender stops at the ``None`` marker,
        or at once when ``error`` is given."""
        if error is not None and self.ended_by is None:
            self.ended_by = error
        if not self.closed:
            self.closed = True
            self.credits = 0
            self.outbox.put_nowait(None)

    def take_unsent(self) -> list[tuple[str, str]]:
        """(job id, lease token) of every job the worker cannot have received:
        still queued on the outbox, or in a message of a batch not yet
        handed to gRPC. Call once the session is closed; empties both (answers to
        outcomes stay queued: they still go out)."""
        refs = list(self.writing)
        self.writing.clear()
        items = []
        while not self.outbox.empty():
            items.append(self.outbox.get_nowait())
        for item in items:
            if isinstance(item, LeaseBatch):
                refs.extend((row.id, item.lease_token) for row in item.jobs)
            elif isinstance(item, OutcomesAnswered):
                self.outbox.put_nowait(item)
        if self.closed:
            self.outbox.put_nowait(None)  # the sender may still wait for its marker
        return refs

    def takes(self, job_type: str, tenant_id: str) -> bool:
        """True when this stream may be given a job of ``job_type`` for ``tenant_id``."""
        return takes(self.job_types, self.tenants, job_type, tenant_id)


def takes(
    job_types: Collection[str], tenants: Collection[str] | None, job_type: str, tenant_id: str
) -> bool:
    """Who may take what: a worker announcing ``job_types`` under a credential
    scoped to ``tenants`` takes a job of ``job_type`` for ``tenant_id``.

    The dispatcher's delivery, direct dispatch at insert, and the cluster's
    worker view (stats, ExplainJob) all ask this.
    """
    return job_type in job_types and tenancy.allows(tenants, tenant_id)
