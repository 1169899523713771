"""The engine: the rules of enqueue, acquisition, leases, retries and pauses.

The API layer calls these coroutines with domain values; the engine validates,
decides and calls the store's named queries in a thread pool so the event
loop never blocks on the database.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import random
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from coordinator.clock import Clock, DatabaseClock, SystemClock
from coordinator.engine.attempts import Attempts, release_end
from coordinator.engine.bounds import check_retry_policy, check_timeout
from coordinator.engine.dispatch import Dispatcher
from coordinator.engine.fairness import FairScheduler
from coordinator.engine.limits import Admission, LimitBook
from coordinator.engine.operations import Operations, OperationsConfig
from coordinator.engine.retries import decide_failure
from coordinator.engine.runner import StoreRunner
from coordinator.engine.sessions import WorkerSession
from coordinator.engine.set_aside import OutcomeNotRecorded, SetAsideBook
from coordinator.errors import (
    FailedPrecondition,
    InvalidArgument,
    LeaseLost,
    NotFound,
)
from coordinator.ids import is_valid_id, new_id, new_token
from coordinator.model import (
    DEFAULT_RETRY_POLICY,
    FINISHED_STATUSES,
    MAX_ATTEMPTS,
    AttemptEnd,
    AttemptOutcome,
    AttemptRow,
    Candidate,
    Claim,
    Completion,
    ConcurrencyLimit,
    DirectLeases,
    Failure,
    JobFilter,
    JobRecord,
    JobRow,
    JobStatus,
    JobTypeDefaults,
    LeasedForFailure,
    LimitKind,
    NewJob,
    PauseKind,
    PauseScope,
    Release,
    RetryPolicy,
)
from coordinator.store import Store
from coordinator.telemetry.hooks import NO_TELEMETRY, EngineTelemetry

log = logging.getLogger(__name__)

Outcome = Completion | Failure | Release
# What a queued single enqueue learns: (id, deduplicated, status), and the
# stored form of the job when the insert leased it to a waiting worker.
_Enqueued = tuple[tuple[str, bool, int], "JobRecord | None"]


@dataclass
class EngineConfig:
    """Engine settings; every field has a production default."""

    # Lease length when a job sets no heartbeat timeout.
    default_lease_ms: int = 30_000
    # Largest payload accepted at enqueue.
    max_payload_bytes: int = 1024 * 1024
    # Largest EnqueueBatch / ReportOutcomes / Heartbeat.
    max_batch_size: int = 5_000
    # Longest accepted identifier or job type.
    max_string_length: int = 512
    # Most jobs leased by one acquisition statement.
    acquire_batch_max: int = 500
    # Re-check for eligible work this often while workers wait with credit.
    idle_poll_s: float = 15.0
    # Operator actions: drain, the cluster's worker list.
    operations: OperationsConfig = field(default_factory=OperationsConfig)
    # Threads running store calls (the SQLite store uses one).
    store_threads: int = 8


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


@dataclass(frozen=True, slots=True)
class OutcomeResult:
    job_id: str
    accepted: bool
    status: JobStatus | None = None
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class LeaseAnswer:
    job_id: str
    state: str  # "extended" | "lost" | "cancel_requested"
    lease_expires_at: int | None = None


@dataclass(frozen=True, slots=True)
class ListPage:
    jobs: list[JobRow]
    next_page_token: str


class Engine:
    """Owns the store, the dispatcher and the background chores."""

    def __init__(
        self,
        store: Store,
        config: EngineConfig | None = None,
        clock: Clock | None = None,
        coordinator_id: str | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.config = config or EngineConfig()
        if clock is None and store.is_postgres:
            # Replicas keep the database's time, not their hosts' (docs/design.md).
            clock = DatabaseClock(store.database_time_us)
        self.clock = clock or SystemClock()
        # Every store call of the engine, its chores and operator actions runs here.
        self.run_store = StoreRunner(1 if store.is_sqlite else self.config.store_threads)
        self.coordinator_id = coordinator_id or new_id()
        # Draws the backoff jitter of every retry decision.
        self.rng = rng or random.Random()
        self.fair = FairScheduler()
        self.dispatcher = Dispatcher(
            clock=self.clock,
            fair=self.fair,
            candidates=self._candidates,
            claim=self._claim,
            release=self._hand_back_orphans,
            claim_fair=self._claim_fair,
            acquire_batch_max=self.config.acquire_batch_max,
            idle_poll_s=self.config.idle_poll_s,
        )
        # Set by the chore supervisor (coordinator/chores); no-ops without it.
        self.hooks = ChoreHooks()
        # Metrics and spans; replaced by coordinator.telemetry when configured.
        self.telemetry: EngineTelemetry = NO_TELEMETRY
        # Rows the chores and outcome reports could not process (see set_aside.py).
        self.set_aside = SetAsideBook(lambda chore, n: self.telemetry.rows_set_aside(chore, n))
        # The one path for "an attempt ended" (attempts.py).
        self.attempts = Attempts(
            store=store,
            run_store=self.run_store,
            dispatcher=self.dispatcher,
            set_aside=self.set_aside,
            telemetry=lambda: self.telemetry,
            limited=lambda: bool(self.limits),
            now=self.clock.now_us,
        )
        self._listener: Any = None
        self._enqueue_queue: list[tuple[NewJob, asyncio.Future[_Enqueued]]] = []
        self._enqueue_flushing = False
        self.limits = LimitBook()
        self.type_defaults: dict[str, JobTypeDefaults] = {}
        self.ops = Operations(self, self.config.operations)
        self._loop: asyncio.AbstractEventLoop | None = None
        # Hand-backs of jobs a closed stream never sent (awaited by stop).
        self._handing_back: set[asyncio.Task[None]] = set()
        self._started = False

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        """Check the schema, load tenant weights, start the chores. Idempotent."""
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        await self.run_store(self.store.check_schema)
        if isinstance(self.clock, DatabaseClock):
            # Before anything reads the clock; the clock-sync chore keeps it synced.
            await self.run_store(self.clock.sync)
        self.fair.set_weights(await self.run_store(self.store.tenant_weights))
        await self.run_store(self.store.limit_gate_ensure, self.clock.now_us())
        await self.reload_limits()
        if self.store.is_postgres:
            from coordinator.store.notify import WakeListener

            self._listener = WakeListener(self.store.session_url, self._on_remote_wake)
            self._listener.start()
        await self.ops.start()
        self.dispatcher.start()
        self._started = True

    async def stop(self) -> None:
        """Stop the dispatcher, the listener, then release the store. Idempotent.

        The chores run on the engine: their supervisor stops first.
        """
        if not self._started:
            self.run_store.shutdown()
            self.store.dispose()
            return
        self._started = False
        await self.dispatcher.stop()
        if self._handing_back:
            await asyncio.gather(*self._handing_back, return_exceptions=True)
        if self._listener is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._listener.stop)
            self._listener = None
        self.run_store.shutdown()
        self.store.dispose()

    def _on_remote_wake(self, due_at: int) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if due_at == -2:
            loop.call_soon_threadsafe(self.hooks.cluster_flags_changed)
        elif due_at < 0:
            asyncio.run_coroutine_threadsafe(self.reload_limits(), loop)
        else:
            loop.call_soon_threadsafe(self.dispatcher.wake, due_at)

    async def reload_limits(self) -> None:
        """Re-read concurrency limits and job type defaults (after a change here
        or on another replica)."""
        self.limits = _book_of(await self.run_store(self.store.limit_list))
        self.type_defaults = {
            r.job_type: JobTypeDefaults(
                RetryPolicy.from_json(r.retry_policy),
                r.execution_timeout_ms,
                r.heartbeat_timeout_ms,
            )
            for r in await self.run_store(self.store.job_type_defaults_list)
        }
        self.dispatcher.wake()

    async def set_job_type_defaults(self, job_type: str, defaults: JobTypeDefaults) -> None:
        if not job_type:
            raise InvalidArgument("defaults.job_type is required")
        limit = self.config.max_string_length
        if len(job_type) > limit:
            raise InvalidArgument(
                f"defaults.job_type is {len(job_type)} characters long; the limit is {limit}"
            )
        check_retry_policy(defaults.retry_policy, "defaults.retry_policy", limit)
        for name, value in (
            ("execution_timeout", defaults.execution_timeout_ms),
            ("heartbeat_timeout", defaults.heartbeat_timeout_ms),
        ):
            if value is not None and value <= 0:
                raise InvalidArgument(f"{name} must be positive when set")
            check_timeout(value, f"defaults.{name}")
        await self.run_store(
            self.store.job_type_defaults_set,
            job_type,
            defaults.retry_policy.to_json(),
            defaults.execution_timeout_ms,
            defaults.heartbeat_timeout_ms,
        )
        await self.reload_limits()

    async def set_limit(self, limit: ConcurrencyLimit) -> None:
        if limit.max_running < 0:
            raise InvalidArgument("max_running must be >= 0 (0 removes the limit)")
        if not limit.value:
            raise InvalidArgument("value is required: a tenant, job type, definition, key or '*'")
        await self.run_store(
            self.store.limit_set,
            int(limit.kind),
            limit.value,
            limit.max_running,
            self.clock.now_us(),
        )
        await self.reload_limits()

    async def list_limits(self) -> list[tuple[ConcurrencyLimit, int]]:
        """Every limit with its RUNNING count (for '*' limits: the fullest value)."""
        rows = await self.run_store(self.store.limit_list)
        limits = [ConcurrencyLimit(LimitKind(r.kind), r.value, r.max_running) for r in rows]
        running = await self.run_store(
            self.store.job_running_counts, sorted({int(x.kind) for x in limits})
        )
        out = []
        for limit in limits:
            if limit.value == "*":
                count = max((n for (k, _), n in running.items() if k == int(limit.kind)), default=0)
            else:
                count = running.get((int(limit.kind), limit.value), 0)
            out.append((limit, count))
        return out

    # -- enqueue -----------------------------------------------------------------

    def prepare(self, job: NewJob, now: int) -> NewJob:
        """Validate a job from a caller and fill in id, times and defaults."""
        limit = self.config.max_string_length
        if not job.job_type:
            raise InvalidArgument("job_type is required (e.g. 'send-email')")
        if not job.tenant_id:
            raise InvalidArgument("tenant_id is required (use 'default' for single-tenant use)")
        for name in (
            "job_type",
            "tenant_id",
            "definition_id",
            "instance_id",
            "activity_id",
            "activity_node_id",
            "bookmark_id",
            "correlation_id",
            "content_type",
            "traceparent",
            "idempotency_key",
            "concurrency_key",
        ):
            value = getattr(job, name) or ""
            if len(value) > limit:
                raise InvalidArgument(
                    f"{name} is {len(value)} characters long; the limit is {limit}"
                )
        if len(job.payload) > self.config.max_payload_bytes:
            raise InvalidArgument(
                f"payload is {len(job.payload)} bytes; the limit is "
                f"{self.config.max_payload_bytes} bytes (store large data elsewhere and pass a reference)"
            )
        if job.retry_policy:
            check_retry_policy(_parse_policy(job.retry_policy), "retry_policy", limit)
        check_timeout(job.execution_timeout_ms, "execution_timeout")
        check_timeout(job.heartbeat_timeout_ms, "heartbeat_timeout")
        self._apply_type_defaults(job)
        if not _is_int(job.max_attempts) or not 1 <= job.max_attempts <= MAX_ATTEMPTS:
            raise InvalidArgument(
                f"max_attempts must be between 1 and {MAX_ATTEMPTS:,}, got {job.max_attempts}"
            )
        job.id = new_id()
        job.created_at = now
        job.due_at = max(job.due_at, now) if job.due_at else now
        return job

    def _apply_type_defaults(self, job: NewJob) -> None:
        """Fill what the job left unset from its type's defaults, then the engine's.

        The effective policy is stored with the job, so a later change of the
        type's defaults does not alter jobs already enqueued.
        """
        defaults = self.type_defaults.get(job.job_type)
        if defaults is not None:
            own = RetryPolicy.from_json(job.retry_policy)
            merged = own.merged_over(defaults.retry_policy)
            job.retry_policy = merged.to_json()
            if job.execution_timeout_ms is None:
                job.execution_timeout_ms = defaults.execution_timeout_ms
            if job.heartbeat_timeout_ms is None:
                job.heartbeat_timeout_ms = defaults.heartbeat_timeout_ms
        if job.max_attempts == 0:
            policy = RetryPolicy.from_json(job.retry_policy)
            job.max_attempts = policy.max_attempts or DEFAULT_RETRY_POLICY.max_attempts or 3

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[tuple[str, bool, int]]:
        """Store jobs atomically; returns (id, deduplicated, status) per job."""
        if not jobs:
            raise InvalidArgument("no jobs given; send at least one JobSpec")
        if len(jobs) > self.config.max_batch_size:
            raise InvalidArgument(
                f"batch of {len(jobs)} jobs exceeds the limit of {self.config.max_batch_size}"
            )
        now = self.clock.now_us()
        if len(jobs) == 1:
            prepared = [self.prepare(jobs[0], now)]
        else:
            prepared = []
            for index, job in enumerate(jobs):
                try:
                    prepared.append(self.prepare(job, now))
                except InvalidArgument as e:
                    raise InvalidArgument(f"jobs[{index}]: {e}") from None
        result = await self.run_store(self.store.job_insert_many, prepared)
        self.dispatcher.wake_at(j.due_at for j in prepared)
        self.telemetry.enqueued(prepared, result)
        return result

    async def enqueue_one(self, job: NewJob) -> tuple[JobRow, bool]:
        """Store one job; returns it and whether it was deduplicated.

        Concurrent single enqueues are committed together (group commit):
        while one insert is in flight, later calls queue up and go in the
        next statement, so many callers cost few transactions.
        """
        prepared = self.prepare(job, self.clock.now_us())
        future: asyncio.Future[_Enqueued] = asyncio.get_running_loop().create_future()
        self._enqueue_queue.append((prepared, future))
        if not self._enqueue_flushing:
            self._enqueue_flushing = True
            asyncio.get_running_loop().create_task(self._flush_enqueues())
        (job_id, dedup, status), leased = await future
        if dedup:
            row, _ = await self.get_job(job_id)
            return row, True
        if status == JobStatus.RUNNING and leased is not None:
            return leased, False
        return _record_of_new(prepared), False

    async def _flush_enqueues(self) -> None:
        try:
            while self._enqueue_queue:
                batch, self._enqueue_queue = self._enqueue_queue, []
                try:
                    await self._flush_batch(batch)
                except BaseException as e:
                    # Nothing a flush raises may leave a caller waiting for its deadline.
                    for _, future in batch:
                        if not future.done():
                            if isinstance(e, Exception):
                                future.set_exception(e)
                            else:
                                future.cancel()
                    if not isinstance(e, Exception):
                        raise
        finally:
            self._enqueue_flushing = False

    async def _flush_batch(self, batch: list[tuple[NewJob, asyncio.Future[_Enqueued]]]) -> None:
        jobs = [j for j, _ in batch]
        now = self.clock.now_us()
        direct, offered = self._direct_offers(jobs, now)
        try:
            results = await self.run_store(self.store.job_insert_many, jobs, direct)
        except Exception:
            self._refund(offered.values())
            raise
        leased: dict[WorkerSession, list[JobRecord]] = {}
        if direct is not None:
            leased = self._direct_records(jobs, results, direct, offered)
        record_of = {r.id: r for records in leased.values() for r in records}
        # Callers get their answer first: the jobs are committed whatever
        # happens to their delivery below.
        for (job, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result((result, record_of.get(job.id)))
        self.dispatcher.wake_at(
            j.due_at
            for j, (_, _, status) in zip(jobs, results, strict=True)
            if status == JobStatus.PENDING
        )
        self.telemetry.enqueued(jobs, results)
        if direct is not None and leased:
            await self._deliver_direct(leased, direct)

    def _direct_offers(
        self, jobs: Sequence[NewJob], now: int
    ) -> tuple[DirectLeases | None, dict[str, WorkerSession]]:
        """Offer due jobs to workers that wait with free credit (direct dispatch).

        A worker with idle credit had nothing eligible at the last acquisition,
        so handing it a new job at insert costs no fairness or priority, and
        saves the job a trip through a dispatcher pass. Not under concurrency
        limits (they need the counting path) nor while draining. The credit is
        reserved now and refunded for jobs the store does not lease.
        """
        if self.limits or self.dispatcher.paused or not self.store.is_postgres:
            return None, {}
        idle = [
            s
            for s in self.dispatcher.sessions.values()
            if s.credits > 0 and not s.draining and not s.closed
        ]
        if not idle:
            return None, {}
        offered: dict[str, WorkerSession] = {}
        for job in jobs:
            if job.due_at > now:
                continue
            for session in idle:
                if (
                    session.credits > 0
                    and job.job_type in session.job_types
                    and (session.tenants is None or job.tenant_id in session.tenants)
                ):
                    session.credits -= 1
                    offered[job.id] = session
                    break
        if not offered:
            return None, {}
        owners = {job_id: s.worker_id for job_id, s in offered.items()}
        return DirectLeases(owners, new_token(), now, self.config.default_lease_ms), offered

    def _refund(self, sessions: Iterable[WorkerSession]) -> None:
        for session in sessions:
            self.dispatcher.grant(session, 1)

    def _direct_records(
        self,
        jobs: Sequence[NewJob],
        results: Sequence[tuple[str, bool, int]],
        direct: DirectLeases,
        offered: dict[str, WorkerSession],
    ) -> dict[WorkerSession, list[JobRecord]]:
        """The stored forms of the jobs the insert leased, by the session they
        were offered to; credit of offers the store did not lease comes back."""
        by_session: dict[WorkerSession, list[JobRecord]] = {}
        refunds: list[WorkerSession] = []
        for job, (_, deduplicated, status) in zip(jobs, results, strict=True):
            session = offered.get(job.id)
            if session is None:
                continue
            # A deduplicated job was stored earlier; its status is not this lease's.
            if deduplicated or status != JobStatus.RUNNING:
                refunds.append(session)
                continue
            record = _record_of_new(job)
            record.status = int(JobStatus.RUNNING)
            record.attempt = 1
            record.lease_owner = session.worker_id
            record.lease_token = direct.lease_token
            record.started_at = direct.now
            record.lease_expires_at = direct.now + (
                (job.heartbeat_timeout_ms or direct.default_lease_ms) * 1000
            )
            by_session.setdefault(session, []).append(record)
        self._refund(refunds)
        return by_session

    async def _deliver_direct(
        self, leased: dict[WorkerSession, list[JobRecord]], direct: DirectLeases
    ) -> None:
        """Queue jobs leased at insert on the very sessions they were offered to."""
        records = [r for rs in leased.values() for r in rs]
        # Leased at insert is leased all the same: it counts against the
        # tenant's fair share like a lease from an acquisition pass.
        self.fair.charge([r.tenant_id for r in records])
        self._leased(records, direct.now)
        orphans = self.dispatcher.deliver(leased.items(), direct.lease_token)
        if not orphans:
            return
        try:
            await self.attempts.hand_back(orphans, "worker disconnected")
        except Exception:  # noqa: BLE001 - the reaper ends these leases when they expire
            log.warning(
                "could not hand back %d job(s) leased to a worker that left; "
                "their leases expire and they are retried",
                len(orphans),
                exc_info=True,
            )

    async def enqueue_inline(
        self, job: NewJob, owner: str, *, enqueue_if_paused: bool
    ) -> tuple[JobRow, bool, str | None]:
        """Store a job leased to the caller, who runs it now (inline execution).

        Returns ``(row, deduplicated, lease_token)``; the token is None when
        the job was not leased (deduplicated, or held and stored for later).
        The inline lease is admitted under the concurrency limits like any
        other. A job that cannot start now, because a pause covers it or a
        concurrency limit of its scope is full, is refused with
        FAILED_PRECONDITION naming what holds it, unless ``enqueue_if_paused``:
        then it is stored PENDING and runs on a worker once it may.
        """
        if not owner:
            raise InvalidArgument("inline.worker_id is required to run a job inline")
        now = self.clock.now_us()
        prepared = self.prepare(job, now)
        if prepared.due_at > now:
            raise InvalidArgument("an inline job runs now; it cannot have a future due_time")
        token = new_token()
        row, dedup, held = await self.run_store(
            self.store.job_insert_leased,
            prepared,
            owner,
            token,
            now,
            self.config.default_lease_ms,
            enqueue_if_paused,
            functools.partial(_admission_for, [Claim(prepared.id, owner)], [prepared]),
        )
        if row is None:
            if held == "limit":
                raise FailedPrecondition(
                    f"cannot run inline: concurrency limit full ({await self._full_scopes(prepared)}); "
                    "retry when a running job of that scope ends, or set "
                    "enqueue_if_paused to queue it"
                )
            pauses = await self.run_store(
                self.store.pauses_covering,
                prepared.tenant_id,
                prepared.job_type,
                prepared.definition_id,
                prepared.instance_id,
                now,
            )
            names = ", ".join(
                f"{PauseKind(p.kind).name.lower()} {p.value or p.tenant_id}" for p in pauses
            )
            raise FailedPrecondition(
                f"cannot run inline: paused ({names or 'a pause'}); "
                "retry after unpause or set enqueue_if_paused to queue it"
            )
        if dedup or held:
            if held:
                self.dispatcher.wake()
            return row, dedup, None
        self.telemetry.enqueued([prepared], [(row.id, False, int(JobStatus.RUNNING))])
        self._leased([row], now)
        return row, False, token

    async def _full_scopes(self, job: NewJob) -> str:
        """The limited scopes of ``job`` that are full, as text for an error."""
        await self.reload_limits()
        running = await self.run_store(self.store.job_running_counts, self.limits.kinds)
        full = [
            f"{LimitKind(kind).name.lower()} {value}: {running.get((kind, value), 0)} "
            f"of {limit} running"
            for (kind, value), limit in self.limits.scopes_of(job)  # type: ignore[arg-type]
            if running.get((kind, value), 0) >= limit
        ]
        return "; ".join(full) or "a limit of its scope"

    # -- reads -------------------------------------------------------------------

    async def ping_store(self) -> None:
        """Raise ``StoreUnavailable`` unless the database answers."""
        await self.run_store(self.store.ping)

    async def job_tenants(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The tenant of each job that exists (for credential tenant scopes)."""
        ids = [j for j in job_ids if is_valid_id(j)]
        if not ids:
            return {}
        rows = await self.run_store(self.store.job_get_many, ids)
        return {r.id: r.tenant_id for r in rows}

    async def get_job(
        self, job_id: str, with_attempts: bool = False
    ) -> tuple[JobRow, list[AttemptRow]]:
        _check_id(job_id)
        row = await self.run_store(self.store.job_get, job_id)
        if row is None:
            raise NotFound(f"job {job_id} not found")
        attempts = await self.run_store(self.store.job_attempts, job_id) if with_attempts else []
        return row, attempts

    async def list_jobs(self, flt: JobFilter, page_size: int, page_token: str) -> ListPage:
        if page_size < 0 or page_size > 1000:
            raise InvalidArgument("page_size must be between 1 and 1000 (0 means 100)")
        size = page_size or 100
        after = _decode_page_token(page_token) if page_token else None
        rows = await self.run_store(self.store.job_list, flt, after, size + 1)
        next_token = _encode_page_token(rows[size - 1].id) if len(rows) > size else ""
        return ListPage(rows[:size], next_token)

    async def wait_for_finish(self, job_id: str) -> JobRow:
        """Return the job once it is COMPLETED, FAULTED or CANCELLED.

        Wakes at once for outcomes recorded by this coordinator and re-reads
        every second for those recorded elsewhere; the caller's deadline bounds it.
        """
        while True:
            row, _ = await self.get_job(job_id)
            if row.status in FINISHED_STATUSES:
                return row
            event = self.attempts.waiters.event(job_id)
            try:
                await asyncio.wait_for(event.wait(), timeout=1.0)
            except TimeoutError:
                pass
            finally:
                self.attempts.waiters.done_with(job_id, event)

    # -- acquisition (called by the dispatcher) ------------------------------------

    async def _candidates(
        self,
        job_types: Sequence[str],
        per_lane: int,
        now: int,
        tenants: frozenset[str] | None = None,
    ) -> list[Candidate]:
        exclude = None
        if self.limits:
            running = await self.run_store(self.store.job_running_counts, self.limits.kinds)
            exclude = self.limits.exclusions(running)
        return await self.run_store(
            self.store.job_candidates, job_types, per_lane, now, exclude, tenants
        )

    async def _claim_fair(
        self,
        job_types: Sequence[str],
        tenants: frozenset[str] | None,
        owners: list[str],
        token: str,
        now: int,
    ) -> list[JobRow] | None:
        """One-statement acquisition on PostgreSQL when no concurrency limit applies.

        None sends the pass to the counting path: when this replica knows of
        limits, or when the store has limits this replica has not loaded yet
        (they are loaded now).
        """
        if self.limits or not self.store.is_postgres or not owners:
            return None
        fair_tenants, starts, weights, floor = self.fair.snapshot()
        rows = await self.run_store(
            self.store.job_claim_fair,
            job_types,
            tenants,
            owners,
            (fair_tenants, starts, weights, floor),
            token,
            now,
            self.config.default_lease_ms,
        )
        if rows is None:
            await self.reload_limits()
            return None
        self._leased(rows, now)
        return rows

    async def _claim(
        self, claims: Sequence[Claim], picks: Sequence[Candidate], token: str, now: int
    ) -> list[JobRow]:
        # Admission is decided from the limits as stored, read in the claim's
        # own transaction: a limit set on another replica holds here before
        # this replica has reloaded it.
        admission = functools.partial(_admission_for, claims, picks)
        rows = await self.run_store(
            self.store.job_claim, claims, token, now, self.config.default_lease_ms, admission
        )
        self._leased(rows, now)
        return rows

    def _leased(self, rows: Sequence[JobRow], now: int) -> None:
        """Bookkeeping for jobs just leased, however they were leased: the
        reaper and the timeout chore learn their deadlines (``hooks``), metrics count them."""
        if not rows:
            return
        self.hooks.lease_expires(min(r.lease_expires_at or now for r in rows))
        deadlines = [now + r.execution_timeout_ms * 1000 for r in rows if r.execution_timeout_ms]
        if deadlines:
            self.hooks.execution_deadline(min(deadlines))
        self.telemetry.leased(rows, now)

    async def _hand_back_orphans(self, refs: Sequence[tuple[str, str]]) -> None:
        """Jobs leased to a worker that left before they were delivered go back."""
        await self.attempts.hand_back(refs, "worker disconnected")

    def open_session(self, session: WorkerSession) -> None:
        if not session.job_types:
            raise InvalidArgument("the worker must serve at least one job type")
        session.connected_at = session.last_heartbeat_at = self.clock.now_us()
        self.dispatcher.add_session(session)
        self.ops.session_opened(session)

    def close_session(self, session: WorkerSession) -> None:
        """The stream ended: forget the session, and hand back at once the jobs
        it never sent (queued, or in a message not completely written), which
        would otherwise wait out their lease. Jobs already sent stay leased:
        the worker may be running them and reports through unary calls."""
        self.dispatcher.remove_session(session)
        self.ops.session_closed(session)
        unsent = session.take_unsent()
        if unsent and self._loop is not None and not self._loop.is_closed():
            task = self._loop.create_task(self._hand_back(session, unsent))
            self._handing_back.add(task)
            task.add_done_callback(self._handing_back.discard)

    async def _hand_back(self, session: WorkerSession, refs: list[tuple[str, str]]) -> None:
        log.info(
            "handing back %d job(s) leased to worker %r that its stream ended before sending",
            len(refs),
            session.worker_id,
        )
        try:
            await self.attempts.hand_back(refs, "the worker's stream ended before the job was sent")
        except Exception:  # noqa: BLE001 - their leases expire and the reaper retries them
            log.warning(
                "could not hand back %d unsent job(s) of worker %r; their leases will expire",
                len(refs),
                session.worker_id,
                exc_info=True,
            )

    async def end_session(
        self,
        session: WorkerSession,
        error: Exception | None,
        reason: str,
        keep: Collection[str] = (),
    ) -> int:
        """End a stream from the coordinator's side.

        Nothing more is sent on it (queued batches included) and its call ends
        with ``error`` (cleanly when None). The jobs delivered on it, but those
        in ``keep``, are handed back at once with ``reason``, their attempt
        refunded. Returns how many were handed back.
        """
        session.close(error)
        refs = [
            (job_id, token) for job_id, token in session.in_flight.items() if job_id not in keep
        ]
        self.close_session(session)
        if refs:
            await self.attempts.hand_back(refs, reason)
        return len(refs)

    @property
    def draining(self) -> bool:
        """True while this coordinator (or the whole cluster) is drained."""
        return self.ops.draining

    def grant(self, session: WorkerSession, credits: int) -> None:
        if credits < 0:
            raise InvalidArgument(f"credits must be >= 0, got {credits}")
        self.dispatcher.grant(session, credits)

    # -- leases and outcomes ---------------------------------------------------------

    async def heartbeat(
        self, worker_id: str, refs: Sequence[tuple[str, str]], principal: str | None = None
    ) -> list[LeaseAnswer]:
        """Extend leases; ``principal`` is the caller's credential key (None = auth off)."""
        self._check_refs(refs)
        now = self.clock.now_us()
        session = self.dispatcher.sessions.get(worker_id)
        if session is not None and session.principal == principal:
            # Only the credential that opened the stream vouches for it.
            session.last_heartbeat_at = now
        rows = await self.run_store(
            self.store.lease_extend_many, refs, now, self.config.default_lease_ms
        )
        got = {job_id: (exp, cancel) for job_id, exp, cancel in rows}
        answers = []
        for job_id, _token in refs:
            if job_id not in got:
                answers.append(LeaseAnswer(job_id, "lost"))
                continue
            expires, cancel = got[job_id]
            answers.append(
                LeaseAnswer(job_id, "cancel_requested" if cancel else "extended", expires)
            )
        return answers

    async def report(self, outcomes: Sequence[Outcome]) -> list[OutcomeResult]:
        """Record outcomes; each is applied at most once, guarded by its lease token."""
        self._check_refs([(o.job_id, o.lease_token) for o in outcomes])
        now = self.clock.now_us()
        completions = [o for o in outcomes if isinstance(o, Completion)]
        others = [o for o in outcomes if not isinstance(o, Completion)]
        done: set[str] = set()
        ends: dict[str, AttemptEnd] = {}
        refused: list[tuple[str, BaseException]] = []
        # Under concurrency limits every ended attempt frees a slot that a
        # waiting job may take: wake acquisition here and on every replica.
        limited = self.attempts.limited
        if completions:
            completed = await self.run_store(
                self.store.job_complete_many, completions, now, wake=limited
            )
            done = {j for j, status in completed.items() if status == JobStatus.COMPLETED}
            # A cancel was requested: the job ended CANCELLED, its attempt COMPLETED.
            for job_id, status in completed.items():
                if status != JobStatus.COMPLETED:
                    ends[job_id] = AttemptEnd(
                        job_id=job_id, outcome=AttemptOutcome.COMPLETED, new_status=status
                    )
        if others:
            decide = functools.partial(self._decide_other, {o.job_id: o for o in others}, now)
            refs = [(o.job_id, o.lease_token) for o in others]
            ended, refused = await self.attempts.apply(refs, decide, now, "outcomes")
            ends.update(ended)
        # Only outcomes that applied end an attempt: a rejected one (a stale
        # holder's) must not touch the entry of the session holding the job now.
        self.attempts.ended(
            ends,
            now,
            completed=done,
            forget=[
                (o.job_id, o.lease_token) for o in outcomes if o.job_id in done or o.job_id in ends
            ],
        )
        results = []
        credited: set[str] = set()
        not_recorded = dict(refused)
        for o in outcomes:
            # A job named twice in one report was recorded once: only the
            # first mention is answered as accepted.
            if o.job_id in credited:
                results.append(OutcomeResult(o.job_id, False, error=LeaseLost(o.job_id)))
            elif o.job_id in not_recorded:
                error = OutcomeNotRecorded(o.job_id, not_recorded[o.job_id])
                results.append(OutcomeResult(o.job_id, False, error=error))
            elif o.job_id in done:
                results.append(OutcomeResult(o.job_id, True, JobStatus.COMPLETED))
            elif o.job_id in ends:
                results.append(OutcomeResult(o.job_id, True, ends[o.job_id].new_status))
            else:
                results.append(OutcomeResult(o.job_id, False, error=LeaseLost(o.job_id)))
            credited.add(o.job_id)
        return results

    async def report_one(self, outcome: Outcome) -> OutcomeResult:
        """Like ``report`` for one outcome, telling a lost lease from an unknown job."""
        (result,) = await self.report([outcome])
        if isinstance(result.error, OutcomeNotRecorded):
            raise result.error
        if not result.accepted:
            row = await self.run_store(self.store.job_get, outcome.job_id)
            if row is None:
                raise NotFound(f"job {outcome.job_id} not found")
            state = JobStatus(row.status).name
            raise LeaseLost(
                outcome.job_id,
                f"the job is {state} and the lease token is no longer current "
                "(the lease expired, or the job was unlocked or already finished)",
            )
        return result

    def _decide_other(
        self, by_id: dict[str, Failure | Release], now: int, row: LeasedForFailure
    ) -> AttemptEnd:
        outcome = by_id[row.id]
        if isinstance(outcome, Release):
            return release_end(outcome, row)
        end = decide_failure(
            row,
            now=now,
            error=outcome.error,
            error_kind=outcome.error_kind,
            non_retryable=outcome.non_retryable,
            retry_at=outcome.retry_at,
            outcome=AttemptOutcome.FAILED,
            rng=self.rng,
        )
        return replace(end, traceback=outcome.traceback or None)

    def _check_refs(self, refs: Sequence[tuple[str, str]]) -> None:
        if len(refs) > self.config.max_batch_size:
            raise InvalidArgument(
                f"{len(refs)} entries exceed the batch limit of {self.config.max_batch_size}"
            )
        for job_id, token in refs:
            _check_id(job_id)
            if not token:
                raise InvalidArgument(f"lease_token is required for job {job_id}")

    # -- pauses and weights ---------------------------------------------------------

    async def pause(
        self, scope: PauseScope, actor: str, reason: str, expires_at: int | None
    ) -> Any:
        _check_scope(scope)
        now = self.clock.now_us()
        if expires_at is not None and expires_at <= now:
            raise InvalidArgument("expire_time must be in the future")
        record = await self.run_store(
            self.store.pause_create, new_id(), scope, actor, reason, expires_at, now
        )
        if expires_at is not None:
            self.dispatcher.wake(expires_at)
        return record

    async def unpause(self, scope: PauseScope, actor: str) -> list[Any]:
        _check_scope(scope)
        lifted = await self.run_store(self.store.pause_lift, scope, actor, self.clock.now_us())
        if not lifted:
            raise NotFound(f"no active pause on {scope.kind.name.lower()} {_scope_text(scope)}")
        self.dispatcher.wake()
        return lifted

    async def list_pauses(self, include_lifted: bool, tenant_id: str) -> list[Any]:
        return await self.run_store(
            self.store.pause_list,
            self.clock.now_us(),
            include_lifted=include_lifted,
            tenant_id=tenant_id,
        )

    async def set_tenant_weight(self, tenant_id: str, weight: int) -> None:
        if not tenant_id:
            raise InvalidArgument("tenant_id is required")
        if weight < 1 or weight > 10_000:
            raise InvalidArgument("weight must be between 1 and 10000")
        await self.run_store(self.store.tenant_set_weight, tenant_id, weight)
        self.fair.set_weights({tenant_id: weight})

    # -- stats -------------------------------------------------------------------------

    async def stats(self, tenant_id: str, window_us: int) -> dict[str, Any]:
        now = self.clock.now_us()
        counts = await self.run_store(self.store.job_count_by_status, tenant_id)
        oldest = await self.run_store(self.store.job_oldest_pending_due, now, tenant_id)
        recent = await self.run_store(self.store.attempt_outcome_counts, now - window_us)
        totals = dict.fromkeys(JobStatus, 0)
        for row in counts:
            totals[JobStatus(row.status)] += row.n
        return {
            "counts": counts,
            "totals": totals,
            "oldest_pending_age_us": (now - oldest) if oldest is not None else 0,
            "completions": recent.get(int(AttemptOutcome.COMPLETED), 0),
            "failures": sum(n for o, n in recent.items() if o != int(AttemptOutcome.COMPLETED)),
            "connected_workers": len(self.dispatcher.sessions),
            "draining": self.dispatcher.paused,
        }


def _record_of_new(job: NewJob) -> JobRecord:
    """The stored form of a job just inserted PENDING."""
    return JobRecord(
        id=job.id,
        job_type=job.job_type,
        tenant_id=job.tenant_id,
        definition_id=job.definition_id,
        definition_version=job.definition_version,
        instance_id=job.instance_id,
        activity_id=job.activity_id,
        activity_node_id=job.activity_node_id,
        bookmark_id=job.bookmark_id,
        correlation_id=job.correlation_id,
        payload=job.payload,
        content_type=job.content_type,
        category=job.category,
        priority=job.priority,
        status=int(JobStatus.PENDING),
        attempt=0,
        max_attempts=job.max_attempts,
        retry_policy=job.retry_policy,
        execution_timeout_ms=job.execution_timeout_ms,
        heartbeat_timeout_ms=job.heartbeat_timeout_ms,
        created_at=job.created_at,
        due_at=job.due_at,
        started_at=None,
        finished_at=None,
        lease_owner=None,
        lease_token=None,
        lease_expires_at=None,
        last_error=None,
        last_error_kind=None,
        result=None,
        result_content_type=None,
        idempotency_key=job.idempotency_key,
        traceparent=job.traceparent,
        tracestate=job.tracestate,
        concurrency_key=job.concurrency_key,
        cancel_requested=False,
        replay_of=job.replay_of,
    )


def _book_of(rows: Iterable[Any]) -> LimitBook:
    """The limits in stored rows (wfj_concurrency_limits)."""
    return LimitBook(ConcurrencyLimit(LimitKind(r.kind), r.value, r.max_running) for r in rows)


def _admission_for(
    claims: Sequence[Claim], picks: Sequence[Candidate], rows: Sequence[Any]
) -> Admission:
    return Admission(_book_of(rows), claims, picks)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_policy(text: str) -> RetryPolicy:
    try:
        return RetryPolicy.from_json(text)
    except (ValueError, TypeError):
        raise InvalidArgument("retry_policy is not a valid retry policy") from None


def _check_id(job_id: str) -> None:
    if not job_id:
        raise InvalidArgument("job_id is required")
    if not is_valid_id(job_id):
        raise InvalidArgument(
            f"job_id {job_id[:80]!r} is malformed; job ids are lower-case UUIDs "
            "like 0190b6e2-5c1a-7d3e-8f00-123456789abc"
        )


def _check_scope(scope: PauseScope) -> None:
    if scope.kind == PauseKind.TENANT:
        if not scope.tenant_id:
            raise InvalidArgument("a tenant pause needs tenant_id")
        if scope.value:
            raise InvalidArgument("a tenant pause takes no value; put the tenant in tenant_id")
    elif not scope.value:
        raise InvalidArgument(f"a {scope.kind.name.lower()} pause needs value (the id to pause)")


def _scope_text(scope: PauseScope) -> str:
    parts = [scope.value] if scope.value else []
    if scope.tenant_id:
        parts.append(f"(tenant {scope.tenant_id})")
    return " ".join(parts)


def _encode_page_token(last_id: str) -> str:
    return base64.urlsafe_b64encode(f"v1:{last_id}".encode()).decode()


def _decode_page_token(token: str) -> str:
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        text = ""
    if not text.startswith("v1:") or not is_valid_id(text[3:]):
        raise InvalidArgument("page_token is not one this server issued; start without it")
    return text[3:]


__all__ = ["Engine", "EngineConfig", "LeaseAnswer", "ListPage", "OutcomeResult"]
