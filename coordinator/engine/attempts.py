"""Attempts ending: the one path every "this attempt is over" goes through.

Design note. An attempt ends in many ways: the worker reports an outcome
(``outcomes.py``), its lease expires (the lease reaper), it runs past its
execution timeout (the execution-timeout chore), an operator unlocks the job,
the stream that held it ends or the worker it was leased to left before
delivery (hand-back). A job may also finish without an attempt ending (an
operator cancels a PENDING job). Whatever the cause, what follows is the same,
and it is written here once (``Attempts.ended``):

1. wake the dispatcher at each retried job's due time, and at once under
   concurrency limits or ordering keys (every ended attempt frees a slot, or a
   key's head, that a waiting job may take);
2. forget the jobs' in-flight entries: by (job id, lease token) when the
   ending attempt's token is known, so the end of an old attempt never removes
   the entry of the session holding the current one;
3. report to telemetry (``outcomes``; ``reaped`` for expired leases, which
   also counts ``wfjobs.leases.expired``);
4. wake callers waiting for the jobs that reached a final status
   (``WaitForJob`` / enqueue with wait).

Every store call that ends attempts (``job_end_attempts`` by rule, the
completions of ``job_complete_many``, the reaper's ``lease_reclaim_expired``)
goes through ``Attempts.in_store``, which sets aside rows whose own data makes
processing fail (``set_aside.py``) under the caller's chore name and wakes the
other replicas when limits or ordering keys are in use.
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from coordinator.engine.dispatch import Dispatcher
from coordinator.engine.runner import StoreRunner
from coordinator.engine.set_aside import Collected, SetAsideBook
from coordinator.model import (
    ATTEMPT_CEILING,
    AttemptEnd,
    AttemptOutcome,
    JobStatus,
    LeasedForFailure,
    Release,
)
from coordinator.store import Store
from coordinator.store.leases import SetAside
from coordinator.telemetry.hooks import EngineTelemetry

Ref = str | tuple[str, str]
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
Decide = Callable[[LeasedForFailure], AttemptEnd]


class EndsAttempts(Protocol[T_co]):
    """A store call that ends attempts, its arguments bound but the two that
    ``Attempts.in_store`` gives (mypy checks the bound ones against the
    query's signature in ``Store``)."""

    def __call__(self, *, set_aside: SetAside | None, wake: bool) -> T_co: ...


class FinishWaiters:
    """Events of callers waiting for jobs to reach a final status.

    An entry lives while some caller waits on it: each ``event`` is paired
    with a ``done_with`` (however the wait ends: the job finished here or on
    another replica, or the caller's deadline passed), and the last one out
    removes it.
    """

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._waiting: collections.Counter[str] = collections.Counter()

    def __len__(self) -> int:
        """Jobs with an entry."""
        return len(self._events)

    def event(self, job_id: str) -> asyncio.Event:
        """The event set when ``job_id`` finishes here (shared by its waiters)."""
        self._waiting[job_id] += 1
        return self._events.setdefault(job_id, asyncio.Event())

    def done_with(self, job_id: str, event: asyncio.Event) -> None:
        """A waiter stops waiting on ``event``; the entry goes with its last waiter."""
        self._waiting[job_id] -= 1
        if self._waiting[job_id] <= 0:
            del self._waiting[job_id]
            if self._events.get(job_id) is event or event.is_set():
                self._events.pop(job_id, None)

    def notify(self, job_ids: Iterable[str]) -> None:
        if not self._events:
            return
        for job_id in job_ids:
            event = self._events.pop(job_id, None)
            if event is not None:
                event.set()


class Attempts:
    """Ends attempts and does what follows, the same way for every cause."""

    def __init__(
        self,
        *,
        store: Store,
        run_store: StoreRunner,
        dispatcher: Dispatcher,
        set_aside: SetAsideBook,
        telemetry: Callable[[], EngineTelemetry],
        concurrency_limited: Callable[[], bool],
        now: Callable[[], int],
    ) -> None:
        self._store = store
        self._run = run_store
        self._dispatcher = dispatcher
        self._set_aside = set_aside
        self._telemetry = telemetry
        self._concurrency_limited = concurrency_limited
        # True once this replica enqueued or leased a job with an ordering key: from
        # then on every ended attempt wakes acquisition here and on every replica, as
        # under concurrency limits (it may free the head of a key a job waits behind).
        self.ordered_work_seen = False
        self._now = now
        self.waiters = FinishWaiters()

    @property
    def wake_replicas(self) -> bool:
        """An ended attempt must wake acquisition on every replica: concurrency
        limits apply or ordering keys are in use (the end may free a slot, or a
        key's head, that a job waits for)."""
        return self._concurrency_limited() or self.ordered_work_seen

    def token_here(self, job_id: str) -> str | None:
        """The lease token of ``job_id`` as delivered by this coordinator, if it is in flight here."""
        return self._dispatcher.token_of(job_id)

    async def apply(
        self,
        refs: Sequence[tuple[str, str]],
        decide: Decide,
        now: int,
        chore: str,
    ) -> tuple[dict[str, AttemptEnd], Collected]:
        """End the running attempts named by (job id, token) as ``decide`` rules.

        Rows the store could not process are set aside under ``chore`` and
        returned with their errors; nothing else follows (see ``end``).
        """
        return await self.in_store(
            chore, now, functools.partial(self._store.job_end_attempts, refs, decide, now)
        )

    async def in_store(self, chore: str, now: int, query: EndsAttempts[T]) -> tuple[T, Collected]:
        """Run ``query`` (a store call that ends attempts, its arguments bound:
        ``functools.partial(store.job_complete_many, completions, now)``) with
        the poisoned-row set-aside: rows it refuses are logged, counted and
        skipped under ``chore``, and returned with their errors beside its
        result. The call is given ``set_aside=`` and ``wake=`` (wake every
        replica when limits or ordering keys are in use)."""
        refused, set_aside = self._set_aside.collector()
        result = await self._run(
            functools.partial(query, set_aside=set_aside, wake=self.wake_replicas)
        )
        self._set_aside.record(chore, refused, now)
        return result, refused

    async def end(
        self,
        refs: Sequence[tuple[str, str]],
        decide: Decide,
        now: int,
        chore: str,
    ) -> dict[str, AttemptEnd]:
        """``apply``, then everything that follows an ended attempt (``ended``)."""
        ends, _ = await self.apply(refs, decide, now, chore)
        self.ended(ends, now, forget=[r for r in refs if r[0] in ends])
        return ends

    async def hand_back(
        self, refs: Sequence[tuple[str, str]], reason: str, chore: str = "releases"
    ) -> dict[str, AttemptEnd]:
        """The coordinator hands leased jobs back unrun (their stream ended, or
        the worker left before delivery); the attempt is refunded."""
        releases = {job_id: Release(job_id, token, reason) for job_id, token in refs}
        decide = functools.partial(_decide_release, releases)
        return await self.end(refs, decide, self._now(), chore)

    def ended(
        self,
        ends: Mapping[str, AttemptEnd] | Sequence[AttemptEnd],
        now: int,
        *,
        completed: Collection[str] = (),
        forget: Iterable[Ref] = (),
        finished: Collection[str] = (),
        lease_expired: bool = False,
    ) -> None:
        """What follows attempts that ended (in the store, already committed).

        ``ends``: the decisions applied, by job id; ``completed``: jobs whose
        attempt completed; ``forget``: their in-flight refs (job id, or (job
        id, lease token) of the attempt that ended); ``finished``: jobs that
        reached a final status without an attempt ending (a PENDING job
        cancelled); ``lease_expired``: the attempts ended because their lease ran out.
        """
        by_id = ends if isinstance(ends, Mapping) else {e.job_id: e for e in ends}
        self._dispatcher.wake_at(
            e.due_at or now for e in by_id.values() if e.new_status == JobStatus.PENDING
        )
        if self.wake_replicas and (by_id or completed or finished):
            # A freed slot, or a key's head that ended, may admit a waiting job.
            self._dispatcher.wake()
        self._dispatcher.forget(forget)
        telemetry = self._telemetry()
        if lease_expired:
            telemetry.reaped(list(by_id.values()))
        elif by_id or completed:
            telemetry.outcomes(completed, by_id)
        self.waiters.notify(
            [
                *completed,
                *(j for j, e in by_id.items() if e.new_status != JobStatus.PENDING),
                *finished,
            ]
        )


def _decide_release(releases: Mapping[str, Release], row: LeasedForFailure) -> AttemptEnd:
    return release_end(releases[row.id], row)


def release_end(release: Release, row: LeasedForFailure) -> AttemptEnd:
    """The fate of a job whose attempt was handed back unfinished."""
    if row.cancel_requested:
        # A cancel was requested: the handed-back attempt ends the job.
        return AttemptEnd(
            job_id=release.job_id,
            outcome=AttemptOutcome.CANCELLED,
            new_status=JobStatus.CANCELLED,
            error=release.reason or "cancelled",
        )
    # A released attempt does not count against the budget (it is counted in
    # released_attempts); only a job at the attempt ceiling, which can never
    # start another attempt, faults.
    if row.attempt >= ATTEMPT_CEILING:
        return AttemptEnd(
            job_id=release.job_id,
            outcome=AttemptOutcome.RELEASED,
            new_status=JobStatus.FAULTED,
            error=(
                f"released after {row.attempt} attempts, the most one job may run "
                f"({ATTEMPT_CEILING:,}); replay it to run it again"
            ),
        )
    return AttemptEnd(
        job_id=release.job_id,
        outcome=AttemptOutcome.RELEASED,
        new_status=JobStatus.PENDING,
        error=release.reason or "released by worker",
        payload=release.payload,
        payload_content_type=release.content_type,
        refund_attempt=True,
    )


__all__ = ["Attempts", "FinishWaiters", "release_end"]
