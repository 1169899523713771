"""Operator actions: retry, cancel, unlock, replay, bulk actions, drain,
worker listing and stats.

Design note: drain. A coordinator is *draining* when it was drained itself
(in memory; a restart forgets it) or the cluster is (the ``drain`` row in
``wfj_cluster_flags``, read at start and by the cluster-sync chore, which hands
them to ``apply_cluster_flags``). While
draining, the dispatcher leases nothing, running jobs go on heartbeating and
reporting, and every worker stream receives a ``DrainRequested`` so the
worker stops granting credit. On undrain those streams are closed; the SDK
reconnects at once and grants credit on the new stream. A worker drained by
id stays drained until it is undrained by id (``Undrain`` with
``worker_id``), which closes its drained stream the same way, or until it
reconnects. Drain and undrain by id reach a worker on another replica through
a request flag that replica's cluster sync applies. The worker registry
records which workers are drained, so ``ListWorkers`` and ``ExplainJob`` on
any replica see it. Health stays SERVING: only SIGTERM takes a coordinator
out of the load balancer.

The drain state is held here alone (``local_drain``, ``cluster_drain``;
``draining`` is either). ``_apply_drain`` throws the dispatcher's switch
(``Dispatcher.leasing``) to match, which only acquisition reads (the
dispatcher's passes and direct dispatch at insert); stats, ExplainJob and
``Engine.draining`` read ``draining``.

::

    serving --Drain / cluster flag set--> draining --Undrain / flag cleared--> serving
                                    (DrainRequested to every stream)   (drained streams closed)
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from coordinator import tenancy
from coordinator.clock import Clock
from coordinator.engine.attempts import Attempts
from coordinator.engine.config import ChoreHooks, OperationsConfig
from coordinator.engine.dispatch import Dispatcher
from coordinator.engine.runner import StoreRunner
from coordinator.engine.sessions import DrainSignal, WorkerSession, takes
from coordinator.engine.validation import check_id
from coordinator.errors import FailedPrecondition, InvalidArgument, NotFound
from coordinator.ids import new_id
from coordinator.model import (
    FINISHED_STATUSES,
    LIVE_STATUSES,
    RETRYABLE_STATUSES,
    AttemptEnd,
    AttemptOutcome,
    BulkCount,
    JobFilter,
    JobRow,
    JobStatus,
    PurgeCount,
    StateChange,
    WorkerRecord,
    operator_retry_grant,
)
from coordinator.store import Store
from coordinator.store.rows import WorkerRow

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

CLUSTER_DRAIN_FLAG = "drain"
WORKER_DRAIN_FLAG_PREFIX = "drain-worker:"
WORKER_UNDRAIN_FLAG_PREFIX = "undrain-worker:"


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A connected worker as ``ListWorkers`` shows it."""

    worker_id: str
    coordinator_id: str
    hostname: str
    pid: int
    sdk_version: str
    job_types: tuple[str, ...]
    slots: int
    in_flight: tuple[str, ...]
    connected_at: int
    # When the coordinator holding the worker's stream last confirmed it open,
    # as recorded in the worker registry (the same on every replica).
    last_seen_at: int
    credits: int
    draining: bool
    # The tenants its credential covers; None: every tenant.
    tenants: tuple[str, ...] | None = None
    # Another replica's worker whose registry row that replica has not
    # refreshed for ``quiet_after_s``: the replica is likely dead (never set
    # for this replica's own workers).
    stale: bool = False

    def takes(self, job_type: str, tenant_id: str) -> bool:
        """True when this worker may be given a job of ``job_type`` for ``tenant_id``."""
        return takes(self.job_types, self.tenants, job_type, tenant_id)


@dataclass(frozen=True, slots=True)
class StatusCount:
    """Jobs of one tenant and job type in one status."""

    tenant_id: str
    job_type: str
    status: JobStatus
    count: int
    # Of a PENDING count, the jobs not due yet; 0 for other statuses.
    scheduled: int = 0


@dataclass(frozen=True, slots=True)
class WindowCounts:
    """Attempts that ended in one window up to now."""

    window_us: int
    completions: int
    failures: int
    retries: int


@dataclass(frozen=True, slots=True)
class Stats:
    """What ``GetStats`` answers, for one tenant (or all) and one category (or all)."""

    counts: tuple[StatusCount, ...]
    # Jobs per status, every status present.
    totals: Mapping[JobStatus, int]
    # PENDING jobs held behind an earlier job of their ordering key (counted as PENDING too).
    held: int
    # PENDING jobs not due yet (a delay, or a retry's backoff); counted as PENDING too.
    scheduled: int
    # Age of the oldest due PENDING job; 0 when none is due.
    oldest_pending_age_us: int
    # Attempts that ended COMPLETED in the window (completed first attempts included).
    completions: int
    # Attempts that ended FAILED, LEASE_EXPIRED or TIMED_OUT in the window.
    failures: int
    # Those of them after which the job was tried again or is waiting to be.
    retries: int
    # This coordinator (or the whole cluster) is drained.
    draining: bool
    # The cluster's open worker streams; for one tenant, those whose credential
    # covers it (a tenant-scoped caller learns nothing of other tenants' workers).
    connected_workers: int
    # The time the counts were read at (µs): PENDING jobs due after it are scheduled.
    read_time_us: int = 0


class Operations:
    """Operator actions over one engine; owns the drain state and the stats."""

    def __init__(
        self,
        *,
        store: Store,
        run_store: StoreRunner,
        clock: Clock,
        dispatcher: Dispatcher,
        attempts: Attempts,
        hooks: ChoreHooks,
        coordinator_id: str,
        config: OperationsConfig | None = None,
    ) -> None:
        self._store = store
        self._run = run_store
        self._clock = clock
        # Its sessions (drained here) and its switch (``leasing``).
        self._dispatcher = dispatcher
        self._attempts = attempts
        # The cluster sync rewrites the worker registry when the workers change.
        self._hooks = hooks
        self._coordinator_id = coordinator_id
        self.config = config or OperationsConfig()
        self.local_drain = False
        self.cluster_drain = False
        # Sessions that received a DrainRequested because this coordinator drains.
        self._signalled: set[WorkerSession] = set()
        # Streams drained by worker id: they stay drained until the worker reconnects.
        self._drained_sessions: set[WorkerSession] = set()

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Read the cluster drain flag (before any acquisition)."""
        flag = await self._call(self._store.cluster_flag_get, CLUSTER_DRAIN_FLAG)
        self.cluster_drain = flag is not None
        self._apply_drain()

    def session_opened(self, session: WorkerSession) -> None:
        if self.draining:
            self._signal(session, self._drain_reason())
        self._workers_changed()

    def session_closed(self, session: WorkerSession) -> None:
        self._signalled.discard(session)
        self._drained_sessions.discard(session)
        self._workers_changed()

    # -- single jobs ---------------------------------------------------------------

    async def retry_job(self, job_id: str, keep_attempts: bool) -> JobRow:
        check_id(job_id)
        change = await self._call(
            functools.partial(
                self._store.job_retry,
                statuses=RETRYABLE_STATUSES,
                grant=operator_retry_grant,
            ),
            job_id,
            keep_attempts,
            self._now(),
        )
        run_now = f"`wfjobs jobs run-now {job_id}` makes a pending job that is not due yet due now"
        row = _applied(
            change, job_id, "retried", RETRYABLE_STATUSES, hints={JobStatus.PENDING: run_now}
        )
        self._dispatcher.wake()
        return row

    async def cancel_job(self, job_id: str, reason: str) -> JobRow:
        check_id(job_id)
        change = await self._call(self._store.job_cancel, job_id, reason, self._now())
        row = _applied(change, job_id, "cancelled", _CANCEL_ONE)
        if row.status == JobStatus.CANCELLED:
            # A PENDING job finished without an attempt ending; a RUNNING one
            # ends when its attempt does (outcome, expiry or unlock). A FAULTED
            # one set aside may have let its ordering key's next job go.
            self._attempts.ended({}, self._now(), finished=[job_id])
            if row.ordering_key is not None:
                self._dispatcher.wake()
        return row

    async def unlock_job(self, job_id: str) -> JobRow:
        check_id(job_id)
        attempts = self._attempts
        # Read before the unlock commits: the job may be leased again at once.
        token = attempts.token_here(job_id)
        now = self._now()
        change = await self._call(self._store.job_unlock, job_id, now, attempts.wake_replicas)
        row = _applied(change, job_id, "unlocked", (JobStatus.RUNNING,))
        # What follows is every ended attempt's (``Attempts.ended``): a job
        # unlocked to PENDING wakes acquisition at once, and under limits or
        # ordering keys so does a job that ended (its slot, or its key, is free).
        end = AttemptEnd(
            job_id=job_id,
            outcome=AttemptOutcome.CANCELLED
            if row.status == JobStatus.CANCELLED
            else AttemptOutcome.UNLOCKED,
            new_status=JobStatus(row.status),
            due_at=now,
            error=row.last_error,
        )
        attempts.ended({job_id: end}, now, forget=[(job_id, token)] if token is not None else [])
        return row

    async def run_job_now(self, job_id: str) -> JobRow:
        """Make a PENDING job that is not due yet due now, and wake acquisition."""
        check_id(job_id)
        change = await self._call(self._store.job_run_now, job_id, self._now())
        row = _applied(change, job_id, "run now", (JobStatus.PENDING,))
        # Other replicas are told by the store's wake notice.
        self._dispatcher.wake()
        return row

    async def replay_job(self, job_id: str) -> JobRow:
        check_id(job_id)
        row = await self._call(self._store.job_replay, job_id, new_id(), self._now())
        if row is None:
            raise NotFound(f"job {job_id} not found")
        self._dispatcher.wake()
        return row

    # -- bulk ----------------------------------------------------------------------

    async def bulk_retry(self, flt: JobFilter, dry_run: bool, keep_attempts: bool) -> BulkCount:
        statuses = _bulk_statuses(flt, RETRYABLE_STATUSES, "retried")
        if dry_run:
            return BulkCount(await self._call(self._store.job_count_matching, flt, statuses), 0)
        result = await self._call(
            functools.partial(self._store.job_bulk_retry, grant=operator_retry_grant),
            flt,
            statuses,
            keep_attempts,
            self._now(),
        )
        if result.changed:
            self._dispatcher.wake()
        return result

    async def bulk_cancel(self, flt: JobFilter, dry_run: bool, reason: str) -> BulkCount:
        statuses = _bulk_statuses(flt, LIVE_STATUSES, "cancelled")
        if dry_run:
            return BulkCount(await self._call(self._store.job_count_matching, flt, statuses), 0)
        result = await self._call(self._store.job_bulk_cancel, flt, statuses, reason, self._now())
        if result.changed and self._attempts.wake_replicas:
            # A cancelled head of an ordering key lets the key's next job run.
            self._dispatcher.wake()
        return result

    async def purge(self, flt: JobFilter, dry_run: bool) -> PurgeCount:
        """Delete the finished jobs matching ``flt`` (``job_purge_matching``)."""
        statuses = _bulk_statuses(flt, FINISHED_STATUSES, "purged")
        return await self._call(self._store.job_purge_matching, flt, statuses, dry_run)

    # -- drain ---------------------------------------------------------------------

    @property
    def draining(self) -> bool:
        return self.local_drain or self.cluster_drain

    @property
    def drained_by(self) -> str | None:
        """What drains this coordinator: "cluster", "coordinator" or None (serving)."""
        if self.cluster_drain:
            return "cluster"
        return "coordinator" if self.local_drain else None

    async def drain(self, cluster: bool, worker_id: str) -> None:
        if cluster and worker_id:
            raise InvalidArgument("give either cluster or worker_id, not both")
        if worker_id:
            await self._drain_worker(worker_id)
            return
        if cluster:
            await self._call(self._store.cluster_flag_set, CLUSTER_DRAIN_FLAG, "1", self._now())
            self.cluster_drain = True
        else:
            self.local_drain = True
        self._apply_drain()

    async def undrain(self, cluster: bool, worker_id: str = "") -> None:
        if cluster and worker_id:
            raise InvalidArgument("give either cluster or worker_id, not both")
        if worker_id:
            await self._undrain_worker(worker_id)
            return
        if cluster:
            await self._call(self._store.cluster_flag_set, CLUSTER_DRAIN_FLAG, None, self._now())
            self.cluster_drain = False
        else:
            self.local_drain = False
        self._apply_drain()

    async def _drain_worker(self, worker_id: str) -> None:
        session = self._dispatcher.sessions.get(worker_id)
        if session is not None:
            self._drain_session(session)
            return
        # Connected to another replica? Leave a request its cluster sync applies.
        now = self._now()
        rows = await self._call(self._store.worker_list, now - self.stale_us())
        if not any(r.worker_id == worker_id for r in rows):
            raise NotFound(
                f"worker {worker_id!r} is not connected to any coordinator (see ListWorkers)"
            )
        owner = next(r.coordinator_id for r in rows if r.worker_id == worker_id)
        await self._call(
            self._store.cluster_flag_set, WORKER_DRAIN_FLAG_PREFIX + worker_id, owner, now
        )

    def _drain_session(self, session: WorkerSession) -> None:
        self._drained_sessions.add(session)
        session.draining = True
        if session not in self._signalled:
            session.outbox.put_nowait(DrainSignal("worker drained by an operator"))
            self._signalled.add(session)
        self._workers_changed()

    async def _undrain_worker(self, worker_id: str) -> None:
        now = self._now()
        session = self._dispatcher.sessions.get(worker_id)
        if session is not None:
            self._undrain_session(session)
            # A drain request for it still waiting on another replica is void.
            await self._call(
                self._store.cluster_flag_set, WORKER_DRAIN_FLAG_PREFIX + worker_id, None, now
            )
            return
        rows = await self._call(self._store.worker_list, now - self.stale_us())
        row = next((r for r in rows if r.worker_id == worker_id), None)
        if row is None:
            raise NotFound(
                f"worker {worker_id!r} is not connected to any coordinator (see ListWorkers)"
            )
        flags = await self._call(self._store.cluster_flag_list, WORKER_DRAIN_FLAG_PREFIX)
        pending = WORKER_DRAIN_FLAG_PREFIX + worker_id in flags
        if pending:
            await self._call(
                self._store.cluster_flag_set, WORKER_DRAIN_FLAG_PREFIX + worker_id, None, now
            )
        if not row.draining and not pending:
            raise FailedPrecondition(f"worker {worker_id!r} is not drained")
        if row.draining:
            await self._call(
                self._store.cluster_flag_set,
                WORKER_UNDRAIN_FLAG_PREFIX + worker_id,
                row.coordinator_id,
                now,
            )

    def _undrain_session(self, session: WorkerSession) -> None:
        if session not in self._drained_sessions:
            if session.draining or session in self._signalled:
                raise FailedPrecondition(
                    f"worker {session.worker_id!r} is drained because {self._drain_reason()}; "
                    "undrain that instead"
                )
            raise FailedPrecondition(f"worker {session.worker_id!r} is not drained")
        if self.draining:
            # The coordinator or cluster drain still holds it; it was only
            # drained by id on top of that.
            self._drained_sessions.discard(session)
            session.draining = False
            self._workers_changed()
            return
        # The worker stopped granting credit on this stream; closing it makes
        # the SDK reconnect and grant on a new, undrained stream.
        self._drained_sessions.discard(session)
        self._signalled.discard(session)
        session.close()

    def _apply_drain(self) -> None:
        dispatcher = self._dispatcher
        if self.draining:
            dispatcher.leasing = False
            reason = self._drain_reason()
            for session in list(dispatcher.sessions.values()):
                self._signal(session, reason)
            return
        if dispatcher.leasing:
            return
        dispatcher.leasing = True
        for session in list(self._signalled):
            if session not in self._drained_sessions:
                # The worker stopped granting credit on this stream; closing
                # it makes the SDK reconnect and grant again.
                self._signalled.discard(session)
                session.close()
        dispatcher.wake()

    def _signal(self, session: WorkerSession, reason: str) -> None:
        if session in self._signalled or session.closed:
            return
        self._signalled.add(session)
        session.outbox.put_nowait(DrainSignal(reason))
        self._workers_changed()

    def _drain_reason(self) -> str:
        return (
            "cluster drained by an operator"
            if self.cluster_drain
            else ("coordinator drained by an operator")
        )

    def _told_to_drain(self, session: WorkerSession) -> bool:
        return session.draining or session in self._signalled

    # -- workers and stats -----------------------------------------------------------

    async def list_workers(self) -> list[WorkerView]:
        """Every connected worker of the cluster, by worker id then coordinator.

        Workers of this coordinator are shown live (in-flight jobs, credits,
        drain state) and those of the others as last registered. Last seen
        comes from the registry for every worker, so every replica shows the
        same time for the same worker. Workers of different coordinators that
        announce the same id are different workers: each is listed. Another
        replica's worker whose row that replica has not refreshed for
        ``quiet_after_s`` is marked stale (the replica likely died; the row
        goes after ``stale_after_s``). One worker
        process (the same id, host and pid) registered by two coordinators
        reconnected from one to the other (the first died before its rows
        went): it is listed once, under the coordinator it connected to last.
        """
        me = self._coordinator_id
        now = self._now()
        rows = await self._call(self._store.worker_list, now - self.stale_us())
        registered = {r.worker_id: r for r in rows if r.coordinator_id == me}
        local = []
        for s in self._dispatcher.sessions.values():
            row = registered.get(s.worker_id)
            seen = row.last_seen_at if row is not None else s.connected_at
            local.append(_session_view(s, me, self._told_to_drain(s), max(seen, s.connected_at)))
        quiet_before = now - int(self.config.quiet_after_s * 1_000_000)
        remote = [
            _row_view(r, stale=r.last_seen_at < quiet_before)
            for r in rows
            if r.coordinator_id != me
        ]
        latest: dict[tuple[str, str, int] | int, WorkerView] = {}
        for n, view in enumerate([*remote, *local]):  # of equal times, this replica's wins
            # A worker that announced no host and pid is told apart by nothing.
            process = (view.worker_id, view.hostname, view.pid) if view.pid else n
            kept = latest.get(process)
            if kept is None or view.connected_at >= kept.connected_at:
                latest[process] = view
        return sorted(latest.values(), key=lambda w: (w.worker_id, w.coordinator_id))

    async def window_counts(
        self, tenant_id: str, windows_us: Sequence[int], category: int = 0
    ) -> list[WindowCounts]:
        """Completions, failures and retries of attempts ended in each window up to now."""
        store, now = self._store, self._now()
        out = []
        for window_us in windows_us:
            since = now - window_us
            outcomes = await self._call(store.attempt_outcome_counts, since, category, tenant_id)
            failed, retried = await self._call(
                store.attempt_failure_counts, since, tenant_id, category
            )
            out.append(
                WindowCounts(
                    window_us, outcomes.get(int(AttemptOutcome.COMPLETED), 0), failed, retried
                )
            )
        return out

    async def stats(self, tenant_id: str, window_us: int, category: int = 0) -> Stats:
        """The job counts, recent attempts, drain state and cluster workers
        (of one tenant and one category when given; see ``Stats``)."""
        store, now = self._store, self._now()
        since = now - window_us
        counts = await self._call(store.job_count_by_status, tenant_id, category)
        held = await self._call(store.job_count_held, tenant_id, category)
        scheduled = {
            (r.tenant_id, r.job_type): r.n
            for r in await self._call(store.job_count_scheduled, now, tenant_id, category)
        }
        oldest = await self._call(store.job_oldest_pending_due, now, tenant_id, category)
        outcomes = await self._call(store.attempt_outcome_counts, since, category, tenant_id)
        failed, retried = await self._call(store.attempt_failure_counts, since, tenant_id, category)
        totals = dict.fromkeys(JobStatus, 0)
        for row in counts:
            totals[JobStatus(row.status)] += row.n
        workers = await self.list_workers()
        if tenant_id:
            workers = [w for w in workers if tenancy.allows(w.tenants, tenant_id)]
        return Stats(
            counts=tuple(
                StatusCount(
                    r.tenant_id,
                    r.job_type,
                    JobStatus(r.status),
                    r.n,
                    scheduled.get((r.tenant_id, r.job_type), 0)
                    if r.status == JobStatus.PENDING
                    else 0,
                )
                for r in counts
            ),
            totals=totals,
            held=held,
            scheduled=sum(scheduled.values()),
            oldest_pending_age_us=(now - oldest) if oldest is not None else 0,
            completions=outcomes.get(int(AttemptOutcome.COMPLETED), 0),
            failures=failed,
            retries=retried,
            draining=self.draining,
            connected_workers=len(workers),
            read_time_us=now,
        )

    # -- the cluster registry (read and written by the cluster-sync chore) -------------

    def worker_records(self) -> list[WorkerRecord]:
        """This coordinator's open streams as worker registry rows."""
        return [
            _record(s, self._told_to_drain(s))
            for s in self._dispatcher.sessions.values()
            if not s.closed
        ]

    def apply_cluster_flags(self, flags: Mapping[str, str]) -> list[str]:
        """Apply the cluster flags as stored; returns the flags handled here, to clear.

        The cluster drain flag drains or undrains this coordinator. A worker
        drain or undrain request names the replica that held the worker; it
        applies to that connection only, so the flag goes once handled.
        """
        cluster = CLUSTER_DRAIN_FLAG in flags
        if cluster != self.cluster_drain:
            self.cluster_drain = cluster
            self._apply_drain()
        me = self._coordinator_id
        sessions = self._dispatcher.sessions
        handled = []
        for name, owner in flags.items():
            if owner != me:
                continue
            if name.startswith(WORKER_DRAIN_FLAG_PREFIX):
                session = sessions.get(name.removeprefix(WORKER_DRAIN_FLAG_PREFIX))
                if session is not None:
                    self._drain_session(session)
            elif name.startswith(WORKER_UNDRAIN_FLAG_PREFIX):
                session = sessions.get(name.removeprefix(WORKER_UNDRAIN_FLAG_PREFIX))
                if session is not None and session in self._drained_sessions:
                    self._undrain_session(session)
            else:
                continue
            handled.append(name)
        return handled

    def stale_us(self) -> int:
        """Registry rows older than this (us) belong to a coordinator that died."""
        return int(self.config.stale_after_s * 1_000_000)

    # -- helpers -------------------------------------------------------------------------

    async def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(fn, *args, **kwargs)

    def _now(self) -> int:
        return self._clock.now_us()

    def _workers_changed(self) -> None:
        self._hooks.workers_changed()


# CancelJob also sets a FAULTED job aside (CANCELLED, never run again); bulk
# cancel keeps to the live statuses, so it never empties the dead-letter set.
_CANCEL_ONE = (*LIVE_STATUSES, JobStatus.FAULTED)


def _applied(
    change: StateChange,
    job_id: str,
    verb: str,
    allowed: Sequence[JobStatus],
    hints: Mapping[JobStatus, str] | None = None,
) -> JobRow:
    """The job a guarded write changed; NotFound, or FailedPrecondition naming
    its status (and the ``hints`` of that status: what to do instead)."""
    if change.row is None:
        raise NotFound(f"job {job_id} not found")
    if not change.changed:
        state = JobStatus(change.row.status)
        names = " or ".join(s.name for s in allowed)
        hint = (hints or {}).get(state)
        raise FailedPrecondition(
            f"job {job_id} is {state.name}; only {names} jobs can be {verb}"
            + (f" ({hint})" if hint else "")
        )
    return change.row


def _bulk_statuses(
    flt: JobFilter, allowed: Sequence[JobStatus], verb: str
) -> tuple[JobStatus, ...]:
    if not flt.statuses:
        return tuple(allowed)
    wrong = [JobStatus(s).name for s in flt.statuses if s not in allowed]
    if wrong:
        names = " or ".join(s.name for s in allowed)
        raise InvalidArgument(
            f"filter.statuses has {', '.join(wrong)}; only {names} jobs can be {verb}"
        )
    return tuple(JobStatus(s) for s in flt.statuses)


def _record(s: WorkerSession, draining: bool) -> WorkerRecord:
    return WorkerRecord(
        worker_id=s.worker_id,
        hostname=s.hostname,
        pid=s.pid,
        sdk_version=s.sdk_version,
        job_types=sorted(s.job_types),
        slots=s.slots,
        connected_at=s.connected_at,
        draining=draining,
        tenants=None if s.tenants is None else sorted(s.tenants),
    )


def _session_view(
    s: WorkerSession, coordinator_id: str, told_to_drain: bool, last_seen_at: int
) -> WorkerView:
    return WorkerView(
        worker_id=s.worker_id,
        coordinator_id=coordinator_id,
        hostname=s.hostname,
        pid=s.pid,
        sdk_version=s.sdk_version,
        job_types=tuple(sorted(s.job_types)),
        slots=s.slots,
        in_flight=tuple(sorted(s.in_flight)),
        connected_at=s.connected_at,
        last_seen_at=last_seen_at,
        credits=s.credits,
        draining=told_to_drain,
        tenants=None if s.tenants is None else tuple(sorted(s.tenants)),
    )


def _row_view(r: WorkerRow, *, stale: bool = False) -> WorkerView:
    # Another replica's worker: in-flight jobs and credits live in that
    # replica's memory; last_seen_at is when it last vouched for the stream.
    return WorkerView(
        worker_id=r.worker_id,
        coordinator_id=r.coordinator_id,
        hostname=r.hostname,
        pid=r.pid,
        sdk_version=r.sdk_version,
        job_types=tuple(json.loads(r.job_types or "[]")),
        slots=r.slots,
        in_flight=(),
        connected_at=r.connected_at,
        last_seen_at=r.last_seen_at,
        credits=0,
        draining=bool(r.draining),
        tenants=None if r.tenants is None else tuple(json.loads(r.tenants)),
        stale=stale,
    )


def registered_worker(r: WorkerRow) -> WorkerView:
    """A worker as the registry every replica writes shows it (no live state)."""
    return _row_view(r)


__all__ = [
    "Operations",
    "OperationsConfig",
    "Stats",
    "StatusCount",
    "WorkerView",
    "registered_worker",
]
