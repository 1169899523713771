"""Enqueue: validation and defaults, batches, single enqueues committed
together (group commit), due jobs offered at insert to workers waiting with
free credit (direct dispatch), and inline runs leased to the caller.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence

from coordinator.clock import Clock
from coordinator.engine.acquisition import Acquisition
from coordinator.engine.admission import admission_for
from coordinator.engine.attempts import Attempts
from coordinator.engine.concurrency_limits import limit_scope_text
from coordinator.engine.config import EngineConfig
from coordinator.engine.dispatch import Dispatcher
from coordinator.engine.limit_settings import LimitSettings
from coordinator.engine.pauses import pause_scope_text
from coordinator.engine.rate_limits import RateBucket, next_start_at, rate_limit_text, when_precise
from coordinator.engine.reads import Reads
from coordinator.engine.runner import StoreRunner
from coordinator.engine.sessions import WorkerSession
from coordinator.engine.ticks import check_tick, is_misfire, misfire_uniqueness, tick_key
from coordinator.engine.uniqueness import check_uniqueness, first_due_at
from coordinator.engine.validation import (
    check_job_type_name,
    check_length,
    check_retry_policy,
    check_timeout,
)
from coordinator.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from coordinator.ids import is_valid_id, new_id, new_token
from coordinator.model import (
    DEFAULT_RETRY_POLICY,
    MAX_ATTEMPTS,
    Claim,
    DirectLeases,
    JobRecord,
    JobRow,
    JobStatus,
    MisfirePolicy,
    NewJob,
    OrderingFailure,
    RetryPolicy,
    ScheduleTick,
    Uniqueness,
    UniqueOutcome,
    candidate_of,
)
from coordinator.store import Store
from coordinator.telemetry import stages
from coordinator.telemetry.hooks import EngineTelemetry

log = logging.getLogger(__name__)


# What a queued single enqueue learns: (id, deduplicated, status), and the
# stored form of the job when the insert leased it to a waiting worker, or of
# the job already stored under its idempotency key (as the insert read it).
_Enqueued = tuple[tuple[str, bool, int], "JobRow | None"]


class Enqueue:
    """The enqueue paths: batches, single enqueues (group commit, direct
    dispatch offers to idle workers) and inline runs."""

    def __init__(
        self,
        *,
        config: EngineConfig,
        clock: Clock,
        store: Store,
        run_store: StoreRunner,
        dispatcher: Dispatcher,
        acquisition: Acquisition,
        attempts: Attempts,
        settings: LimitSettings,
        reads: Reads,
        telemetry: Callable[[], EngineTelemetry],
    ) -> None:
        self.config = config
        self.clock = clock
        self.store = store
        self.run_store = run_store
        self.dispatcher = dispatcher
        # Leases at insert and inline are booked as every lease is (acquisition.py).
        self.acquisition = acquisition
        self.attempts = attempts
        # Limits and job type defaults as this replica loaded them.
        self.settings = settings
        self.reads = reads
        self._telemetry = telemetry
        # Single enqueues waiting for the next group commit, and whether one runs.
        self._enqueue_queue: list[tuple[NewJob, asyncio.Future[_Enqueued]]] = []
        self._enqueue_flushing = False

    @property
    def telemetry(self) -> EngineTelemetry:
        """Metrics and spans (replaced on the engine when telemetry is configured)."""
        return self._telemetry()

    def prepare(self, job: NewJob, now: int) -> NewJob:
        """Validate a job from a caller and fill in id, times and defaults."""
        limit = self.config.max_string_length
        if not job.job_type:
            raise InvalidArgument("job_type is required (e.g. 'send-email')")
        job_type = job.job_type
        if "," in job_type or job_type != job_type.strip():  # the hot path calls nothing
            check_job_type_name(job_type, "job_type")
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
            "tracestate",
            "idempotency_key",
            "concurrency_key",
            "ordering_key",
        ):
            value = getattr(job, name) or ""
            if len(value) > limit:
                raise InvalidArgument(
                    f"{name} is {len(value)} characters long; the limit is {limit}"
                )
        if job.parent_job_id is not None and not is_valid_id(job.parent_job_id):
            raise InvalidArgument(
                f"parent_job_id {job.parent_job_id[:80]!r} is malformed; job ids are lower-case "
                "UUIDs like 0190b6e2-5c1a-7d3e-8f00-123456789abc"
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
        if job.ordering_key is not None:
            self.attempts.ordered_work_seen = True
        job.id = new_id()
        job.created_at = now
        job.due_at = max(job.due_at, now) if job.due_at else now
        return job

    def _apply_type_defaults(self, job: NewJob) -> None:
        """Fill what the job left unset from its type's defaults, then the engine's.

        The effective policy is stored with the job, so a later change of the
        type's defaults does not alter jobs already enqueued.
        """
        defaults = self.settings.type_defaults.get(job.job_type)
        if defaults is not None:
            own = RetryPolicy.from_json(job.retry_policy)
            merged = own.merged_over(defaults.retry_policy)
            job.retry_policy = merged.to_json()
            if job.execution_timeout_ms is None:
                job.execution_timeout_ms = defaults.execution_timeout_ms
            if job.heartbeat_timeout_ms is None:
                job.heartbeat_timeout_ms = defaults.heartbeat_timeout_ms
            if job.ordering_key is not None:
                job.ordering_skip_failed = defaults.ordering_failure == OrderingFailure.SKIP
        if job.max_attempts == 0:
            policy = RetryPolicy.from_json(job.retry_policy)
            job.max_attempts = policy.max_attempts or DEFAULT_RETRY_POLICY.max_attempts or 3

    def check_batch_size(self, jobs: Sequence[NewJob]) -> None:
        if not jobs:
            raise InvalidArgument("no jobs given; send at least one JobSpec")
        if len(jobs) > self.config.max_batch_size:
            raise InvalidArgument(
                f"batch of {len(jobs)} jobs exceeds the limit of {self.config.max_batch_size}"
            )

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[tuple[str, bool, int]]:
        """Store jobs atomically; returns (id, deduplicated, status) per job."""
        self.check_batch_size(jobs)
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

    async def enqueue_unique(
        self, jobs: Sequence[NewJob], uniqueness: Sequence[Uniqueness | None]
    ) -> list[tuple[str, UniqueOutcome, int]]:
        """Store jobs atomically, each under its uniqueness rule (None: none).

        Returns ``(id, outcome, status)`` per job: CREATED, EXISTING (the
        key's job, unchanged) or DEBOUNCED (the key's pending job took this
        payload and a later due time). Only callers that ask for uniqueness
        come here; plain enqueues never read a key.
        """
        self.check_batch_size(jobs)
        now = self.clock.now_us()
        prepared = []
        for index, (job, rule) in enumerate(zip(jobs, uniqueness, strict=True)):
            try:
                if rule is not None:
                    check_uniqueness(rule, job, self.config.max_string_length)
                    job.due_at = job.due_at or first_due_at(rule, now)
                prepared.append(self.prepare(job, now))
            except InvalidArgument as e:
                raise InvalidArgument(f"jobs[{index}]: {e}" if len(jobs) > 1 else str(e)) from None
        stored = await self.run_store(self.store.job_insert_unique, prepared, uniqueness, now)
        results = [(job_id, UniqueOutcome(outcome), status) for job_id, outcome, status in stored]
        # A debounce moved its key's job to the due time it left in the job.
        self.dispatcher.wake_at(
            j.due_at
            for j, (_, outcome, _) in zip(prepared, results, strict=True)
            if outcome != UniqueOutcome.EXISTING
        )
        self.telemetry.enqueued(
            prepared, [(i, o != UniqueOutcome.CREATED, s) for i, o, s in results]
        )
        return results

    async def enqueue_tick(self, job: NewJob, tick: ScheduleTick) -> tuple[JobRow | None, bool]:
        """Store the job of one scheduler tick exactly once (``engine/ticks.py``).

        Returns the tick's job and whether it existed already; ``(None,
        False)`` when the tick misfired under the SKIP policy and no job of
        it exists (nothing was stored).
        """
        check_tick(tick, job, self.config.max_string_length)
        job.idempotency_key = tick_key(tick, self.config.max_string_length)
        now = self.clock.now_us()
        if not is_misfire(tick, now):
            return await self.enqueue_one(job)
        if tick.policy == MisfirePolicy.SKIP:
            self.prepare(job, now)  # a bad job is refused, skipped or not
            existing = await self.run_store(
                self.store.job_get_by_idempotency_key, job.tenant_id, job.idempotency_key
            )
            if existing is None:
                log.info(
                    "schedule %s: the tick of %s misfired (%.1f s late); its policy skips it",
                    tick.schedule_id,
                    job.idempotency_key.rsplit("@", 1)[-1],
                    (now - tick.nominal_at) / 1e6,
                )
            return existing, existing is not None
        [(job_id, outcome, _)] = await self.enqueue_unique([job], [misfire_uniqueness(tick)])
        row, _ = await self.reads.get_job(job_id)
        return row, outcome != UniqueOutcome.CREATED

    async def enqueue_one(self, job: NewJob) -> tuple[JobRow, bool]:
        """Store one job; returns it and whether it was deduplicated.

        Concurrent single enqueues are committed together (group commit):
        while one insert is in flight, later calls queue up and go in the
        next statement, so many callers cost few transactions. A job the
        database refuses fails its own caller only: the others of its commit
        are stored one by one. A deduplicated job is answered as the insert
        found it, so a job deleted meanwhile (retention) is still an answer.
        """
        received = time.time_ns() if stages.ENABLED else 0
        prepared = self.prepare(job, self.clock.now_us())
        if stages.ENABLED:
            stages.mark("received", [prepared.id], received)
        future: asyncio.Future[_Enqueued] = asyncio.get_running_loop().create_future()
        self._enqueue_queue.append((prepared, future))
        if not self._enqueue_flushing:
            self._enqueue_flushing = True
            asyncio.get_running_loop().create_task(self._flush_enqueues())
        (job_id, dedup, status), stored = await future
        if dedup:
            if stored is None:
                # A repeat of a key within this commit: its job was stored by it.
                stored, _ = await self.reads.get_job(job_id)
            return stored, True
        if status == JobStatus.RUNNING and stored is not None:
            return stored, False
        return record_of_new(prepared), False

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
        existing: dict[str, JobRow] = {}
        insert = self.store.job_insert_many
        if stages.ENABLED:
            ids = [j.id for j in jobs]
            stages.mark("flush", ids)
            insert = stages.timed_in_thread(insert, ids)
        try:
            sent = time.time_ns() if stages.ENABLED else 0
            # A few plain jobs go in on the event loop itself, the rest through the threads.
            on_loop = await self.store.job_insert_on_loop(jobs, direct)
            if on_loop is not None:
                results = on_loop
                if stages.ENABLED:
                    stages.mark("store_thread", ids, sent)
                    stages.mark("committed", ids)
            else:
                results = await self.run_store(insert, jobs, direct, existing)
            if stages.ENABLED:
                stages.mark("resumed", ids)
        except (InvalidArgument, AlreadyExists):
            self._refund(offered.values())
            if len(batch) == 1:
                raise
            # A value the database refused: one job fails, not every caller of
            # the commit. Each goes alone; only the refused one's caller hears.
            for item in batch:
                try:
                    await self._flush_batch([item])
                except (InvalidArgument, AlreadyExists) as e:
                    if not item[1].done():
                        item[1].set_exception(e)
            return
        except Exception:
            self._refund(offered.values())
            raise
        leased: dict[WorkerSession, list[JobRecord]] = {}
        if direct is not None:
            leased = self._direct_records(jobs, results, direct, offered)
        record_of = {r.id: r for records in leased.values() for r in records}
        orphans: list[tuple[str, str]] = []
        try:
            # Jobs leased at insert go on their streams before the callers'
            # answers are built, so a stream's writer sends them first.
            if direct is not None and leased:
                orphans = self._queue_direct(leased, direct)
        finally:
            # The jobs are committed: every caller is answered whatever
            # happens to their delivery.
            for (job, future), result in zip(batch, results, strict=True):
                if not future.done():
                    answer = existing.get(result[0]) if result[1] else record_of.get(job.id)
                    future.set_result((result, answer))
        self.dispatcher.wake_at(
            j.due_at
            for j, (_, _, status) in zip(jobs, results, strict=True)
            if status == JobStatus.PENDING
        )
        self.telemetry.enqueued(jobs, results)
        if orphans:
            await self._hand_back_direct(orphans)

    def _direct_offers(
        self, jobs: Sequence[NewJob], now: int
    ) -> tuple[DirectLeases | None, dict[str, WorkerSession]]:
        """Offer due jobs to workers that wait with free credit (direct dispatch).

        A worker with idle credit had nothing eligible at the last acquisition,
        so handing it a new job at insert costs no fairness or priority, and
        saves the job a trip through a dispatcher pass. Not under concurrency
        or rate limits (they need the counting path) nor while draining. The credit is
        reserved now and refunded for jobs the store does not lease.
        """
        if (
            self.settings.limits
            or self.settings.rates
            or not self.dispatcher.leasing
            or not self.store.capabilities.lease_at_insert
        ):
            return None, {}
        idle = [
            s
            for s in self.dispatcher.sessions.values()
            if s.credits > s.reserved and not s.draining and not s.closed
        ]
        if not idle:
            return None, {}
        offered: dict[str, WorkerSession] = {}
        for job in jobs:
            # A job with an ordering key is left to the pass this enqueue wakes:
            # that claim checks its key (jobs of one key in one insert would not).
            if job.due_at > now or job.ordering_key is not None:
                continue
            for session in idle:
                if session.credits > session.reserved and session.takes(
                    job.job_type, job.tenant_id
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
            record = record_of_new(job)
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

    def _queue_direct(
        self, leased: dict[WorkerSession, list[JobRecord]], direct: DirectLeases
    ) -> list[tuple[str, str]]:
        """Queue jobs leased at insert on the very sessions they were offered to.

        Returns (job id, token) of those whose session is gone or may not take
        them, for ``_hand_back_direct``.
        """
        records = [r for rs in leased.values() for r in rs]
        # Leased at insert is leased all the same: it counts against the
        # tenant's and the category's fair shares like a lease from a pass.
        self.acquisition.leased(records, direct.now)
        self.dispatcher.leased_at_insert += len(records)
        return self.dispatcher.deliver(leased.items(), direct.lease_token)

    async def _hand_back_direct(self, orphans: list[tuple[str, str]]) -> None:
        """Hand back jobs leased at insert that their worker can no longer take."""
        try:
            await self.acquisition.hand_back(orphans)
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
        check_length(owner, "inline.worker_id", self.config.max_string_length)
        now = self.clock.now_us()
        prepared = self.prepare(job, now)
        if prepared.due_at > now:
            raise InvalidArgument("an inline job runs now; it cannot have a future due_time")
        if prepared.ordering_key is not None:
            raise InvalidArgument(
                "an inline job runs now; it cannot have an ordering_key (enqueue it without "
                "inline and it runs when its key's turn comes)"
            )
        token = new_token()
        row, dedup, held = await self.run_store(
            self.store.job_insert_leased,
            prepared,
            owner,
            token,
            now,
            self.config.default_lease_ms,
            enqueue_if_paused,
            functools.partial(
                admission_for, [Claim(prepared.id, owner)], [candidate_of(prepared)], now
            ),
        )
        if row is None:
            if held == "rate":
                raise FailedPrecondition(
                    f"cannot run inline: {await self._rate_limited_text(prepared, now)}; "
                    "retry then, or set enqueue_if_paused to queue it"
                )
            if held == "limit":
                raise FailedPrecondition(
                    f"cannot run inline: concurrency limit full ({await self._full_scopes(prepared)}); "
                    "retry when a running job of that scope ends, or set "
                    "enqueue_if_paused to queue it"
                )
            pauses = await self.run_store(self.store.pauses_covering, prepared, now)
            names = ", ".join(pause_scope_text(p.scope, with_tenant=False) for p in pauses)
            raise FailedPrecondition(
                f"cannot run inline: paused ({names or 'a pause'}); "
                "retry after unpause or set enqueue_if_paused to queue it"
            )
        if dedup or held:
            if held:
                self.dispatcher.wake()
            return row, dedup, None
        self.telemetry.enqueued([prepared], [(row.id, False, int(JobStatus.RUNNING))])
        # No fair pick chose an inline run: the caller runs it, uncharged.
        self.acquisition.leased([row], now, fair_share=False)
        return row, False, token

    async def _rate_limited_text(self, job: NewJob, now: int) -> str:
        """Which rate limits hold ``job`` back and until when, as text for an error."""
        await self.settings.reload_limits()
        buckets = await self.run_store(self.store.rate_bucket_list, self.settings.rates.kinds)
        held = []
        for key, limit in self.settings.rates.scopes_of(candidate_of(job)):
            until = next_start_at(limit, RateBucket(*buckets.get(key, (0, 0, 0))), now)
            if until > now:
                held.append(
                    f"rate limited by {rate_limit_text(key, limit)} until {when_precise(until)}"
                )
        return "; ".join(held) or "rate limited"

    async def _full_scopes(self, job: NewJob) -> str:
        """The limited scopes of ``job`` that are full, as text for an error."""
        await self.settings.reload_limits()
        running = await self.run_store(self.store.job_running_counts, self.settings.limits.kinds)
        full = [
            f"{limit_scope_text(kind, value)}: {running.get((kind, value), 0)} of {limit} running"
            for (kind, value), limit in self.settings.limits.scopes_of(candidate_of(job))
            if running.get((kind, value), 0) >= limit
        ]
        return "; ".join(full) or "a limit of its scope"


def record_of_new(job: NewJob) -> JobRecord:
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
        parent_job_id=job.parent_job_id,
        ordering_key=job.ordering_key,
        ordering_skip_failed=job.ordering_skip_failed,
        group_id=job.group_id,
        trace_links=job.trace_links,
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_policy(text: str) -> RetryPolicy:
    try:
        return RetryPolicy.from_json(text)
    except (ValueError, TypeError):
        raise InvalidArgument("retry_policy is not a valid retry policy") from None


__all__ = ["Enqueue", "record_of_new"]
