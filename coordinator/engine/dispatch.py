"""The dispatcher: pushes leased jobs to workers that have credit.

Design note. One loop per coordinator. It sleeps until something can change
what is eligible (a local enqueue, a NOTIFY from another replica, new credit,
a retry or delayed job falling due, an unpause), then makes passes: for each
set of job types served by sessions with credit it asks acquisition
(acquisition.py: candidates, the fair pick across tenants and categories, the
guarded claim) to lease jobs to those sessions, position by position, and
queues what was leased on the sessions' outboxes. When a pass
leases fewer jobs than wanted, nothing more is eligible and the loop sleeps
again. While idle with credit outstanding it re-checks only every
``idle_poll_s`` as a safety net; with no credit outstanding it never queries.

Credit alone does not start a pass. Everything that can make a job eligible
calls ``wake`` (an enqueue that leased its jobs at insert does not), and each
wake bumps a count; a pass that found nothing more for a stream (fewer jobs
than wanted, every pick leased) notes that count on it. Credit a worker
grants afterwards (a handler ended) starts a pass only if something woke
since, or the loop sleeps without a timeout (no stream had credit, so no pass
waits for a wake-up time): otherwise the pass would find what the last one
found, and hold the stream's credit while it did, so that enqueues could not
lease at insert meanwhile. A pass whose picks were taken by another claim (a
replica's) notes nothing, since no replica says when it is done with them:
it runs again at once if it leased some, else after ``TAKEN_RETRY_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from coordinator.clock import US_PER_SECOND, Clock
from coordinator.engine.sessions import LeaseBatch, WorkerSession
from coordinator.errors import AlreadyExists
from coordinator.ids import new_token
from coordinator.model import JobRow
from coordinator.telemetry.hooks import NO_TELEMETRY, EngineTelemetry

log = logging.getLogger(__name__)

# Due times closer than this (microseconds) share one wake-up.
WAKE_GRAIN_US = 10_000

# A pass whose every pick was taken by another claim (a replica's) runs again
# after this long (seconds): that claim's jobs are leased, the ones behind
# them may be eligible, and no one tells this replica when the rows are free.
# While passes keep finding only taken picks (a row held for long, or a pick
# the lease's re-check refuses, e.g. a job behind its ordering key) the wait
# doubles, up to TAKEN_RETRY_MAX_S.
TAKEN_RETRY_S = 0.01
TAKEN_RETRY_MAX_S = 1.0


@dataclass
class AcquisitionBatch:
    """What one acquisition leased (``Acquisition.lease``)."""

    rows: list[JobRow]
    # Picks the claim did not lease (taken elsewhere, or over a concurrency limit).
    dropped: int = 0
    # When rate limits that held scopes back next admit a start: a pass runs then.
    retry_at: list[int] = field(default_factory=list)


class Leasing(Protocol):
    """What the dispatcher calls to lease (engine/acquisition.py's ``Acquisition``)."""

    async def lease(
        self,
        job_types: Sequence[str],
        tenants: frozenset[str] | None,
        owners: Sequence[str],
        token: str,
        now: int,
    ) -> AcquisitionBatch: ...

    async def hand_back(self, refs: Sequence[tuple[str, str]]) -> None: ...


@dataclass
class AcquisitionResult:
    wanted: int
    leased: int
    # Picks the claim did not lease (taken elsewhere, or over a concurrency limit).
    dropped: int = 0

    @property
    def more_may_wait(self) -> bool:
        """A full batch, or limits turned picks away: the next pass may find more."""
        return self.leased > 0 and (self.leased >= self.wanted or self.dropped > 0)

    @property
    def found_all(self) -> bool:
        """Fewer than wanted, and every pick leased: nothing more was eligible.

        A pass whose picks were taken elsewhere (a replica's claim held their
        rows) or turned away by a limit did not see everything: the jobs
        behind them may be eligible still.
        """
        return self.leased < self.wanted and self.dropped == 0


class Dispatcher:
    """Matches eligible jobs to worker credit."""

    # Metrics and spans; replaced by coordinator.telemetry when configured.
    telemetry: EngineTelemetry = NO_TELEMETRY

    def __init__(
        self,
        *,
        clock: Clock,
        acquisition: Leasing,
        acquire_batch_max: int = 500,
        idle_poll_s: float = 15.0,
    ) -> None:
        self._clock = clock
        self._acquisition = acquisition
        self._acquire_batch_max = acquire_batch_max
        self._idle_poll_s = idle_poll_s
        self.sessions: dict[str, WorkerSession] = {}
        self._wake = asyncio.Event()
        # How many times something may have made jobs eligible (``wake``):
        # credit starts a pass only for a stream that has not seen the latest.
        self._wakes = 0
        self._due: list[int] = []
        # The loop sleeps until woken, with no wake-up time (``_sleep_for``).
        self._sleeps_untimed = True
        # The last pass leased nothing for some stream because other claims
        # held its picks: the loop runs another pass after ``_taken_retry_s``.
        self._picks_taken = False
        self._taken_retry_s = TAKEN_RETRY_S
        # Which session holds each job in flight (for forget: one lookup a job).
        self._owner_of: dict[str, WorkerSession] = {}
        # Told (entries, entries after the last audit) when a stream's in-flight
        # entries grow; the in-flight audit decides whether to run early.
        self.on_in_flight_growth: Callable[[int, int], None] = lambda entries, audited: None
        self._task: asyncio.Task[None] | None = None
        # False while this coordinator is drained (operations.py throws it):
        # no pass leases, nor does direct dispatch at insert.
        self.leasing = True
        self.passes = 0
        # Jobs leased by this coordinator's passes, and at insert (enqueue's
        # direct dispatch, which counts them here): the share a single enqueue
        # saves a claim, logged when the coordinator stops.
        self.leased_by_pass = 0
        self.leased_at_insert = 0

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="dispatcher")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        for session in list(self.sessions.values()):
            session.close()
        self.sessions.clear()

    # -- signals -----------------------------------------------------------------

    def wake(self, due_at: int = 0) -> None:
        """Something may have become eligible at ``due_at`` (0 = now)."""
        if due_at and due_at > self._clock.now_us():
            heapq.heappush(self._due, due_at)
        else:
            self._wakes += 1
        self._wake.set()

    def wake_at(self, due_times: Iterable[int]) -> None:
        """Jobs become eligible at each of ``due_times``: a pass runs at each
        (times closer than ``WAKE_GRAIN_US`` share one). No-op when empty."""
        now = self._clock.now_us()
        exact = list(due_times)
        if not exact:
            return
        if min(exact) <= now:
            self._wakes += 1
        for t in {-(-t // WAKE_GRAIN_US) * WAKE_GRAIN_US for t in exact}:
            if t > now:
                heapq.heappush(self._due, t)
        self._wake.set()

    def add_session(self, session: WorkerSession) -> None:
        """Register a stream under its worker id.

        The same credential reconnecting replaces its own older stream; a live
        stream of another credential keeps the id and the newcomer is refused.
        """
        old = self.sessions.get(session.worker_id)
        if old is not None and old is not session and not old.closed:
            if old.principal != session.principal:
                raise AlreadyExists(
                    f"worker_id {session.worker_id!r} is already connected to this "
                    "coordinator under a different credential; give each worker process "
                    "its own worker_id (the connected worker keeps its stream)"
                )
            old.close()
        self.sessions[session.worker_id] = session

    def remove_session(self, session: WorkerSession) -> None:
        if self.sessions.get(session.worker_id) is session:
            del self.sessions[session.worker_id]
        for job_id in session.in_flight:
            if self._owner_of.get(job_id) is session:
                del self._owner_of[job_id]
        session.close()

    def deliver(
        self,
        assignments: Iterable[tuple[WorkerSession, Sequence[JobRow]]],
        lease_token: str,
    ) -> list[tuple[str, str]]:
        """Queue leased jobs on the streams of the sessions they were leased to.

        A lease belongs to the session object it was granted to: a job goes to
        that session or nowhere, never to another stream that announced the
        same worker id, and never to a session whose credential does not
        cover the job's tenant. Returns (job id, token) of the jobs not
        delivered (the session is gone, or the tenant is out of its scope):
        the caller hands those back.
        """
        orphans: list[tuple[str, str]] = []
        for session, owned in assignments:
            if session.closed:
                orphans.extend((r.id, lease_token) for r in owned)
                continue
            foreign = [r for r in owned if not session.takes(r.job_type, r.tenant_id)]
            if foreign:
                log.error(
                    "not delivering %d job(s) to worker %r: their tenant is outside its "
                    "credential's scope; handing them back",
                    len(foreign),
                    session.worker_id,
                )
                orphans.extend((r.id, lease_token) for r in foreign)
                owned = [r for r in owned if session.takes(r.job_type, r.tenant_id)]
            for r in owned:
                session.in_flight[r.id] = lease_token
                self._owner_of[r.id] = session
            if owned:
                self.on_in_flight_growth(len(session.in_flight), session.in_flight_audited)
            step = max(1, session.max_batch_size)
            for i in range(0, len(owned), step):
                session.outbox.put_nowait(LeaseBatch(list(owned[i : i + step]), lease_token))
        return orphans

    def forget(self, refs: Iterable[str | tuple[str, str]]) -> None:
        """The jobs' attempts ended: they are no longer in flight here.

        A (job id, lease token) ref forgets the job only while that token is
        the one delivered, so the end of an older attempt never removes the
        entry of the session holding the current one.
        """
        for ref in refs:
            job_id, token = (ref, None) if isinstance(ref, str) else ref
            session = self._owner_of.get(job_id)
            if session is None:
                continue
            if token is not None and session.in_flight.get(job_id) != token:
                continue
            del self._owner_of[job_id]
            session.in_flight.pop(job_id, None)

    def token_of(self, job_id: str) -> str | None:
        """The lease token ``job_id`` was delivered here under, while it is in flight."""
        session = self._owner_of.get(job_id)
        return session.in_flight.get(job_id) if session is not None else None

    def in_flight_refs(self) -> list[tuple[str, str]]:
        """(job id, lease token) of every job delivered here whose end is not known."""
        return [(job_id, s.in_flight[job_id]) for job_id, s in self._owner_of.items()]

    def mark_audited(self) -> None:
        """Every stream's entries were just checked against the store."""
        for session in self.sessions.values():
            session.in_flight_audited = len(session.in_flight)

    def grant(self, session: WorkerSession, credits: int) -> None:
        """Add a stream's credit; a pass runs if it may find something for it."""
        if session.closed or credits <= 0:
            return
        session.credits += credits
        # While the loop sleeps without a timeout (no stream had credit), no
        # pass waits for a wake-up time, nor for the idle re-check: the first
        # credit starts one.
        if session.found_nothing_at != self._wakes or self._sleeps_untimed:
            self._wake.set()

    # -- the loop ----------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                more = await self.run_pass()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("acquisition pass failed; retrying shortly")
                more = False
                await asyncio.sleep(0.5)
            if more:
                await asyncio.sleep(0)
                continue
            timeout = self._sleep_for()
            if self._picks_taken:
                retry = self._taken_retry_s
                timeout = retry if timeout is None else min(timeout, retry)
                self._taken_retry_s = min(2 * retry, TAKEN_RETRY_MAX_S)
            else:
                self._taken_retry_s = TAKEN_RETRY_S
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    def _sleep_for(self) -> float | None:
        now = self._clock.now_us()
        waiting = any(s.credits > 0 for s in self.sessions.values())
        self._sleeps_untimed = not waiting
        if not waiting:
            return None
        timeout = self._idle_poll_s
        if self._due:
            timeout = min(timeout, (self._due[0] - now) / US_PER_SECOND + 0.001)
        return max(timeout, 0.001)

    async def run_pass(self) -> bool:
        """One round over every group of sessions with credit; True if more may wait."""
        started_us = self._clock.now_us()
        self._picks_taken = False
        # A due time reached counts as a wake: a stream that had no credit in
        # this pass has not looked since, so its next grant starts a pass. Due
        # times up to the pass's start are seen by it; one that comes due while
        # it runs stays queued and gets a pass of its own.
        if self._due and self._due[0] <= started_us:
            self._wakes += 1
            while self._due and self._due[0] <= started_us:
                heapq.heappop(self._due)
        if not self.leasing:
            return False
        self.passes += 1
        # Sessions share a pass when they serve the same job types for the same
        # tenants (a tenant-scoped credential only ever sees its own tenants' jobs).
        groups: dict[tuple[frozenset[str], frozenset[str] | None], list[WorkerSession]] = {}
        for session in self.sessions.values():
            if session.credits > 0 and not session.draining and not session.closed:
                groups.setdefault((session.job_types, session.tenants), []).append(session)
        more = False
        for (job_types, tenants), sessions in groups.items():
            started_ns = time.time_ns()
            wakes = self._wakes
            result = await self._acquire(job_types, sessions, tenants)
            self.telemetry.acquired(job_types, result, started_ns)
            if result.more_may_wait:
                more = True
            elif result.found_all:
                for session in sessions:
                    session.found_nothing_at = wakes
            elif result.dropped:
                self._picks_taken = True
        return more

    async def _acquire(
        self,
        job_types: frozenset[str],
        sessions: list[WorkerSession],
        tenants: frozenset[str] | None = None,
    ) -> AcquisitionResult:
        wanted = min(sum(s.credits for s in sessions), self._acquire_batch_max)
        # The pass holds the credit it acquires for while it awaits the store,
        # so a job leased meanwhile at insert (enqueue's direct path) cannot
        # spend it too: a session is never pushed more jobs than it granted.
        held = [(s, s.credits) for s in sessions]
        for session, credits in held:
            session.reserved += credits
        try:
            return await self._acquire_held(job_types, sessions, tenants, wanted)
        finally:
            for session, credits in held:
                session.reserved -= credits

    async def _acquire_held(
        self,
        job_types: frozenset[str],
        sessions: list[WorkerSession],
        tenants: frozenset[str] | None,
        wanted: int,
    ) -> AcquisitionResult:
        now = self._clock.now_us()
        token = new_token()
        owners = _owner_slots(sessions, wanted)
        batch = await self._acquisition.lease(sorted(job_types), tenants, owners, token, now)
        self.wake_at(batch.retry_at)
        rows = batch.rows
        if not rows:
            return AcquisitionResult(wanted, 0, batch.dropped)
        # The rows name the worker id of the session each was leased to; the
        # sessions of this pass are the ones that asked (one per worker id).
        by_label = {s.worker_id: s for s in sessions}
        owned: dict[WorkerSession, list[JobRow]] = {}
        orphans: list[tuple[str, str]] = []
        for row in rows:
            session = by_label.get(row.lease_owner or "")
            if session is None:
                orphans.append((row.id, token))
            else:
                owned.setdefault(session, []).append(row)
        for session, leased in owned.items():
            session.credits = max(0, session.credits - len(leased))
        self.leased_by_pass += len(rows)
        orphans.extend(self.deliver(owned.items(), token))
        if orphans:
            # The worker left while we were leasing: hand the jobs straight back.
            await self._acquisition.hand_back(orphans)
        return AcquisitionResult(wanted, len(rows), batch.dropped)


def _owner_slots(sessions: list[WorkerSession], wanted: int) -> list[str]:
    """Worker ids for positions 1..wanted, round robin, each up to its credit."""
    remaining = {s.worker_id: s.credits for s in sessions}
    owners: list[str] = []
    while len(owners) < wanted:
        progressed = False
        for worker_id, left in remaining.items():
            if left > 0 and len(owners) < wanted:
                owners.append(worker_id)
                remaining[worker_id] = left - 1
                progressed = True
        if not progressed:
            break
    return owners
