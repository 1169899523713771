"""Operator client: one typed method per ``AdminService`` RPC.

Jobs come back as :class:`JobView`, ExplainJob as :class:`JobExplanation` with
:class:`WaitReason` values, limits as :class:`ConcurrencyLimit` and
:class:`RateLimit`, weights as :class:`TenantWeights` and
:class:`CategoryWeights`, job type defaults as :class:`JobTypeDefaults`,
pauses as :class:`PauseRecord`, workers as :class:`WorkerView`, stats as
:class:`JobStats` and the caller's credential as :class:`Identity`: no
method returns a protobuf message (each value keeps it as ``raw``). Scope kinds are accepted as short names
(``"tenant"``, ``"definition"``, ``"instance"``, ``"job_type"``,
``"concurrency_key"``, ``"category"``), full enum names, or enum numbers, so a CLI can pass its
arguments straight through.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Unpack, cast

from workflowjobs.v1 import admin_service_pb2, admin_service_pb2_grpc, job_pb2

from ._convert import (
    GroupView,
    JobAttemptView,
    JobCategory,
    JobStatus,
    JobView,
    RetryPolicy,
    category_to_proto,
    from_duration,
    from_timestamp,
    to_duration,
    to_timestamp,
)
from ._transport import BlockingClient, ClientOptions

__all__ = [
    "AdminClient",
    "BulkResult",
    "CategoryWeight",
    "CategoryWeights",
    "ConcurrencyLimit",
    "Identity",
    "JobExplanation",
    "JobFilter",
    "JobPage",
    "JobStats",
    "JobTypeDefaults",
    "LimitKind",
    "PauseKind",
    "PauseRecord",
    "PauseScope",
    "RateLimit",
    "StatusCount",
    "TenantWeight",
    "TenantWeights",
    "WindowCounts",
    "WorkerView",
]


def _short_names(enum_type: Any, prefix: str) -> tuple[str, ...]:
    """The short names of an enum's values (``job_type``), in the order the
    contract declares them, UNSPECIFIED left out."""
    return tuple(
        n.removeprefix(prefix).lower() for n in enum_type.keys() if not n.endswith("UNSPECIFIED")
    )


# The scope kinds by short name, read from the contract's enums: the CLI and
# the dashboard offer these, so a kind added to the proto needs no list here.
PAUSE_SCOPE_KINDS = _short_names(admin_service_pb2.PauseScopeKind, "PAUSE_SCOPE_KIND_")
LIMIT_SCOPE_KINDS = _short_names(admin_service_pb2.LimitScopeKind, "LIMIT_SCOPE_KIND_")


def category_name(value: str) -> str:
    """A category as records carry it (its number, "3") by its name ("integration")."""
    if value.isdigit() and int(value) in job_pb2.JobCategory.values():
        return job_pb2.JobCategory.Name(int(value)).removeprefix("JOB_CATEGORY_").lower()
    return value


def pause_scope_text(
    scope: admin_service_pb2.PauseScope | PauseScope,
    *,
    kind_words: str = " ",
    in_tenant: str = " (tenant {})",
    every_tenant: str = "",
) -> str:
    """A pause scope as the CLI and the dashboard word it.

    A tenant pause is "tenant acme"; any other is its kind and value ("job type
    send-email", "category integration": a category by its name), then its
    tenant as ``in_tenant`` words it, or ``every_tenant`` when it has none.
    ``kind_words`` joins the words of a kind (the CLI writes "job-type", as its
    arguments do).
    """
    kind = admin_service_pb2.PauseScopeKind.Name(scope.kind).removeprefix("PAUSE_SCOPE_KIND_")
    if kind == "TENANT":
        return f"tenant {scope.tenant_id}"
    value = category_name(scope.value) if kind == "CATEGORY" else scope.value
    where = in_tenant.format(scope.tenant_id) if scope.tenant_id else every_tenant
    return f"{kind.lower().replace('_', kind_words)} {value}{where}"


def _enum_value(enum_type: Any, prefix: str, value: str | int, what: str) -> Any:
    if isinstance(value, int):
        return value
    name = value.strip().upper().replace("-", "_")
    if not name.startswith(prefix):
        name = prefix + name
    try:
        return int(enum_type.Value(name))
    except ValueError:
        choices = ", ".join(_short_names(enum_type, prefix))
        raise ValueError(f"unknown {what} {value!r}; expected one of: {choices}") from None


@dataclasses.dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs an admin listing or bulk action applies to. Unset fields match all.

    Attributes:
        statuses: Job statuses to include.
        tenant_id: Tenant.
        job_type: Job type.
        definition_id: Workflow definition id.
        instance_id: Workflow instance id.
        correlation_id: Correlation id.
        category: Job category.
        created_after: Created at or after.
        created_before: Created before.
        due_after: Due at or after.
        due_before: Due before.
        parent_job_id: Only the child jobs of this job.
        job_types: Only jobs of any of these types (with ``job_type`` too, both must match).
        group_id: Only the members of this job group.
    """

    statuses: Sequence[JobStatus | str] = ()
    tenant_id: str = ""
    job_type: str = ""
    definition_id: str = ""
    instance_id: str = ""
    correlation_id: str = ""
    category: JobCategory | str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    due_after: datetime | None = None
    due_before: datetime | None = None
    parent_job_id: str = ""
    job_types: Sequence[str] = ()
    group_id: str = ""

    def to_proto(self) -> admin_service_pb2.JobFilter:
        """Build the ``workflowjobs.v1.JobFilter`` message."""
        message = admin_service_pb2.JobFilter(
            statuses=[cast(Any, JobStatus(str(s).upper()).to_proto()) for s in self.statuses],
            tenant_id=self.tenant_id,
            job_type=self.job_type,
            definition_id=self.definition_id,
            instance_id=self.instance_id,
            correlation_id=self.correlation_id,
            category=category_to_proto(self.category),  # type: ignore[arg-type]
            parent_job_id=self.parent_job_id,
            job_types=list(self.job_types),
            group_id=self.group_id,
        )
        for field in ("created_after", "created_before", "due_after", "due_before"):
            value = getattr(self, field)
            if value is not None:
                getattr(message, field).CopyFrom(to_timestamp(value))
        return message


@dataclasses.dataclass(frozen=True, slots=True)
class JobPage:
    """One page of :meth:`AdminClient.list_jobs`.

    Attributes:
        jobs: The jobs, in the order asked for (oldest first unless ``newest_first``).
        next_page_token: Pass to the next call for the page after; empty on the last page.
        prev_page_token: Pass to the next call for the page before; empty on the first.
        total_count: Every job the filter matches (with ``include_total``; else 0).
    """

    jobs: list[JobView]
    next_page_token: str
    prev_page_token: str = ""
    total_count: int = 0


# Why a pending job waits, by the contract's numbers (``WaitReason.Kind``) so
# ``r.kind == admin_service_pb2.WaitReason.KIND_PAUSED`` holds; names without
# the ``KIND_`` prefix (``WaitReasonKind.PAUSED``), one per value the contract has.
WaitReasonKind = enum.IntEnum(  # type: ignore[misc]
    "WaitReasonKind",
    {
        name.removeprefix("KIND_"): number
        for name, number in admin_service_pb2.WaitReason.Kind.items()
    },
    module=__name__,
)
WaitReasonKind.__doc__ = "The kind of a :class:`WaitReason` (``workflowjobs.v1.WaitReason.Kind``)."


@dataclasses.dataclass(frozen=True, slots=True)
class WaitReason:
    """One reason a pending job is not running right now.

    Printed, it reads as ``wfjobs jobs explain`` prints it (``paused: …``).

    Attributes:
        kind: What holds the job (``WaitReasonKind.PAUSED``, ``RATE_LIMIT``, …).
        message: A sentence a person can act on.
        until: When it lifts by itself (a due time, a pause's expiry, a lease's
            end, when a rate limit next admits a start); None when it does not.
        pause_id: The pause that holds the job (``PAUSED``); "" otherwise.
        count: A count the kind carries (``CONCURRENCY_LIMIT``: the jobs running
            in the scope; ``QUEUED_BEHIND``: the eligible jobs ahead;
            ``FAIR_SHARE``: the other tenants; ``DEBOUNCED``: the enqueues
            debounced; ``DRAINING``: the drained workers); 0 otherwise.
        limit: The limit in force (``CONCURRENCY_LIMIT``: its running jobs;
            ``RATE_LIMIT``: its starts per period); 0 otherwise.
    """

    kind: WaitReasonKind
    message: str
    until: datetime | None = None
    pause_id: str = ""
    count: int = 0
    limit: int = 0

    def __str__(self) -> str:
        return f"{self.kind.name.lower()}: {self.message}"

    @classmethod
    def from_proto(cls, r: admin_service_pb2.WaitReason) -> WaitReason:
        """Read a ``workflowjobs.v1.WaitReason`` message."""
        return cls(
            kind=WaitReasonKind(r.kind),
            message=r.message,
            until=from_timestamp(r.until) if r.HasField("until") else None,
            pause_id=r.pause_id,
            count=r.count,
            limit=r.limit,
        )


# How a uniqueness key admitted its job, by the contract's numbers
# (``UniqueKeyRule``): ``UniqueKeyRule.WHILE``, ``PERIOD``, ``DEBOUNCE``.
UniqueKeyRule = enum.IntEnum(  # type: ignore[misc]
    "UniqueKeyRule",
    {
        name.removeprefix("UNIQUE_KEY_RULE_"): number
        for name, number in admin_service_pb2.UniqueKeyRule.items()
        if not name.endswith("UNSPECIFIED")
    },
    module=__name__,
)
UniqueKeyRule.__doc__ = "The rule of a :class:`UniqueKey` (``workflowjobs.v1.UniqueKeyRule``)."


@dataclasses.dataclass(frozen=True, slots=True)
class UniqueKey:
    """The uniqueness key whose stored row names a job (docs/uniqueness.md).

    Printed, it reads as ``wfjobs jobs explain`` prints it.

    Attributes:
        key: The key, per tenant.
        rule: How it admitted the job (:class:`UniqueKeyRule`).
        admitted: When it admitted the job.
        window_ends: ``PERIOD``: when the key admits a new job again; else None.
        debounced: ``DEBOUNCE``: later enqueues that replaced the payload and
            moved the due time; 0 otherwise.
        last_debounced: When the last of them did; None when none did.
        max_due: ``DEBOUNCE``: the latest due time they may move it to; None
            when unbounded (or another rule).
    """

    key: str
    rule: UniqueKeyRule | int
    admitted: datetime | None = None
    window_ends: datetime | None = None
    debounced: int = 0
    last_debounced: datetime | None = None
    max_due: datetime | None = None

    @property
    def rule_name(self) -> str:
        """The rule in lower case (``while``, ``period``, ``debounce``); a rule
        newer than this SDK as its number."""
        return self.rule.name.lower() if isinstance(self.rule, enum.Enum) else str(self.rule)

    def __str__(self) -> str:
        text = f"uniqueness key {self.key!r} ({self.rule_name})"
        if self.window_ends is not None:
            text += f", admits a new job from {self.window_ends.isoformat(timespec='seconds')}"
        if self.debounced:
            text += f", debounced {self.debounced} time(s)"
        if self.max_due is not None:
            text += f", due no later than {self.max_due.isoformat(timespec='seconds')}"
        return text

    @classmethod
    def from_proto(cls, k: admin_service_pb2.JobUniqueKey) -> UniqueKey:
        """Read a ``workflowjobs.v1.JobUniqueKey`` message."""
        return cls(
            key=k.key,
            rule=_known(UniqueKeyRule, k.rule),
            admitted=_when(k, "admit_time"),
            window_ends=_when(k, "window_end_time"),
            debounced=k.debounced,
            last_debounced=_when(k, "last_debounce_time"),
            max_due=_when(k, "max_due_time"),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class JobExplanation:
    """Why a job is not running right now.

    Attributes:
        job: The job.
        reasons: Every reason (:class:`WaitReason`); empty when it is eligible now.
        last_failure: The latest attempt when it failed and nothing ran since
            (the error and traceback a pending retry waits after, or those that
            faulted the job); None otherwise.
        unique_key: The uniqueness key whose stored row names the job
            (:class:`UniqueKey`); None when none does.
        raw: The ``workflowjobs.v1.ExplainJobResponse`` itself.
    """

    job: JobView
    reasons: list[WaitReason]
    last_failure: JobAttemptView | None = None
    unique_key: UniqueKey | None = None
    raw: admin_service_pb2.ExplainJobResponse | None = None


# The kind of a limit's scope, by the contract's numbers (``LimitScopeKind``)
# so ``limit.kind == admin_service_pb2.LIMIT_SCOPE_KIND_TENANT`` holds.
LimitKind = enum.IntEnum(  # type: ignore[misc]
    "LimitKind",
    {
        name.removeprefix("LIMIT_SCOPE_KIND_"): number
        for name, number in admin_service_pb2.LimitScopeKind.items()
        if not name.endswith("UNSPECIFIED")
    },
    module=__name__,
)
LimitKind.__doc__ = (
    "The kind of a limit's scope (``workflowjobs.v1.LimitScopeKind``): "
    "``TENANT``, ``JOB_TYPE``, ``DEFINITION``, ``CONCURRENCY_KEY``, ``CATEGORY``."
)


def _limit_kind(number: int) -> LimitKind:
    return cast(LimitKind, _known(LimitKind, number))


def _scope_text(kind: LimitKind, value: str) -> str:
    """A limit's scope as its repr words it: ``job_type noop``, ``category integration``."""
    name = kind.name.lower() if isinstance(kind, LimitKind) else str(int(kind))
    category = int(kind) == admin_service_pb2.LIMIT_SCOPE_KIND_CATEGORY
    return f"{name} {category_name(value) if category else value}"


@dataclasses.dataclass(frozen=True, slots=True)
class ConcurrencyLimit:
    """A concurrency limit as :meth:`AdminClient.list_concurrency_limits` lists it.

    Printed, it reads ``job_type noop: 2 of 7 running``.

    Attributes:
        kind: The kind of its scope (:class:`LimitKind`).
        value: The tenant, job type, definition, key or category (a category as
            its number, ``"3"``; :func:`category_name` names it); ``"*"`` for
            each value of the kind separately.
        max_running: Most jobs of the scope running at once.
        running: Jobs of the scope running now.
        raw: The ``workflowjobs.v1.ConcurrencyLimit`` message itself.
    """

    kind: LimitKind
    value: str
    max_running: int
    running: int = 0
    raw: admin_service_pb2.ConcurrencyLimit | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    def __str__(self) -> str:
        return f"{_scope_text(self.kind, self.value)}: {self.running} of {self.max_running} running"

    @classmethod
    def from_proto(cls, limit: admin_service_pb2.ConcurrencyLimit) -> ConcurrencyLimit:
        """Read a ``workflowjobs.v1.ConcurrencyLimit`` message."""
        return cls(
            kind=_limit_kind(limit.kind),
            value=limit.value,
            max_running=limit.max_running,
            running=limit.running,
            raw=limit,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class RateLimit:
    """A rate limit as :meth:`AdminClient.list_rate_limits` lists it.

    Printed, it reads ``job_type noop: 5 starts per 0:00:02, burst 3``.

    Attributes:
        kind: The kind of its scope (:class:`LimitKind`).
        value: The tenant, job type, definition, key or category (a category as
            its number, ``"3"``; :func:`category_name` names it); ``"*"`` for
            each value of the kind separately.
        starts: Starts allowed per period.
        period: The period.
        burst: Starts an idle scope may take at once.
        throttled_until: When the limit next admits a start (for ``"*"``, the
            latest over its values); None when it admits one now.
        slow_level: The adaptive slowdown in force: the rate is divided by
            ``2 ** slow_level`` after push-back reports (0: the configured rate).
        raw: The ``workflowjobs.v1.RateLimit`` message itself.
    """

    kind: LimitKind
    value: str
    starts: int
    period: timedelta
    burst: int
    throttled_until: datetime | None = None
    slow_level: int = 0
    raw: admin_service_pb2.RateLimit | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    def __str__(self) -> str:
        scope = _scope_text(self.kind, self.value)
        return f"{scope}: {self.starts} starts per {self.period}, burst {self.burst}"

    @classmethod
    def from_proto(cls, limit: admin_service_pb2.RateLimit) -> RateLimit:
        """Read a ``workflowjobs.v1.RateLimit`` message."""
        return cls(
            kind=_limit_kind(limit.kind),
            value=limit.value,
            starts=limit.starts,
            period=limit.period.ToTimedelta(),
            burst=limit.burst,
            throttled_until=(
                from_timestamp(limit.throttled_until) if limit.HasField("throttled_until") else None
            ),
            slow_level=limit.slow_level,
            raw=limit,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class TenantWeight:
    """One tenant's fair-share weight.

    Attributes:
        tenant_id: The tenant.
        weight: Its weight (1 to 10000).
    """

    tenant_id: str
    weight: int


@dataclasses.dataclass(frozen=True, slots=True)
class TenantWeights:
    """The fair-share weights :meth:`AdminClient.list_tenant_weights` lists.

    Attributes:
        weights: The weights set, one :class:`TenantWeight` per tenant, by tenant id.
        default_weight: The weight of every tenant not listed.
        raw: The ``workflowjobs.v1.ListTenantWeightsResponse`` itself.
    """

    weights: list[TenantWeight]
    default_weight: int
    raw: admin_service_pb2.ListTenantWeightsResponse | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    @classmethod
    def from_proto(cls, response: admin_service_pb2.ListTenantWeightsResponse) -> TenantWeights:
        """Read a ``workflowjobs.v1.ListTenantWeightsResponse`` message."""
        return cls(
            weights=[TenantWeight(w.tenant_id, w.weight) for w in response.weights],
            default_weight=response.default_weight,
            raw=response,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class CategoryWeight:
    """One category's share of its tenant's starts.

    Attributes:
        tenant_id: The tenant.
        category: The category (``JobCategory.UNSPECIFIED``: the jobs enqueued
            without one).
        weight: Its weight (1 to 10000).
    """

    tenant_id: str
    category: JobCategory
    weight: int


@dataclasses.dataclass(frozen=True, slots=True)
class CategoryWeights:
    """The category weights :meth:`AdminClient.list_category_weights` lists
    (a category not listed has weight 1).

    Attributes:
        weights: One :class:`CategoryWeight` per weight set, by tenant id, then category.
        raw: The ``workflowjobs.v1.ListCategoryWeightsResponse`` itself.
    """

    weights: list[CategoryWeight]
    raw: admin_service_pb2.ListCategoryWeightsResponse | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    @classmethod
    def from_proto(cls, response: admin_service_pb2.ListCategoryWeightsResponse) -> CategoryWeights:
        """Read a ``workflowjobs.v1.ListCategoryWeightsResponse`` message."""
        return cls(
            weights=[
                CategoryWeight(w.tenant_id, JobCategory.from_proto(w.category), w.weight)
                for w in response.weights
            ],
            raw=response,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class JobTypeDefaults:
    """What jobs of one type get when their enqueue leaves it unset, as
    :meth:`AdminClient.list_job_type_defaults` lists it.

    Attributes:
        job_type: The job type.
        retry_policy: Its default retry policy; None when it sets none.
        execution_timeout: Its default longest run of one attempt; None when unset.
        heartbeat_timeout: Its default lease length between heartbeats; None when unset.
        ordering_failure: What a FAULTED job of the type does to its ordering
            key: ``"block"`` (the default) or ``"skip"``.
        raw: The ``workflowjobs.v1.JobTypeDefaults`` message itself.
    """

    job_type: str
    retry_policy: RetryPolicy | None = None
    execution_timeout: timedelta | None = None
    heartbeat_timeout: timedelta | None = None
    ordering_failure: str = "block"
    raw: admin_service_pb2.JobTypeDefaults | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    @classmethod
    def from_proto(cls, defaults: admin_service_pb2.JobTypeDefaults) -> JobTypeDefaults:
        """Read a ``workflowjobs.v1.JobTypeDefaults`` message."""
        ordering = admin_service_pb2.OrderingFailure.Name(defaults.ordering_failure)
        return cls(
            job_type=defaults.job_type,
            retry_policy=(
                RetryPolicy.from_proto(defaults.retry_policy)
                if defaults.HasField("retry_policy")
                else None
            ),
            execution_timeout=from_duration(defaults.execution_timeout),
            heartbeat_timeout=from_duration(defaults.heartbeat_timeout),
            ordering_failure=(
                "block"
                if ordering.endswith("UNSPECIFIED")
                else ordering.removeprefix("ORDERING_FAILURE_").lower()
            ),
            raw=defaults,
        )


# The kind of a pause's scope, by the contract's numbers (``PauseScopeKind``)
# so ``scope.kind == admin_service_pb2.PAUSE_SCOPE_KIND_TENANT`` holds.
PauseKind = enum.IntEnum(  # type: ignore[misc]
    "PauseKind",
    {
        name.removeprefix("PAUSE_SCOPE_KIND_"): number
        for name, number in admin_service_pb2.PauseScopeKind.items()
        if not name.endswith("UNSPECIFIED")
    },
    module=__name__,
)
PauseKind.__doc__ = (
    "The kind of a pause's scope (``workflowjobs.v1.PauseScopeKind``): "
    "``TENANT``, ``DEFINITION``, ``INSTANCE``, ``JOB_TYPE``, ``CATEGORY``."
)


def _known(enum_type: Any, number: int) -> Any:
    try:
        return enum_type(number)
    except ValueError:  # a value newer than this SDK: keep its number
        return number


def _when(message: Any, field: str) -> datetime | None:
    return from_timestamp(getattr(message, field)) if message.HasField(field) else None


@dataclasses.dataclass(frozen=True, slots=True)
class PauseScope:
    """What a pause covers.

    Printed, it reads as the CLI words it (``job type send-email (tenant acme)``).

    Attributes:
        kind: The kind of scope (:class:`PauseKind`).
        tenant_id: The tenant; "" for a pause of every tenant (never for ``TENANT``).
        value: The definition id, instance id or job type; a category as its
            number (``"3"``; :func:`category_name` names it); "" for a tenant.
    """

    kind: PauseKind
    tenant_id: str = ""
    value: str = ""

    def __str__(self) -> str:
        return pause_scope_text(self)

    @classmethod
    def from_proto(cls, scope: admin_service_pb2.PauseScope) -> PauseScope:
        """Read a ``workflowjobs.v1.PauseScope`` message."""
        return cls(_known(PauseKind, scope.kind), scope.tenant_id, scope.value)


@dataclasses.dataclass(frozen=True, slots=True)
class PauseRecord:
    """A pause, in force or (with ``include_lifted``) lifted.

    Attributes:
        id: The pause's id.
        scope: What it covers (:class:`PauseScope`).
        actor: Who paused (the token's name under authentication).
        reason: Why.
        create_time: When it was paused.
        expire_time: When it lifts by itself; None when it does not.
        lift_time: When it was lifted or expired; None while in force.
        lifted_by: Who lifted it ("" while in force or once expired).
        raw: The ``workflowjobs.v1.PauseRecord`` message itself.
    """

    id: str
    scope: PauseScope
    actor: str = ""
    reason: str = ""
    create_time: datetime | None = None
    expire_time: datetime | None = None
    lift_time: datetime | None = None
    lifted_by: str = ""
    raw: admin_service_pb2.PauseRecord | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    @classmethod
    def from_proto(cls, record: admin_service_pb2.PauseRecord) -> PauseRecord:
        """Read a ``workflowjobs.v1.PauseRecord`` message."""
        return cls(
            id=record.id,
            scope=PauseScope.from_proto(record.scope),
            actor=record.actor,
            reason=record.reason,
            create_time=_when(record, "create_time"),
            expire_time=_when(record, "expire_time"),
            lift_time=_when(record, "lift_time"),
            lifted_by=record.lifted_by,
            raw=record,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerView:
    """A connected worker as :meth:`AdminClient.list_workers` lists it.

    Attributes:
        worker_id: The worker's id.
        hostname: Its host.
        pid: Its process id.
        sdk_version: The SDK it runs.
        job_types: The job types it takes.
        slots: Jobs it runs at once.
        in_flight_job_ids: The jobs it holds now.
        connect_time: When its stream opened.
        last_heartbeat_time: When the coordinator holding its stream last
            confirmed it open (refreshed every 15 s).
        coordinator_id: The coordinator holding its stream.
        credits: Jobs it asked for and has not been sent yet.
        draining: Drained: it takes no new jobs.
        raw: The ``workflowjobs.v1.WorkerInfo`` message itself.
    """

    worker_id: str
    hostname: str = ""
    pid: int = 0
    sdk_version: str = ""
    job_types: list[str] = dataclasses.field(default_factory=list)
    slots: int = 0
    in_flight_job_ids: list[str] = dataclasses.field(default_factory=list)
    connect_time: datetime | None = None
    last_heartbeat_time: datetime | None = None
    coordinator_id: str = ""
    credits: int = 0
    draining: bool = False
    raw: admin_service_pb2.WorkerInfo | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    @classmethod
    def from_proto(cls, worker: admin_service_pb2.WorkerInfo) -> WorkerView:
        """Read a ``workflowjobs.v1.WorkerInfo`` message."""
        return cls(
            worker_id=worker.worker_id,
            hostname=worker.hostname,
            pid=worker.pid,
            sdk_version=worker.sdk_version,
            job_types=list(worker.job_types),
            slots=worker.slots,
            in_flight_job_ids=list(worker.in_flight_job_ids),
            connect_time=_when(worker, "connect_time"),
            last_heartbeat_time=_when(worker, "last_heartbeat_time"),
            coordinator_id=worker.coordinator_id,
            credits=worker.credits,
            draining=worker.draining,
            raw=worker,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class StatusCount:
    """The jobs of one tenant, job type and status (:attr:`JobStats.counts`).

    Attributes:
        tenant_id: The tenant.
        job_type: The job type.
        status: The status (:class:`JobStatus`).
        count: Its jobs.
        scheduled: Of a ``PENDING`` count, the jobs not due yet (0 otherwise).
    """

    tenant_id: str
    job_type: str
    status: JobStatus
    count: int
    scheduled: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class WindowCounts:
    """The attempts that ended in one window up to now (:attr:`JobStats.windows`).

    Attributes:
        window: The window.
        completions: Attempts that completed their job.
        failures: Attempts that failed.
        retries: Retries scheduled.
    """

    window: timedelta
    completions: int = 0
    failures: int = 0
    retries: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class JobStats:
    """What :meth:`AdminClient.get_stats` answers: the backlog and recent attempts.

    Attributes:
        counts: Jobs per tenant, job type and status (:class:`StatusCount`).
        pending: Pending jobs (``scheduled`` of them not due yet, ``held`` of
            them behind an earlier job of their ordering key).
        running: Running jobs.
        completed: Completed jobs.
        faulted: Faulted jobs.
        cancelled: Cancelled jobs.
        oldest_pending_age: How long the oldest due pending job has waited;
            None when none is due.
        retries_in_window: Retries scheduled in the window asked for.
        failures_in_window: Attempts failed in it.
        completions_in_window: Attempts completed in it.
        dead_letter: Faulted jobs (the dead-letter set).
        draining: The coordinator answering is drained.
        connected_workers: Open worker streams in the cluster (with a tenant
            asked for, those whose credential covers it).
        held: Pending jobs held behind an earlier job of their ordering key.
        scheduled: Pending jobs not due yet (a delay, or a retry's backoff).
        windows: One :class:`WindowCounts` per window asked for, in order.
        raw: The ``workflowjobs.v1.GetStatsResponse`` itself.
    """

    counts: list[StatusCount]
    pending: int = 0
    running: int = 0
    completed: int = 0
    faulted: int = 0
    cancelled: int = 0
    oldest_pending_age: timedelta | None = None
    retries_in_window: int = 0
    failures_in_window: int = 0
    completions_in_window: int = 0
    dead_letter: int = 0
    draining: bool = False
    connected_workers: int = 0
    held: int = 0
    scheduled: int = 0
    windows: list[WindowCounts] = dataclasses.field(default_factory=list)
    raw: admin_service_pb2.GetStatsResponse | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    @classmethod
    def from_proto(cls, response: admin_service_pb2.GetStatsResponse) -> JobStats:
        """Read a ``workflowjobs.v1.GetStatsResponse`` message."""
        return cls(
            counts=[
                StatusCount(
                    c.tenant_id, c.job_type, JobStatus.from_proto(c.status), c.count, c.scheduled
                )
                for c in response.counts
            ],
            pending=response.pending,
            running=response.running,
            completed=response.completed,
            faulted=response.faulted,
            cancelled=response.cancelled,
            oldest_pending_age=(
                response.oldest_pending_age.ToTimedelta()
                if response.HasField("oldest_pending_age")
                else None
            ),
            retries_in_window=response.retries_in_window,
            failures_in_window=response.failures_in_window,
            completions_in_window=response.completions_in_window,
            dead_letter=response.dead_letter,
            draining=response.draining,
            connected_workers=response.connected_workers,
            held=response.held,
            scheduled=response.scheduled,
            windows=[
                WindowCounts(w.window.ToTimedelta(), w.completions, w.failures, w.retries)
                for w in response.windows
            ],
            raw=response,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Identity:
    """The credential a client calls with, as :meth:`AdminClient.who_am_i` answers.

    Attributes:
        authenticated: False when the coordinator runs without authentication
            (every caller may do anything to any tenant).
        name: The credential's name in the token file ("" without authentication).
        roles: Its roles (``scheduler``, ``worker``, ``admin``).
        tenants: The tenants it may act on; ``["*"]`` for every tenant.
        job_types: The only job types it may acquire (workers); empty for every type.
        raw: The ``workflowjobs.v1.WhoAmIResponse`` itself.
    """

    authenticated: bool
    name: str = ""
    roles: list[str] = dataclasses.field(default_factory=list)
    tenants: list[str] = dataclasses.field(default_factory=list)
    job_types: list[str] = dataclasses.field(default_factory=list)
    raw: admin_service_pb2.WhoAmIResponse | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    @classmethod
    def from_proto(cls, response: admin_service_pb2.WhoAmIResponse) -> Identity:
        """Read a ``workflowjobs.v1.WhoAmIResponse`` message."""
        return cls(
            authenticated=response.authenticated,
            name=response.name,
            roles=list(response.roles),
            tenants=list(response.tenants),
            job_types=list(response.job_types),
            raw=response,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class BulkResult:
    """Outcome of a bulk retry or cancel.

    Attributes:
        matched: Jobs the filter matched.
        changed: Jobs actually changed (0 on a dry run).
    """

    matched: int
    changed: int


def _filter(value: JobFilter | admin_service_pb2.JobFilter | None) -> admin_service_pb2.JobFilter:
    if value is None:
        return admin_service_pb2.JobFilter()
    if isinstance(value, JobFilter):
        return value.to_proto()
    return value


def pause_scope(kind: str | int, value: str, tenant_id: str) -> admin_service_pb2.PauseScope:
    """A pause scope from its kind (short name or number), value and tenant.

    Raises:
        ValueError: An unknown kind.
    """
    return admin_service_pb2.PauseScope(
        kind=_enum_value(
            admin_service_pb2.PauseScopeKind, "PAUSE_SCOPE_KIND_", kind, "pause scope"
        ),
        tenant_id=tenant_id,
        value=value,
    )


class AdminClient(BlockingClient):
    """Blocking client of ``AdminService``. Use as a context manager or call :meth:`close`.

    Args:
        target: ``host:port`` of the coordinator.
        credentials: TLS/mTLS channel credentials; None for plaintext.
        token: Bearer token (needs the admin role).
        metadata: Extra metadata sent with every call.
        timeout: Deadline of each call, in seconds (None: no deadline).
        channel_options: Extra gRPC channel options.
        channel: Use this channel instead of opening one (it is not closed by :meth:`close`).

    Every method raises a :class:`WorkflowJobsError` subclass when the call fails.
    """

    def __init__(self, target: str | None = None, **options: Unpack[ClientOptions]) -> None:
        super().__init__(target, **options)
        self._stub = admin_service_pb2_grpc.AdminServiceStub(self._channel)

    def who_am_i(self) -> Identity:
        """The credential this client calls with (:class:`Identity`): name,
        roles, tenants and job types.

        Any token the coordinator knows may ask, whatever its roles. Without
        authentication on the coordinator, ``authenticated`` is False (every
        role, every tenant).
        """
        return Identity.from_proto(self._call(self._stub.WhoAmI, admin_service_pb2.WhoAmIRequest()))

    # -- jobs ---------------------------------------------------------------------------------

    def get_job(self, job_id: str) -> JobView:
        """Read a job with its attempt history.

        Raises:
            JobNotFoundError: No such job.
        """
        request = admin_service_pb2.AdminServiceGetJobRequest(job_id=job_id)
        return JobView.from_proto(self._call(self._stub.GetJob, request).job)

    def list_jobs(
        self,
        filter: JobFilter | admin_service_pb2.JobFilter | None = None,
        *,
        page_size: int = 100,
        page_token: str = "",
        newest_first: bool = False,
        include_total: bool = False,
        last_page: bool = False,
    ) -> JobPage:
        """List jobs matching ``filter``, one page at a time, by creation time.

        Args:
            filter: Which jobs; None lists all.
            page_size: 1..1000.
            page_token: ``next_page_token`` or ``prev_page_token`` of a page
                listed in the same order.
            newest_first: Newest jobs first (default: oldest first).
            include_total: Also count every job the filter matches (``total_count``).
            last_page: The last page instead of the first (without ``page_token``).
        """
        request = admin_service_pb2.ListJobsRequest(
            filter=_filter(filter),
            page_size=page_size,
            page_token=page_token,
            order=admin_service_pb2.JOB_LIST_ORDER_NEWEST_FIRST
            if newest_first
            else admin_service_pb2.JOB_LIST_ORDER_OLDEST_FIRST,
            include_total=include_total,
            last_page=last_page,
        )
        response = self._call(self._stub.ListJobs, request)
        return JobPage(
            jobs=[JobView.from_proto(j) for j in response.jobs],
            next_page_token=response.next_page_token,
            prev_page_token=response.prev_page_token,
            total_count=response.total_count,
        )

    def iter_jobs(
        self,
        filter: JobFilter | admin_service_pb2.JobFilter | None = None,
        *,
        page_size: int = 100,
        newest_first: bool = False,
    ) -> Iterator[JobView]:
        """Iterate over every job matching ``filter``, fetching pages as needed."""
        token = ""
        while True:
            page = self.list_jobs(
                filter, page_size=page_size, page_token=token, newest_first=newest_first
            )
            yield from page.jobs
            token = page.next_page_token
            if not token:
                return

    def explain_job(self, job_id: str) -> JobExplanation:
        """Every reason a pending job is not running right now."""
        response = self._call(
            self._stub.ExplainJob, admin_service_pb2.ExplainJobRequest(job_id=job_id)
        )
        return JobExplanation(
            job=JobView.from_proto(response.job),
            reasons=[WaitReason.from_proto(r) for r in response.reasons],
            last_failure=(
                JobAttemptView.from_proto(response.last_failure)
                if response.HasField("last_failure")
                else None
            ),
            unique_key=(
                UniqueKey.from_proto(response.unique_key)
                if response.HasField("unique_key")
                else None
            ),
            raw=response,
        )

    def retry_job(self, job_id: str, *, keep_attempts: bool = False) -> JobView:
        """Make a faulted or cancelled job pending again.

        Args:
            job_id: The job.
            keep_attempts: Keep the attempt count instead of resetting it.
        """
        request = admin_service_pb2.RetryJobRequest(job_id=job_id, keep_attempts=keep_attempts)
        return JobView.from_proto(self._call(self._stub.RetryJob, request).job)

    def cancel_job(self, job_id: str, *, reason: str = "") -> JobView:
        """Cancel a job; a running job's handler is signalled."""
        request = admin_service_pb2.CancelJobRequest(job_id=job_id, reason=reason)
        return JobView.from_proto(self._call(self._stub.CancelJob, request).job)

    def get_group(self, group_id: str) -> GroupView:
        """A job group's state and its members counted by status (members:
        ``list_jobs(JobFilter(group_id=...))``).

        Raises:
            JobNotFoundError: No such group (or one of a tenant this token may not see).
        """
        request = admin_service_pb2.AdminServiceGetGroupRequest(group_id=group_id)
        return GroupView.from_proto(self._call(self._stub.GetGroup, request).group)

    def cancel_group(self, group_id: str, *, reason: str = "") -> tuple[GroupView, list[str]]:
        """Close a job group and cancel its pending members; returns the group and
        the ids cancelled (running members run on; the completion follows)."""
        request = admin_service_pb2.CancelGroupRequest(group_id=group_id, reason=reason)
        response = self._call(self._stub.CancelGroup, request)
        return GroupView.from_proto(response.group), list(response.cancelled_job_ids)

    def unlock_job(self, job_id: str) -> JobView:
        """Break a running job's lease and make it pending again."""
        request = admin_service_pb2.UnlockJobRequest(job_id=job_id)
        return JobView.from_proto(self._call(self._stub.UnlockJob, request).job)

    def replay_job(self, job_id: str) -> JobView:
        """Enqueue a new job with the same spec; returns the new job."""
        request = admin_service_pb2.ReplayJobRequest(job_id=job_id)
        return JobView.from_proto(self._call(self._stub.ReplayJob, request).job)

    def bulk_retry_jobs(
        self,
        filter: JobFilter | admin_service_pb2.JobFilter | None,
        *,
        dry_run: bool = False,
        keep_attempts: bool = False,
    ) -> BulkResult:
        """Retry every job matching ``filter`` (``dry_run`` only counts)."""
        request = admin_service_pb2.BulkRetryJobsRequest(
            filter=_filter(filter), dry_run=dry_run, keep_attempts=keep_attempts
        )
        response = self._call(self._stub.BulkRetryJobs, request)
        return BulkResult(matched=response.matched, changed=response.changed)

    def bulk_cancel_jobs(
        self,
        filter: JobFilter | admin_service_pb2.JobFilter | None,
        *,
        dry_run: bool = False,
        reason: str = "",
    ) -> BulkResult:
        """Cancel every job matching ``filter`` (``dry_run`` only counts)."""
        request = admin_service_pb2.BulkCancelJobsRequest(
            filter=_filter(filter), dry_run=dry_run, reason=reason
        )
        response = self._call(self._stub.BulkCancelJobs, request)
        return BulkResult(matched=response.matched, changed=response.changed)

    # -- stats and workers --------------------------------------------------------------------

    def get_stats(
        self,
        *,
        tenant_id: str = "",
        window: timedelta | float | None = None,
        category: JobCategory | str | int | None = None,
        windows: Sequence[timedelta | float] = (),
    ) -> JobStats:
        """Backlog per tenant/type/status, oldest pending age, recent retries and
        failures (:class:`JobStats`).

        Args:
            tenant_id: Limit to one tenant.
            window: Window for the recent counts (server default: 5 minutes).
            category: Limit to jobs of one category.
            windows: Also the attempt counts of each of these windows (at most
                24; the answer's ``windows``, in this order).
        """
        request = admin_service_pb2.GetStatsRequest(
            tenant_id=tenant_id,
            category=category_to_proto(category),  # type: ignore[arg-type]
            windows=[to_duration(w) for w in windows],
        )
        if window is not None:
            request.window.CopyFrom(to_duration(window))
        return JobStats.from_proto(self._call(self._stub.GetStats, request))

    def list_workers(self) -> list[WorkerView]:
        """Connected workers (:class:`WorkerView`) with their slots, in-flight
        jobs and last heartbeat."""
        response = self._call(self._stub.ListWorkers, admin_service_pb2.ListWorkersRequest())
        return [WorkerView.from_proto(w) for w in response.workers]

    # -- pauses -------------------------------------------------------------------------------

    def pause(
        self,
        kind: str | int,
        value: str = "",
        *,
        tenant_id: str = "",
        actor: str = "",
        reason: str = "",
        expire_time: datetime | None = None,
    ) -> PauseRecord:
        """Pause a tenant, definition, instance, job type or job category; returns
        the pause (:class:`PauseRecord`).

        Args:
            kind: ``"tenant"``, ``"definition"``, ``"instance"``, ``"job_type"`` or
                ``"category"``.
            value: Definition id, instance id, job type or category name
                (``"integration"``); empty for a tenant. A category pause without
                ``tenant_id`` covers every tenant.
            tenant_id: The tenant (the paused one for ``"tenant"``).
            actor: Who pauses, recorded only when the coordinator runs without
                authentication; otherwise the pause is recorded under the token's
                name (a different actor given here is kept in the reason as a note).
            reason: Why.
            expire_time: The pause lifts by itself at this time.
        """
        request = admin_service_pb2.PauseRequest(
            scope=pause_scope(kind, value, tenant_id), actor=actor, reason=reason
        )
        if expire_time is not None:
            request.expire_time.CopyFrom(to_timestamp(expire_time))
        return PauseRecord.from_proto(self._call(self._stub.Pause, request).pause)

    def unpause(
        self, kind: str | int, value: str = "", *, tenant_id: str = "", actor: str = ""
    ) -> list[PauseRecord]:
        """Lift the pauses of a scope (arguments as for :meth:`pause`); returns those lifted."""
        request = admin_service_pb2.UnpauseRequest(
            scope=pause_scope(kind, value, tenant_id), actor=actor
        )
        return [PauseRecord.from_proto(r) for r in self._call(self._stub.Unpause, request).lifted]

    def list_pauses(
        self, *, include_lifted: bool = False, tenant_id: str = ""
    ) -> list[PauseRecord]:
        """Active pauses (:class:`PauseRecord`); with ``include_lifted``, the audit history as the
        coordinator keeps it (``--pause-retention``), oldest first. Reads every
        page of ``ListPauses``."""
        out: list[PauseRecord] = []
        token = ""
        while True:
            request = admin_service_pb2.ListPausesRequest(
                include_lifted=include_lifted, tenant_id=tenant_id, page_token=token
            )
            response = self._call(self._stub.ListPauses, request)
            out.extend(PauseRecord.from_proto(r) for r in response.pauses)
            token = response.next_page_token
            if not token:
                return out

    # -- tenants, limits, drain ---------------------------------------------------------------

    def set_tenant_weight(self, tenant_id: str, weight: int) -> None:
        """Set a tenant's fair-share weight (> 0; default 1)."""
        request = admin_service_pb2.SetTenantWeightRequest(tenant_id=tenant_id, weight=weight)
        self._call(self._stub.SetTenantWeight, request)

    def list_tenant_weights(self, *, tenant_id: str = "") -> TenantWeights:
        """The fair-share weights set per tenant, and the weight of every other
        tenant (:class:`TenantWeights`).

        Args:
            tenant_id: Only this tenant's weight.
        """
        request = admin_service_pb2.ListTenantWeightsRequest(tenant_id=tenant_id)
        return TenantWeights.from_proto(self._call(self._stub.ListTenantWeights, request))

    def set_category_weight(
        self, tenant_id: str, category: JobCategory | str | int, weight: int
    ) -> None:
        """Set a category's share of its tenant's starts (1 to 10000; default 1).

        While several categories of the tenant have eligible jobs they start
        in proportion to their weights; the tenant's share across tenants is
        unchanged.

        Args:
            tenant_id: The tenant.
            category: A :class:`JobCategory`, its name (``"integration"``) or
                number; ``UNSPECIFIED`` names jobs enqueued without a category.
            weight: The category's weight.
        """
        request = admin_service_pb2.SetCategoryWeightRequest(
            tenant_id=tenant_id,
            category=category_to_proto(category),  # type: ignore[arg-type]
            weight=weight,
        )
        self._call(self._stub.SetCategoryWeight, request)

    def list_category_weights(self, *, tenant_id: str = "") -> CategoryWeights:
        """The category weights set per tenant (:class:`CategoryWeights`; a
        category not listed has weight 1).

        Args:
            tenant_id: Only this tenant's weights.
        """
        request = admin_service_pb2.ListCategoryWeightsRequest(tenant_id=tenant_id)
        return CategoryWeights.from_proto(self._call(self._stub.ListCategoryWeights, request))

    def remove_category_weight(self, tenant_id: str, category: JobCategory | str | int) -> bool:
        """Put a category of a tenant back to weight 1; False when none was set."""
        request = admin_service_pb2.RemoveCategoryWeightRequest(
            tenant_id=tenant_id,
            category=category_to_proto(category),  # type: ignore[arg-type]
        )
        response = cast(
            admin_service_pb2.RemoveCategoryWeightResponse,
            self._call(self._stub.RemoveCategoryWeight, request),
        )
        return bool(response.removed)

    def set_job_type_defaults(
        self,
        job_type: str,
        *,
        retry_policy: RetryPolicy | None = None,
        execution_timeout: timedelta | float | None = None,
        heartbeat_timeout: timedelta | float | None = None,
        ordering_failure: str | int | None = None,
    ) -> None:
        """Set what jobs of ``job_type`` get when their enqueue leaves it unset.

        Calling with nothing but the job type removes its defaults.

        Args:
            job_type: The job type.
            retry_policy: Default retry policy (max attempts, backoff, ...).
            execution_timeout: Default longest run of one attempt.
            heartbeat_timeout: Default lease length between heartbeats.
            ordering_failure: What a FAULTED job of this type does to its
                ordering key: ``"block"`` (the default: the key waits until the
                job is retried and completes, or is cancelled) or ``"skip"``
                (the next job of the key runs).
        """
        defaults = admin_service_pb2.JobTypeDefaults(job_type=job_type)
        if ordering_failure is not None:
            defaults.ordering_failure = _enum_value(
                admin_service_pb2.OrderingFailure,
                "ORDERING_FAILURE_",
                ordering_failure,
                "ordering failure policy",
            )
        if retry_policy is not None:
            defaults.retry_policy.CopyFrom(retry_policy.to_proto())
        if execution_timeout is not None:
            defaults.execution_timeout.CopyFrom(to_duration(execution_timeout))
        if heartbeat_timeout is not None:
            defaults.heartbeat_timeout.CopyFrom(to_duration(heartbeat_timeout))
        self._call(
            self._stub.SetJobTypeDefaults,
            admin_service_pb2.SetJobTypeDefaultsRequest(defaults=defaults),
        )

    def list_job_type_defaults(self) -> list[JobTypeDefaults]:
        """Every job type's defaults (:class:`JobTypeDefaults`)."""
        request = admin_service_pb2.ListJobTypeDefaultsRequest()
        response = self._call(self._stub.ListJobTypeDefaults, request)
        return [JobTypeDefaults.from_proto(x) for x in response.defaults]

    def set_concurrency_limit(self, kind: str | int, value: str, max_running: int) -> None:
        """Limit running jobs cluster-wide for a scope; ``max_running=0`` removes the limit.

        Args:
            kind: ``"tenant"``, ``"job_type"``, ``"definition"``, ``"concurrency_key"``
                or ``"category"``.
            value: The tenant id, job type, definition id, key or category name
                (``"integration"``); ``"*"`` limits each value of the kind separately.
            max_running: Most jobs of the scope running at once.
        """
        limit = admin_service_pb2.ConcurrencyLimit(
            kind=_enum_value(admin_service_pb2.LimitScopeKind, "LIMIT_SCOPE_KIND_", kind, "limit"),
            value=value,
            max_running=max_running,
        )
        self._call(
            self._stub.SetConcurrencyLimit,
            admin_service_pb2.SetConcurrencyLimitRequest(limit=limit),
        )

    def list_concurrency_limits(self) -> list[ConcurrencyLimit]:
        """Every concurrency limit (:class:`ConcurrencyLimit`) with its current running count."""
        request = admin_service_pb2.ListConcurrencyLimitsRequest()
        response = self._call(self._stub.ListConcurrencyLimits, request)
        return [ConcurrencyLimit.from_proto(x) for x in response.limits]

    def set_rate_limit(
        self,
        kind: str | int,
        value: str,
        starts: int,
        period: timedelta | float = 1.0,
        *,
        burst: int = 0,
    ) -> None:
        """Allow at most ``starts`` job starts per ``period`` in a scope, cluster-wide.

        A throttled job stays PENDING, untouched, until the limit admits it.
        Setting a limit for a scope again replaces it.

        Args:
            kind: ``"tenant"``, ``"job_type"``, ``"definition"``, ``"concurrency_key"``
                or ``"category"``.
            value: The tenant id, job type, definition id, key or category name;
                ``"*"`` limits each value of the kind separately.
            starts: Starts allowed per period (> 0).
            period: The period (seconds or a ``timedelta``), at least 1 ms.
            burst: Starts an idle scope may take at once; 0 means ``starts``.
        """
        limit = admin_service_pb2.RateLimit(
            kind=_enum_value(admin_service_pb2.LimitScopeKind, "LIMIT_SCOPE_KIND_", kind, "limit"),
            value=value,
            starts=starts,
            period=to_duration(period),
            burst=burst,
        )
        self._call(self._stub.SetRateLimit, admin_service_pb2.SetRateLimitRequest(limit=limit))

    def list_rate_limits(self) -> list[RateLimit]:
        """Every rate limit (:class:`RateLimit`), with when it next admits a
        start and its slowdown."""
        request = admin_service_pb2.ListRateLimitsRequest()
        return [
            RateLimit.from_proto(x) for x in self._call(self._stub.ListRateLimits, request).limits
        ]

    def remove_rate_limit(self, kind: str | int, value: str) -> bool:
        """Remove a rate limit; False when none was set for the scope."""
        request = admin_service_pb2.RemoveRateLimitRequest(
            kind=_enum_value(admin_service_pb2.LimitScopeKind, "LIMIT_SCOPE_KIND_", kind, "kind"),
            value=value,
        )
        return bool(self._call(self._stub.RemoveRateLimit, request).removed)

    def drain(self, *, cluster: bool = False, worker_id: str = "") -> None:
        """Stop new acquisitions on this coordinator, the whole cluster, or one worker.

        Args:
            cluster: Drain every coordinator sharing the store.
            worker_id: Drain only this worker.
        """
        self._call(
            self._stub.Drain, admin_service_pb2.DrainRequest(cluster=cluster, worker_id=worker_id)
        )

    def undrain(self, *, cluster: bool = False, worker_id: str = "") -> None:
        """Lift a drain: this coordinator's, the whole cluster's, or one worker's.

        Args:
            cluster: Lift the cluster drain.
            worker_id: Undrain only this worker (drained with ``drain(worker_id=...)``).
        """
        self._call(
            self._stub.Undrain,
            admin_service_pb2.UndrainRequest(cluster=cluster, worker_id=worker_id),
        )
