"""The vocabulary shared by the engine and the store.

Enum values equal the protobuf enum numbers of ``workflowjobs.v1`` so rows,
domain values and wire values convert without tables.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from workflowjobs import contract


class JobStatus(enum.IntEnum):
    PENDING = 1
    RUNNING = 2
    COMPLETED = 3
    FAULTED = 4
    CANCELLED = 5


# The contract's status sets (workflowjobs.contract) as this enum: a live job
# has not ended (what a cancel applies to, what a uniqueness key holds while by
# default, what keeps a group open); a finished one has.
LIVE_STATUSES = tuple(JobStatus(s) for s in contract.LIVE_STATUSES)
FINISHED_STATUSES = tuple(JobStatus(s) for s in contract.FINAL_STATUSES)
# Statuses an operator retry makes PENDING again.
RETRYABLE_STATUSES = (JobStatus.FAULTED, JobStatus.CANCELLED)


class AttemptOutcome(enum.IntEnum):
    COMPLETED = 1
    FAILED = 2
    LEASE_EXPIRED = 3
    CANCELLED = 4
    RELEASED = 5
    UNLOCKED = 6
    TIMED_OUT = 7


class JobEventKind(enum.IntEnum):
    """What happened to a job (``JobEvent.kind``; equal to the proto enum)."""

    ENQUEUED = 1
    STARTED = 2
    ATTEMPT_FAILED = 3
    RETRY_SCHEDULED = 4
    COMPLETED = 5
    FAULTED = 6
    CANCELLED = 7
    RELEASED = 8
    # An operator made a PENDING job that was not due yet due now (RunJobNow).
    RESCHEDULED = 9


# Attempt outcomes that are failures of the attempt itself (ATTEMPT_FAILED).
_FAILED_ATTEMPT = frozenset(
    (
        AttemptOutcome.FAILED,
        AttemptOutcome.LEASE_EXPIRED,
        AttemptOutcome.TIMED_OUT,
        AttemptOutcome.UNLOCKED,
    )
)
_FINAL_EVENT = {
    JobStatus.COMPLETED: JobEventKind.COMPLETED,
    JobStatus.FAULTED: JobEventKind.FAULTED,
    JobStatus.CANCELLED: JobEventKind.CANCELLED,
}


def events_of_ended_attempt(outcome: int, new_status: int) -> tuple[JobEventKind, ...]:
    """The events an ended attempt writes, in order.

    A failed attempt (failure, lease expiry, execution timeout, unlock) is
    ATTEMPT_FAILED, followed by what became of the job: RETRY_SCHEDULED,
    FAULTED or CANCELLED. A released attempt is RELEASED (the job is pending
    again), followed by FAULTED when it cannot run again. Otherwise the job's
    final status is the one event (COMPLETED, or CANCELLED when a cancel won).
    """
    status = JobStatus(new_status)
    if outcome in _FAILED_ATTEMPT:
        then = JobEventKind.RETRY_SCHEDULED if status == JobStatus.PENDING else _FINAL_EVENT[status]
        return (JobEventKind.ATTEMPT_FAILED, then)
    if outcome == AttemptOutcome.RELEASED:
        if status == JobStatus.PENDING:
            return (JobEventKind.RELEASED,)
        return (JobEventKind.RELEASED, _FINAL_EVENT[status])
    if status == JobStatus.PENDING:
        return (JobEventKind.RETRY_SCHEDULED,)
    return (_FINAL_EVENT[status],)


# The attempt outcomes a resent report of each kind may find recorded under its
# lease token (a cancel requested meanwhile ends a failed or released attempt
# CANCELLED): the report was recorded already.
REPORTED_OUTCOMES = {
    "complete": frozenset((AttemptOutcome.COMPLETED,)),
    "fail": frozenset((AttemptOutcome.FAILED, AttemptOutcome.CANCELLED)),
    "release": frozenset((AttemptOutcome.RELEASED, AttemptOutcome.CANCELLED)),
}


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events a watcher receives; empty fields match everything."""

    tenant_id: str = ""
    definition_id: str = ""
    instance_id: str = ""
    correlation_id: str = ""
    job_type: str = ""
    kinds: tuple[JobEventKind, ...] = ()
    job_id: str = ""
    group_id: str = ""


# Not frozen: a frozen dataclass sets each field through object.__setattr__,
# several times the cost of a plain one (3.4 against 0.5 µs for this one),
# and one is built per event read. Nothing changes one after it is built.
@dataclass(slots=True)
class JobEvent:
    """One entry of the job event log, as read."""

    # Where the log stands after this event; resume with it (``EventCursor``).
    cursor: EventCursor
    kind: JobEventKind
    created_at: int
    job_id: str
    tenant_id: str
    job_type: str
    definition_id: str
    definition_version: int
    instance_id: str
    activity_id: str
    activity_node_id: str
    bookmark_id: str
    correlation_id: str
    # The job's status after the event, and the attempt it concerns.
    status: JobStatus
    attempt: int
    due_at: int | None
    error: str | None
    error_kind: str | None
    # COMPLETED only: the job's result, read from the job while it is stored.
    result: bytes | None = None
    result_content_type: str | None = None
    # The job group the job belongs to; None outside any group.
    group_id: str | None = None


# ``EventCursor.n`` of a cursor that stands after every event of its log row.
WHOLE_ROW = contract.INT32_MAX


# Not frozen (one is built per event read; see JobEvent) but hashed like a
# frozen one: nothing changes a cursor after it is built.
@dataclass(slots=True, order=True, unsafe_hash=True)
class EventCursor:
    """A position in the job event log: events are ordered by ``(ord, id, n)``.

    A log row holds the events of one statement (PostgreSQL; one event per
    row on SQLite); ``n`` is an event's position in its row, ``WHOLE_ROW``
    after the row's last event. Written ``"<ord>-<id>"`` on the wire when
    ``n`` is ``WHOLE_ROW`` (the form every cursor had before rows held
    several events, so such cursors stay valid), else ``"<ord>-<id>-<n>"``;
    clients treat it as opaque.

    ``history`` (PostgreSQL) names the database history the position belongs
    to: 8 hex digits of a hash of the server's system identifier and
    timeline (``EVENT_HISTORY_LENGTH``), written after a ``.``
    (``"<ord>-<id>.<history>"``). Transaction ids, and so ``ord``, mean
    something only within one history: a server promoted from a standby that
    missed transactions may hand out ids a reader has already passed.
    Cursors without it (SQLite, and every cursor handed out before it
    existed) are read as positions of the current history. It takes no part
    in comparisons.
    """

    ord: int
    id: int
    n: int = WHOLE_ROW
    history: str = field(default="", compare=False)

    def __str__(self) -> str:
        text = f"{self.ord}-{self.id}" if self.n == WHOLE_ROW else f"{self.ord}-{self.id}-{self.n}"
        return f"{text}.{self.history}" if self.history else text

    @classmethod
    def parse(cls, text: str) -> EventCursor:
        """Raises ValueError when ``text`` is not a cursor this log wrote.

        Only the exact forms ``__str__`` writes are read: ASCII digits without
        leading zeros, nothing around them (no whitespace, no other digits).
        """
        match = _CURSOR_FORM.fullmatch(text)
        if match is None:
            raise ValueError(
                f"{shown(text)} is not an event cursor (expected 'ORD-ID' or 'ORD-ID-N', "
                "ASCII digits, optionally followed by '.' and the 8 hex digits of a history)"
            )
        ord_, id_, n, history = match.groups()
        cursor = cls(int(ord_), int(id_), int(n) if n else WHOLE_ROW, history or "")
        if cursor.ord >= 2**63 or cursor.id >= 2**63 or not 0 < cursor.n <= WHOLE_ROW:
            raise ValueError(f"{shown(text)} is not an event cursor (out of range)")
        return cursor

    def in_history(self, history: str) -> EventCursor:
        """This position, as a cursor of ``history``."""
        return EventCursor(self.ord, self.id, self.n, history)


# Hex digits of ``EventCursor.history``.
EVENT_HISTORY_LENGTH = 8
# What ``EventCursor.__str__`` writes: numbers of at most 19 digits (below
# 2**63), no leading zero.
_CURSOR_NUMBER = "(0|[1-9][0-9]{0,18})"
_CURSOR_FORM = re.compile(
    rf"{_CURSOR_NUMBER}-{_CURSOR_NUMBER}(?:-{_CURSOR_NUMBER})?"
    rf"(?:\.([0-9a-f]{{{EVENT_HISTORY_LENGTH}}}))?"
)


def shown(value: str, limit: int = 40) -> str:
    """``value`` quoted for an error message, cut to its first ``limit`` characters.

    Errors never echo a whole caller's value: a long one would make the
    answer's status message (a header) too large to deliver.
    """
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


class PauseKind(enum.IntEnum):
    TENANT = 1
    DEFINITION = 2
    INSTANCE = 3
    JOB_TYPE = 4
    CATEGORY = 5


class LimitKind(enum.IntEnum):
    TENANT = 1
    JOB_TYPE = 2
    DEFINITION = 3
    CONCURRENCY_KEY = 4
    CATEGORY = 5


class OrderingFailure(enum.IntEnum):
    """What a FAULTED job does to its ordering key (per job type)."""

    # The key waits until the job completes (an operator retries it) or is
    # resolved (cancelled): the default.
    BLOCK = 1
    # The next job of the key runs.
    SKIP = 2


class JobCategory(enum.IntEnum):
    UNSPECIFIED = 0
    CONTINUATION = 1
    ACTIVITY_WORK = 2
    INTEGRATION = 3
    MAINTENANCE = 4
    CUSTOM = 5

    @property
    def label(self) -> str:
        """The lower-case name used in metrics, messages and the CLI."""
        return self.name.lower()


# Every category number, in order: acquisition reads each lane once per category.
JOB_CATEGORIES: tuple[int, ...] = tuple(int(c) for c in JobCategory)


def category_label(value: int) -> str:
    """``JobCategory`` name of a stored category number (lower case)."""
    try:
        return JobCategory(value).label
    except ValueError:
        return str(value)


def scope_text(kind: PauseKind | LimitKind, value: str) -> str:
    """How messages name the scope of a pause or a limit by its kind and value:
    "job type send-email", "definition d-1", "category integration" (a category
    stored by its number is named). Pauses add their tenant through
    ``engine.pauses.pause_scope_text``."""
    shown = category_label(int(value)) if kind.name == "CATEGORY" and value.isdigit() else value
    return f"{kind.name.lower().replace('_', ' ')} {shown}"


def parse_category(text: str) -> JobCategory | None:
    """A category named by its number, its name in any case, or its proto
    name (``JOB_CATEGORY_INTEGRATION``); None when it names none."""
    text = text.strip()
    if text.isdigit():
        try:
            return JobCategory(int(text))
        except ValueError:
            return None
    name = text.upper().replace("-", "_").removeprefix("JOB_CATEGORY_")
    return JobCategory.__members__.get(name)


# Most attempts a caller may configure for one job (retry_policy.max_attempts).
MAX_ATTEMPTS = 10_000
# Most attempts a job's budget ever reaches, counting attempts refunded by
# releases and budgets granted by operator retries. Far below 2**31 - 1, so
# ``attempt`` and ``max_attempts`` (32-bit columns) cannot overflow.
ATTEMPT_CEILING = 1_000_000_000


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed attempt is retried. ``None`` fields fall back to defaults."""

    max_attempts: int | None = None
    initial_backoff_ms: int | None = None
    backoff_multiplier: float | None = None
    max_backoff_ms: int | None = None
    jitter: float | None = None
    non_retryable_error_kinds: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return self == RetryPolicy()

    def merged_over(self, base: RetryPolicy) -> RetryPolicy:
        """This policy with unset fields taken from ``base``."""
        return RetryPolicy(
            max_attempts=self.max_attempts if self.max_attempts is not None else base.max_attempts,
            initial_backoff_ms=(
                self.initial_backoff_ms
                if self.initial_backoff_ms is not None
                else base.initial_backoff_ms
            ),
            backoff_multiplier=(
                self.backoff_multiplier
                if self.backoff_multiplier is not None
                else base.backoff_multiplier
            ),
            max_backoff_ms=(
                self.max_backoff_ms if self.max_backoff_ms is not None else base.max_backoff_ms
            ),
            jitter=self.jitter if self.jitter is not None else base.jitter,
            non_retryable_error_kinds=self.non_retryable_error_kinds
            or base.non_retryable_error_kinds,
        )

    def to_json(self) -> str | None:
        if self.is_empty():
            return None
        data: dict[str, Any] = {
            k: v
            for k, v in (
                ("max_attempts", self.max_attempts),
                ("initial_backoff_ms", self.initial_backoff_ms),
                ("backoff_multiplier", self.backoff_multiplier),
                ("max_backoff_ms", self.max_backoff_ms),
                ("jitter", self.jitter),
            )
            if v is not None
        }
        if self.non_retryable_error_kinds:
            data["non_retryable_error_kinds"] = list(self.non_retryable_error_kinds)
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> RetryPolicy:
        if not text:
            return cls()
        data = json.loads(text)
        data["non_retryable_error_kinds"] = tuple(data.get("non_retryable_error_kinds", ()))
        return cls(**data)


@dataclass(frozen=True, slots=True)
class RetryGrant:
    """The attempt budget an operator retry gives a FAULTED or CANCELLED job."""

    max_attempts: int
    # The job's retry policy with its configured max attempts recorded.
    retry_policy: str | None


def at_attempt_ceiling(attempt: int) -> bool:
    """True when a job has run as many attempts as any job may: it cannot run again."""
    return attempt >= ATTEMPT_CEILING


def operator_retry_grant(
    attempt: int,
    released_attempts: int | None,
    max_attempts: int,
    retry_policy: str | None,
    keep_attempts: bool,
) -> RetryGrant | None:
    """The budget of an operator retry; None when the job is at ``ATTEMPT_CEILING``.

    ``attempt`` never goes down, so the history's attempt numbers stay unique
    (attempt rows are keyed by number). "Resetting" the attempts therefore
    gives the job a fresh budget instead: ``max_attempts`` becomes the
    attempts counted so far (``attempt - released_attempts``) plus the budget,
    the job's configured max attempts (recorded in its retry policy the first
    time it is raised). Keeping the attempts grants one more attempt when the
    job had used them all. The budget never passes ``ATTEMPT_CEILING``.
    """
    if at_attempt_ceiling(attempt):
        return None
    policy = RetryPolicy.from_json(retry_policy)
    budget = policy.max_attempts or max_attempts
    if policy.max_attempts is None:
        policy = RetryPolicy(
            max_attempts=max_attempts,
            initial_backoff_ms=policy.initial_backoff_ms,
            backoff_multiplier=policy.backoff_multiplier,
            max_backoff_ms=policy.max_backoff_ms,
            jitter=policy.jitter,
            non_retryable_error_kinds=policy.non_retryable_error_kinds,
        )
    counted = attempt - (released_attempts or 0)
    granted = max(max_attempts, counted + 1) if keep_attempts else counted + budget
    return RetryGrant(min(granted, ATTEMPT_CEILING), policy.to_json())


# How an operator retry computes a job's new budget (``operator_retry_grant``).
RetryGrantRule = Callable[[int, int | None, int, str | None, bool], RetryGrant | None]


DEFAULT_RETRY_POLICY = RetryPolicy(
    max_attempts=3,
    initial_backoff_ms=1_000,
    backoff_multiplier=2.0,
    max_backoff_ms=300_000,
    jitter=0.2,
)


class UniqueRule(enum.IntEnum):
    """How a uniqueness key admits jobs (``Uniqueness``; docs/uniqueness.md)."""

    # At most one job of the key in one of ``statuses`` (default PENDING, RUNNING).
    WHILE = 1
    # One job per ``period_us`` from the admitted job's enqueue, whatever its state.
    PERIOD = 2
    # An enqueue while the key's job is PENDING and not yet due replaces its
    # payload and moves its due time (never past the first enqueue + max wait).
    DEBOUNCE = 3


class UniqueOutcome(enum.IntEnum):
    """What an enqueue with a uniqueness key did."""

    # A new job was stored (the key had none that blocks it).
    CREATED = 1
    # The key's job was returned unchanged (deduplicated).
    EXISTING = 2
    # The key's pending job took this enqueue's payload and a later due time.
    DEBOUNCED = 3


@dataclass(frozen=True, slots=True)
class Uniqueness:
    """The uniqueness rule an enqueue asks for, per tenant and key."""

    key: str
    rule: UniqueRule
    # WHILE: the statuses in which the key's job blocks another.
    statuses: tuple[JobStatus, ...] = LIVE_STATUSES
    # PERIOD: the window's length.
    period_us: int = 0
    # DEBOUNCE: how long after the latest enqueue the job becomes due, and the
    # most the first enqueue's job may be put off in all (0: no bound).
    delay_us: int = 0
    max_wait_us: int = 0


class MisfirePolicy(enum.IntEnum):
    """What a scheduler tick enqueued later than its grace does (``ScheduleTick``)."""

    # One job, now; further late ticks of the schedule while it is pending
    # are that job (a backlog of missed ticks fires once).
    FIRE_ONCE_LATE = 1
    # No job (unless the tick's job exists already).
    SKIP = 2


# A tick enqueued more than this after its nominal time is a misfire, unless
# the tick names its own grace.
DEFAULT_MISFIRE_GRACE_US = 60 * 1_000_000


@dataclass(frozen=True, slots=True)
class ScheduleTick:
    """One tick of an outside scheduler: the schedule and the time it was due."""

    schedule_id: str
    nominal_at: int
    policy: MisfirePolicy = MisfirePolicy.FIRE_ONCE_LATE
    grace_us: int = DEFAULT_MISFIRE_GRACE_US


@dataclass(frozen=True, slots=True)
class UniqueKeyRow:
    """A stored uniqueness key: the job it names and what debounce did to it."""

    tenant_id: str
    unique_key: str
    job_id: str
    rule: int
    # When the key's job was admitted, and (PERIOD) when its window ends.
    admitted_at: int
    window_ends_at: int | None
    # DEBOUNCE: times the job's due time was moved, when last, and its bound.
    debounced: int
    debounced_at: int | None
    max_due_at: int | None


class GroupStatus(enum.IntEnum):
    """A job group's state (equal to the proto enum)."""

    # Members may be added.
    OPEN = 1
    # No more members; the completion job is enqueued once every member ended.
    CLOSED = 2
    # The completion job was enqueued (exactly once).
    COMPLETED = 3


@dataclass(frozen=True, slots=True)
class GroupRow:
    """A job group as stored, with its members counted by status."""

    id: str
    tenant_id: str
    status: GroupStatus
    completion_job_id: str | None
    created_at: int
    closed_at: int | None
    completed_at: int | None
    # Members by JobStatus number.
    counts: dict[int, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class BacklogState(enum.IntEnum):
    """Where a PENDING or RUNNING job stands for the backlog figures
    (store/scaling.py), the first that applies in this order."""

    # Due, not paused, not held behind its ordering key: limits and workers decide.
    STARTABLE = 0
    # Covered by a pause (a tenant disabled, a definition, instance, job type or category paused).
    PAUSED = 1
    # Not due yet (a delay, a retry's backoff, a debounce).
    SCHEDULED = 2
    # Held behind an earlier job of its ordering key.
    ORDERING = 3
    # In flight on a worker.
    RUNNING = 4


@dataclass(frozen=True, slots=True)
class BacklogGroup:
    """PENDING or RUNNING jobs in one ``BacklogState`` sharing a tenant, job
    type, category and (when a limit is set on those kinds) a definition and a
    concurrency key: one row of ``job_backlog_groups``."""

    tenant_id: str
    job_type: str
    category: int
    # "" / None when no limit of that kind is set (the rows are not told apart by it).
    definition_id: str
    concurrency_key: str | None
    state: BacklogState
    n: int
    # Due time of the oldest of them.
    oldest_due_at: int | None


@dataclass(frozen=True, slots=True)
class ScalingFigures:
    """The backlog of one tenant's job type (or one job type across tenants:
    ``tenant_id`` empty), as KEDA, GetStats and the gauges read it
    (engine/scaling.py). Every PENDING job is counted once: in ``ready``, in
    ``scheduled`` or in exactly one of the held kinds."""

    job_type: str
    # A connected worker that is not drained could start it now: due, not
    # paused, not held behind its ordering key, within the free slots of its
    # concurrency limits and the starts its rate limits admit now.
    ready: int = 0
    # Not due yet (not paused).
    scheduled: int = 0
    # RUNNING: in flight on a worker.
    running: int = 0
    # Due time of the oldest ready job (None: none is ready).
    oldest_ready_due_at: int | None = None
    # Held by a pause (due or not).
    paused: int = 0
    # Held by a full concurrency limit: beyond its free slots.
    limit: int = 0
    # Held by a rate limit: beyond the starts it admits now.
    rate: int = 0
    # Held behind an earlier job of its ordering key.
    ordering: int = 0
    # Startable, but no connected worker serves its job type for its tenant.
    no_worker: int = 0
    # Startable, but every worker serving it is drained (or the coordinator is).
    drained: int = 0
    tenant_id: str = ""

    @property
    def held(self) -> int:
        return self.paused + self.limit + self.rate + self.ordering + self.no_worker + self.drained

    @property
    def demand(self) -> int:
        """What KEDA scales by: the jobs a worker could start now if there were
        one (ready, or waiting only for a worker) plus those in flight."""
        return self.ready + self.no_worker + self.drained + self.running


@dataclass(frozen=True, slots=True)
class JobTypeDefaults:
    """Settings a job of this type gets when its enqueue leaves them unset."""

    retry_policy: RetryPolicy = RetryPolicy()
    execution_timeout_ms: int | None = None
    heartbeat_timeout_ms: int | None = None
    # What a FAULTED job of an ordering key does to the key (None: block).
    ordering_failure: OrderingFailure | None = None


@dataclass(slots=True)
class NewJob:
    """A validated job about to be stored."""

    id: str
    job_type: str
    tenant_id: str
    definition_id: str = ""
    definition_version: int = 0
    instance_id: str = ""
    activity_id: str = ""
    activity_node_id: str = ""
    bookmark_id: str = ""
    correlation_id: str = ""
    payload: bytes = b""
    content_type: str = ""
    category: int = 0
    priority: int = 0
    created_at: int = 0
    due_at: int = 0
    max_attempts: int = 3
    retry_policy: str | None = None
    execution_timeout_ms: int | None = None
    heartbeat_timeout_ms: int | None = None
    idempotency_key: str | None = None
    traceparent: str = ""
    tracestate: str = ""
    concurrency_key: str | None = None
    replay_of: str | None = None
    parent_job_id: str | None = None
    ordering_key: str | None = None
    ordering_skip_failed: bool = False
    # Set by the store as it inserts the job (see ``store/ordering.py``).
    ordering_held: bool = False
    # The job group it joins (store/groups.py); None: none.
    group_id: str | None = None
    # W3C traceparents its spans link to, as a JSON list (None: none).
    trace_links: str | None = None


@dataclass(slots=True)
class JobRecord:
    """A stored job, fields in the table's column order (``JobRecord(*row)``).

    Plain attribute access on a slots dataclass is far cheaper than on a
    database row, and converting every leased job reads ~35 fields.
    """

    id: str
    job_type: str
    tenant_id: str
    definition_id: str
    definition_version: int
    instance_id: str
    activity_id: str
    activity_node_id: str
    bookmark_id: str
    correlation_id: str
    payload: bytes
    content_type: str
    category: int
    priority: int
    status: int
    attempt: int
    max_attempts: int
    retry_policy: str | None
    execution_timeout_ms: int | None
    heartbeat_timeout_ms: int | None
    created_at: int
    due_at: int
    started_at: int | None
    finished_at: int | None
    lease_owner: str | None
    lease_token: str | None
    lease_expires_at: int | None
    last_error: str | None
    last_error_kind: str | None
    result: bytes | None
    result_content_type: str | None
    idempotency_key: str | None
    traceparent: str
    tracestate: str
    concurrency_key: str | None
    cancel_requested: bool
    replay_of: str | None
    # Attempts released by workers; ``attempt - released_attempts`` count
    # against ``max_attempts``.
    released_attempts: int = 0
    # The job whose handler enqueued this one (a child job).
    parent_job_id: str | None = None
    # The order of the job's last event (see ``store/events.py``).
    event_tx: int = 0
    # Jobs of one tenant and ordering key run one at a time, in the order
    # they were stored (``ordering_seq``).
    ordering_key: str | None = None
    # A FAULTED job of the key lets the next one run (else it holds the key).
    ordering_skip_failed: bool = False
    # PENDING behind an earlier live job of its key, out of acquisition's reach
    # until that job ends (``store/ordering.py``).
    ordering_held: bool = False
    # The database's number for the job, given as it is stored: a key's jobs
    # run in its order (``store/ordering.py``); None for a job without a key
    # stored on SQLite.
    ordering_seq: int | None = None
    # The reason an operator gave for cancelling it; a retry clears it.
    cancel_reason: str | None = None
    # The job group the job is a member of (``store/groups.py``).
    group_id: str | None = None
    # W3C traceparents its spans link to, as a JSON list (a group's completion job).
    trace_links: str | None = None

    @property
    def counted_attempts(self) -> int:
        """Attempts that count against ``max_attempts`` (released ones do not)."""
        return self.attempt - self.released_attempts


# What the store hands out for a stored job.
JobRow = JobRecord


class AttemptRow(Protocol):
    job_id: str
    number: int
    worker_id: str | None
    started_at: int | None
    ended_at: int | None
    outcome: int
    error: str | None
    error_kind: str | None
    traceback: str | None


class FairSnapshot(NamedTuple):
    """The fair scheduler's clocks, for a store that ranks candidates itself.

    ``tenants``, ``starts``, ``weights`` and ``category_floors`` are aligned:
    each known tenant's start clock, weight and the clock a category of it
    not listed starts at. ``category_tenants``, ``categories``,
    ``category_starts`` and ``category_weights`` are aligned: each known
    (tenant, category) start clock and weight. A tenant not listed starts at
    ``floor``; its categories at 0.
    """

    tenants: Sequence[str] = ()
    starts: Sequence[float] = ()
    weights: Sequence[float] = ()
    floor: float = 0.0
    category_floors: Sequence[float] = ()
    category_tenants: Sequence[str] = ()
    categories: Sequence[int] = ()
    category_starts: Sequence[float] = ()
    category_weights: Sequence[float] = ()


class FairClaim(NamedTuple):
    """What a one-statement fair claim leased (``job_claim_fair``).

    ``skipped`` counts the picks it did not lease: another transaction held
    their rows (a replica's claim) or changed them since they were read. A
    claim that skipped picks may have left eligible jobs behind.
    """

    rows: list[Any]
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pending job that acquisition may pick, with what ranking needs."""

    id: str
    tenant_id: str
    priority: int
    due_at: int
    job_type: str = ""
    definition_id: str = ""
    concurrency_key: str | None = None
    category: int = 0


def candidate_of(row: Any) -> Candidate:
    """The scopes and rank of a stored job (a ``JobRow``) as a ``Candidate``."""
    return Candidate(
        row.id,
        row.tenant_id,
        row.priority,
        row.due_at,
        row.job_type,
        row.definition_id,
        row.concurrency_key,
        row.category,
    )


@dataclass(frozen=True, slots=True)
class ConcurrencyLimit:
    """At most ``max_running`` RUNNING jobs in a scope, cluster-wide.

    ``value`` names one tenant, job type, definition or concurrency key;
    ``"*"`` applies the limit to each value of that kind separately.
    """

    kind: LimitKind
    value: str
    max_running: int


@dataclass(frozen=True)
class RateLimit:
    """At most ``starts`` job starts per ``period_ms`` in a scope, cluster-wide,
    with bursts of up to ``burst`` starts (GCRA; engine/rate_limits.py).

    ``value`` names one tenant, job type, definition, concurrency key or
    category (its number as text); ``"*"`` applies the limit to each value of
    that kind separately. A specific value's limit replaces the wildcard.
    """

    kind: LimitKind
    value: str
    starts: int
    period_ms: int
    burst: int


@dataclass(slots=True)
class Exclusions:
    """Scopes acquisition should not even read candidates from (limits full)."""

    tenants: set[str] = field(default_factory=set)
    job_types: set[str] = field(default_factory=set)
    definitions: set[str] = field(default_factory=set)
    concurrency_keys: set[str] = field(default_factory=set)
    categories: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(
            self.tenants
            or self.job_types
            or self.definitions
            or self.concurrency_keys
            or self.categories
        )


@dataclass(frozen=True, slots=True)
class DirectLeases:
    """Jobs of an insert offered straight to idle workers (job id -> worker id)."""

    owners: dict[str, str]
    lease_token: str
    now: int
    default_lease_ms: int


@dataclass(frozen=True, slots=True)
class Claim:
    """One job to lease to one worker."""

    job_id: str
    owner: str


# Not frozen, for the reason given at JobEvent: one outcome is built per job
# reported (0.9 against 0.2 µs for a Completion).
@dataclass(slots=True)
class Completion:
    job_id: str
    lease_token: str
    result: bytes = b""
    content_type: str = ""
    # The handler reported push-back: hold its rate limits this long (µs; 0: the
    # default hold; None: no push-back). See engine/rate_limits.py.
    push_back_us: int | None = None


@dataclass(slots=True)
class Failure:
    job_id: str
    lease_token: str
    error: str = ""
    error_kind: str = ""
    non_retryable: bool = False
    retry_at: int | None = None
    traceback: str = ""
    # The handler reported push-back: hold its rate limits this long (µs; 0: the
    # default hold; None: no push-back). See engine/rate_limits.py.
    push_back_us: int | None = None


@dataclass(slots=True)
class Release:
    job_id: str
    lease_token: str
    reason: str = ""
    payload: bytes | None = None
    content_type: str | None = None
    # The handler reported push-back: hold its rate limits this long (µs; 0: the
    # default hold; None: no push-back). See engine/rate_limits.py.
    push_back_us: int | None = None


@dataclass(frozen=True, slots=True)
class LeasedForFailure:
    """What the engine needs to decide a failed attempt's fate."""

    id: str
    job_type: str
    attempt: int
    max_attempts: int
    retry_policy: str | None
    lease_owner: str | None
    started_at: int | None
    cancel_requested: bool
    released_attempts: int = 0
    # The job's ordering key (with its tenant): an end that finishes the job
    # may release the key's next job.
    tenant_id: str = ""
    ordering_key: str | None = None
    # The job's group: an end that finishes the job may complete the group.
    group_id: str | None = None

    @property
    def counted_attempts(self) -> int:
        """Attempts that count against ``max_attempts`` (released ones do not)."""
        return self.attempt - self.released_attempts


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """The engine's decision for one ended attempt, applied by the store."""

    job_id: str
    outcome: AttemptOutcome
    new_status: JobStatus
    due_at: int | None = None
    error: str | None = None
    error_kind: str | None = None
    # The handler's traceback of a failed attempt, as reported (bounded).
    traceback: str | None = None
    # The lease token of the worker's report that ended the attempt; None when
    # the coordinator ended it (a resent report is recognised by it).
    reported_token: str | None = None
    result: bytes | None = None
    result_content_type: str | None = None
    payload: bytes | None = None
    payload_content_type: str | None = None
    # A released attempt: recorded in released_attempts, so it does not count
    # against max attempts (max_attempts itself is never raised).
    refund_attempt: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    job_id: str
    lease_expires_at: int
    cancel_requested: bool


@dataclass(frozen=True, slots=True)
class PauseScope:
    kind: PauseKind
    tenant_id: str = ""
    value: str = ""


@dataclass(frozen=True, slots=True)
class PauseRecord:
    """A pause as stored (``wfj_pauses``); in force while not lifted and not expired."""

    id: str
    kind: int
    # Empty: every tenant.
    tenant_id: str
    # Empty for a tenant pause (its tenant is ``tenant_id``); a category by its number.
    value: str
    actor: str
    reason: str
    created_at: int
    expires_at: int | None
    lifted_at: int | None
    lifted_by: str | None

    @property
    def scope(self) -> PauseScope:
        return PauseScope(PauseKind(self.kind), self.tenant_id, self.value)


@dataclass(slots=True)
class JobFilter:
    statuses: tuple[int, ...] = ()
    tenant_id: str = ""
    job_type: str = ""
    definition_id: str = ""
    instance_id: str = ""
    correlation_id: str = ""
    category: int = 0
    # Any of these job types (empty: every type); narrows job_type like any field.
    job_types: tuple[str, ...] = ()
    created_after: int | None = None
    created_before: int | None = None
    due_after: int | None = None
    due_before: int | None = None
    # Jobs with an attempt that ended in a FAILED_OUTCOMES outcome at or after it.
    failed_after: int | None = None
    parent_job_id: str = ""
    group_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# Attempt outcomes that count as failures in stats.
FAILED_OUTCOMES = (AttemptOutcome.FAILED, AttemptOutcome.LEASE_EXPIRED, AttemptOutcome.TIMED_OUT)


@dataclass(frozen=True, slots=True)
class StateChange:
    """The result of a guarded single-job write.

    ``row`` is the job after the call (None: no such job); ``changed`` tells
    whether the write applied; when it did not, ``row.status`` is the state
    that prevented it.
    """

    row: JobRow | None
    changed: bool


@dataclass(frozen=True, slots=True)
class BulkCount:
    matched: int
    changed: int


@dataclass(frozen=True, slots=True)
class PurgeCount:
    """What a purge of finished jobs by filter found and did (``PurgeJobs``)."""

    # Finished jobs matching the filter that a purge deletes.
    matched: int
    # Those deleted (0 on a dry run).
    deleted: int
    # Finished jobs matching the filter that are kept: FAULTED jobs holding
    # their ordering key, members of groups that have not completed.
    kept: int


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """One connected worker as a coordinator registers it."""

    worker_id: str
    hostname: str
    pid: int
    sdk_version: str
    job_types: Sequence[str]
    slots: int
    connected_at: int
    draining: bool = False
    # The tenants the worker's credential covers; None: every tenant.
    tenants: Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class RunningDeadline:
    """A running attempt that has an execution timeout."""

    job_id: str
    lease_token: str
    deadline: int
