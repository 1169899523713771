"""Outcomes and heartbeats: guarded by lease tokens, applied at most once;
what follows an ended attempt goes through attempts.py.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from coordinator.clock import Clock
from coordinator.engine.attempts import Attempts, release_end
from coordinator.engine.config import EngineConfig
from coordinator.engine.dispatch import Dispatcher
from coordinator.engine.limit_settings import LimitSettings
from coordinator.engine.rate_limits import RateBucket, push_back, rate_book_of
from coordinator.engine.retries import decide_failure
from coordinator.engine.runner import StoreRunner
from coordinator.engine.set_aside import Collected, OutcomeNotRecorded
from coordinator.engine.validation import check_refs
from coordinator.errors import (
    InvalidArgument,
    LeaseLost,
    NotFound,
    StoreUnavailable,
    WorkflowJobsError,
)
from coordinator.model import (
    REPORTED_OUTCOMES,
    AttemptEnd,
    AttemptOutcome,
    Completion,
    Failure,
    JobStatus,
    LeasedForFailure,
    RateLimit,
    Release,
    candidate_of,
)
from coordinator.store import Store
from coordinator.store.rows import RateLimitRow
from coordinator.store.scope_settings import BucketRows
from workflowjobs.contract import LONGEST_SPAN_DAYS, LONGEST_SPAN_US

log = logging.getLogger(__name__)


Outcome = Completion | Failure | Release


# Not frozen, like the outcomes (coordinator/model.py): one is built per job.
@dataclass(slots=True)
class OutcomeResult:
    job_id: str
    accepted: bool
    status: JobStatus | None = None
    error: Exception | None = None
    # Accepted because this very report (same lease token, same kind) was
    # recorded before: a resend after a lost answer.
    already_recorded: bool = False
    # Recorded with a change it says (a push-back held at MAX_PUSH_BACK_US).
    note: str = ""


# The longest push-back a rate limit is held for (the contract's longest span):
# a handler that takes a downstream's Retry-After at its word may report more;
# its outcome is recorded all the same and the push-back held this long.
MAX_PUSH_BACK_US = LONGEST_SPAN_US


def _held_at_ceiling(asked_us: int | None) -> str:
    return (
        f"push_back.retry_after of {(asked_us or 0) / 86_400e6:,.0f} days is longer than a "
        f"rate limit is held ({LONGEST_SPAN_DAYS} days); the outcome is recorded, and the "
        f"rate limits covering the job are held {LONGEST_SPAN_DAYS} days"
    )


def _first_mentions(
    outcomes: Sequence[Outcome | OutcomeResult],
) -> list[Outcome | OutcomeResult]:
    """``outcomes`` with each later mention of a lease (job id and token) replaced
    by its refusal. One job under two tokens is two leases (an older attempt's
    beside the current one, after an unlock re-leased the job to the same
    worker): each is answered on its own, and at most one of them holds the job."""
    first: dict[tuple[str, str], int] = {}
    marked: list[Outcome | OutcomeResult] = []
    for i, o in enumerate(outcomes):
        if isinstance(o, OutcomeResult):
            marked.append(o)
            continue
        lease = (o.job_id, o.lease_token)
        if lease in first:
            error = InvalidArgument(
                f"job {o.job_id} is named more than once in this report under one lease "
                f"token; only its first mention (outcome {first[lease]}) was considered: "
                "send one outcome per lease"
            )
            marked.append(OutcomeResult(o.job_id, False, error=error))
        else:
            first[lease] = i
            marked.append(o)
    return marked


def _rounds(marked: Sequence[Outcome | OutcomeResult]) -> list[list[int]]:
    """The positions of the outcomes still to record, split so that no round
    names a job twice: what records a round is keyed by job id."""
    rounds: list[list[int]] = []
    times_named: dict[str, int] = {}
    for i, o in enumerate(marked):
        if isinstance(o, OutcomeResult):
            continue
        n = times_named.get(o.job_id, 0)
        times_named[o.job_id] = n + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(i)
    return rounds


class _Unexpected(Exception):
    """Recording one outcome failed in a way no rule foresees (logged where it happened)."""

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"internal error recording the outcome of job {job_id}; see the coordinator's log"
        )


@dataclass(frozen=True, slots=True)
class LeaseAnswer:
    job_id: str
    state: str  # "extended" | "lost" | "cancel_requested"
    lease_expires_at: int | None = None


class Outcomes:
    """Heartbeats and outcome reports, guarded by lease tokens."""

    def __init__(
        self,
        *,
        config: EngineConfig,
        clock: Clock,
        store: Store,
        run_store: StoreRunner,
        dispatcher: Dispatcher,
        attempts: Attempts,
        settings: LimitSettings,
        rng: random.Random,
    ) -> None:
        self.config = config
        self.clock = clock
        self.store = store
        self.run_store = run_store
        # Its sessions: a heartbeat vouches for the stream that sent it.
        self.dispatcher = dispatcher
        self.attempts = attempts
        # The rate limits a push-back slows down, as this replica loaded them.
        self.settings = settings
        # Draws the backoff jitter of every retry decision.
        self.rng = rng

    async def heartbeat(
        self, worker_id: str, refs: Sequence[tuple[str, str]], principal: str | None = None
    ) -> list[LeaseAnswer]:
        """Extend leases; ``principal`` is the caller's credential key (None = auth off)."""
        check_refs(refs, self.config.max_batch_size)
        now = self.clock.now_us()
        session = self.dispatcher.sessions.get(worker_id)
        if session is not None and session.principal == principal:
            # Only the credential that opened the stream vouches for it.
            session.last_heartbeat_at = now
        # The store answers by job id, so a job named twice (an older attempt's
        # lease beside the current one, e.g. after an unlock re-leased it to
        # the same worker) goes in a round of its own: each lease gets its own answer.
        rounds: list[list[tuple[str, str]]] = []
        times_named: dict[str, int] = {}
        for ref in refs:
            n = times_named.get(ref[0], 0)
            times_named[ref[0]] = n + 1
            if n == len(rounds):
                rounds.append([])
            rounds[n].append(ref)
        got: dict[tuple[str, str], tuple[int, bool]] = {}
        for round_refs in rounds:
            rows = await self.run_store(
                self.store.lease_extend_many, round_refs, now, self.config.default_lease_ms
            )
            token_of = dict(round_refs)
            got.update({(job_id, token_of[job_id]): (exp, cancel) for job_id, exp, cancel in rows})
        answers = []
        for ref in refs:
            if ref not in got:
                answers.append(LeaseAnswer(ref[0], "lost"))
                continue
            expires, cancel = got[ref]
            answers.append(
                LeaseAnswer(ref[0], "cancel_requested" if cancel else "extended", expires)
            )
        return answers

    async def report(self, outcomes: Sequence[Outcome]) -> list[OutcomeResult]:
        """Record outcomes; each is applied at most once, guarded by its lease token.

        A lease (job id and token) named several times in one report: only its
        first mention is considered (recorded, or refused as any outcome may
        be); each later one is refused with ``InvalidArgument`` and changes
        nothing. One job under two tokens is two leases, recorded one after the other.
        """
        check_refs([(o.job_id, o.lease_token) for o in outcomes], self.config.max_batch_size)
        marked = _first_mentions(outcomes)
        rounds = _rounds(marked)
        if len(rounds) > 1 or any(isinstance(m, OutcomeResult) for m in marked):
            answers: dict[int, OutcomeResult] = {}
            for positions in rounds:
                results = await self.report([cast(Outcome, marked[i]) for i in positions])
                answers.update(zip(positions, results, strict=True))
            return [m if isinstance(m, OutcomeResult) else answers[i] for i, m in enumerate(marked)]
        now = self.clock.now_us()
        completions = [o for o in outcomes if isinstance(o, Completion)]
        others = [o for o in outcomes if not isinstance(o, Completion)]
        done: set[str] = set()
        ends: dict[str, AttemptEnd] = {}
        refused: list[tuple[str, BaseException]] = []
        # Completions whose values the database refused (nothing changed).
        unstorable: dict[str, InvalidArgument] = {}
        if completions:
            completed, refused_completions = await self._complete(completions, now)
            unstorable = {job_id: _unstorable(job_id, e) for job_id, e in refused_completions}
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
        not_recorded = dict(refused)
        for o in outcomes:
            if o.job_id in unstorable:
                results.append(OutcomeResult(o.job_id, False, error=unstorable[o.job_id]))
            elif o.job_id in not_recorded:
                error = OutcomeNotRecorded(o.job_id, not_recorded[o.job_id])
                results.append(OutcomeResult(o.job_id, False, error=error))
            elif o.job_id in done:
                results.append(OutcomeResult(o.job_id, True, JobStatus.COMPLETED))
            elif o.job_id in ends:
                results.append(OutcomeResult(o.job_id, True, ends[o.job_id].new_status))
            else:
                results.append(OutcomeResult(o.job_id, False, error=LeaseLost(o.job_id)))
        results = await self._recognise_resends(outcomes, results)
        pushed = [
            o
            for o, r in zip(outcomes, results, strict=True)
            if o.push_back_us is not None and r.accepted and not r.already_recorded
        ]
        if pushed:
            await self._push_back(pushed, now)
            results = [
                replace(r, note=_held_at_ceiling(o.push_back_us))
                if r.accepted
                and not r.already_recorded
                and (o.push_back_us or 0) > MAX_PUSH_BACK_US
                else r
                for o, r in zip(outcomes, results, strict=True)
            ]
        return results

    async def _push_back(self, outcomes: Sequence[Outcome], now: int) -> None:
        """Slow down the rate limits covering the jobs whose handler reported
        push-back (engine/rate_limits.py): once per limited scope per report, with
        the longest hold asked. The buckets are rewritten under the scopes'
        locks from the limits as stored, so every replica sees it at once."""
        if not self.settings.rates:
            return
        hold = {o.job_id: min(o.push_back_us or 0, MAX_PUSH_BACK_US) for o in outcomes}
        rows = await self.run_store(self.store.job_get_many, list(hold))
        jobs = [candidate_of(row) for row in rows]
        keys = self.settings.rates.keys_of(jobs)
        if not keys:
            return

        def update(limit_rows: Sequence[RateLimitRow], stored: BucketRows) -> BucketRows:
            book = rate_book_of(limit_rows)
            holds: dict[tuple[int, str], tuple[RateLimit, int]] = {}
            for job in jobs:
                for key, limit in book.scopes_of(job):
                    longest = max(hold[job.id], holds.get(key, (limit, 0))[1])
                    holds[key] = (limit, longest)
            out: BucketRows = {}
            for key, (limit, hold_us) in holds.items():
                bucket = RateBucket(*stored.get(key, (0, 0, 0)))
                push_back(limit, bucket, now, hold_us or None)
                out[key] = bucket.as_row()
            return out

        written = await self.run_store(self.store.rate_bucket_update, keys, update)
        log.info(
            "push-back reported by %d job(s): slowed %d rate-limited scope(s)",
            len(outcomes),
            len(written),
        )

    async def _recognise_resends(
        self, outcomes: Sequence[Outcome], results: list[OutcomeResult]
    ) -> list[OutcomeResult]:
        """Answer a resent report as accepted ("already recorded").

        A report refused because its lease token is no longer current is a
        resend when the job's attempt under that token was ended by a report
        of the same kind (complete, fail, release): the first one was recorded
        and only its answer was lost. Anything else stays refused (lease lost).
        (``report`` passes each job once.)
        """
        refused = [i for i, r in enumerate(results) if isinstance(r.error, LeaseLost)]
        if not refused:
            return results
        refs = [(outcomes[i].job_id, outcomes[i].lease_token) for i in refused]
        recorded = await self.run_store(self.store.attempt_reported_many, refs)
        resent = [
            i
            for i in refused
            if recorded.get(outcomes[i].job_id) in REPORTED_OUTCOMES[_report_kind(outcomes[i])]
        ]
        if not resent:
            return results
        rows = await self.run_store(self.store.job_get_many, [outcomes[i].job_id for i in resent])
        status = {row.id: JobStatus(row.status) for row in rows}
        for i in resent:
            job_id = outcomes[i].job_id
            results[i] = OutcomeResult(job_id, True, status.get(job_id), already_recorded=True)
        return results

    async def _complete(
        self, completions: list[Completion], now: int
    ) -> tuple[dict[str, JobStatus], Collected]:
        """Record completions: plain jobs in one statement on the event loop when
        the store can and no ended attempt must wake the replicas; the rest (and
        all of them when the database refused a value) through the store's
        threads, where a completion the database refuses is set aside and its
        neighbours land."""
        completed: dict[str, JobStatus] | None = None
        if not self.attempts.wake_replicas:
            try:
                completed = await self.store.job_complete_on_loop(completions, now)
            except InvalidArgument:
                completed = None
        # Left: keyed and grouped jobs, leases no longer valid, or everything.
        tried = completed is not None
        completed = completed or {}
        rest = [c for c in completions if c.job_id not in completed]
        if not rest:
            return completed, []
        more, refused = await self.attempts.in_store(
            "outcomes",
            now,
            functools.partial(self.store.job_complete_many, rest, now, plain_tried=tried),
        )
        return {**completed, **more}, refused

    async def report_each(self, outcomes: Sequence[Outcome | OutcomeResult]) -> list[OutcomeResult]:
        """Like ``report``, but nothing one outcome carries fails its neighbours.

        Items that are already an ``OutcomeResult`` (refused before reaching
        the engine, e.g. malformed) are answered as they are. An error of the
        whole report is answered per outcome: transient ones (the store is
        unreachable) on every outcome, the caller may send them again; any
        other makes each outcome be recorded on its own, so only the outcome
        that causes it is refused. Never raises but for cancellation.
        """
        # Later mentions of a job are refused here, so that recording outcomes
        # one by one (below) cannot record one of them either.
        outcomes = _first_mentions(outcomes)
        todo = [o for o in outcomes if not isinstance(o, OutcomeResult)]
        answered: list[OutcomeResult] = []
        if todo:
            try:
                answered = await self.report(todo)
            except StoreUnavailable as e:
                answered = [OutcomeResult(o.job_id, False, error=e) for o in todo]
            except Exception:  # noqa: BLE001 - isolated below, outcome by outcome
                answered = [await self._report_alone(o) for o in todo]
        if len(answered) == len(outcomes):
            return answered
        by_order = iter(answered)
        return [o if isinstance(o, OutcomeResult) else next(by_order) for o in outcomes]

    async def _report_alone(self, outcome: Outcome) -> OutcomeResult:
        try:
            (result,) = await self.report([outcome])
        except WorkflowJobsError as e:
            return OutcomeResult(outcome.job_id, False, error=e)
        except Exception:  # noqa: BLE001 - one outcome's failure is its own answer
            log.exception("recording the outcome of job %s failed", outcome.job_id)
            return OutcomeResult(outcome.job_id, False, error=_Unexpected(outcome.job_id))
        return result

    async def report_one(self, outcome: Outcome) -> OutcomeResult:
        """Like ``report`` for one outcome, telling a lost lease from an unknown job."""
        (result,) = await self.report([outcome])
        if isinstance(result.error, OutcomeNotRecorded | InvalidArgument):
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
            return replace(release_end(outcome, row), reported_token=outcome.lease_token)
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
        return replace(end, traceback=outcome.traceback or None, reported_token=outcome.lease_token)


def _unstorable(job_id: str, error: BaseException) -> InvalidArgument:
    detail = f"{type(error).__name__}: {error}"[:300]
    return InvalidArgument(
        f"the completion of job {job_id} could not be recorded: the database refused a value "
        f"it carries, its result or content type ({detail}); nothing changed and the lease is "
        "still held: report it again with values the database can store, or fail the job"
    )


__all__ = ["LeaseAnswer", "Outcome", "OutcomeResult", "Outcomes"]


def _report_kind(outcome: Outcome) -> str:
    if isinstance(outcome, Completion):
        return "complete"
    return "fail" if isinstance(outcome, Failure) else "release"
