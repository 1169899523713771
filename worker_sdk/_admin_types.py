"""The operator API's value types: what :class:`~worker_sdk.AdminClient` answers.

Jobs come back as :class:`JobView` (``_convert``), ExplainJob as
:class:`JobExplanation` with :class:`WaitReason` values, limits as
:class:`ConcurrencyLimit` and :class:`RateLimit`, weights as
:class:`TenantWeights` and :class:`CategoryWeights`, job type defaults as
:class:`JobTypeDefaults`, pauses as :class:`PauseRecord`, workers as
:class:`WorkerView`, stats as :class:`JobStats` and the caller's credential as
:class:`Identity`; each keeps its protobuf message as ``raw``. Scope kinds are
read from the contract's enums (:data:`PAUSE_SCOPE_KINDS`,
:data:`LIMIT_SCOPE_KINDS`) and worded here (:func:`pause_scope_text`), so the
CLI and the dashboard word them alike. Public through ``worker_sdk``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from workflowjobs.v1 import admin_service_pb2, job_pb2

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
    to_timestamp,
)

__all__ = [
    "BulkResult",
    "CategoryWeight",
    "CategoryWeights",
    "ConcurrencyLimit",
    "Identity",
    "JobExplanation",
    "GroupPage",
    "JobFilter",
    "JobPage",
    "JobStats",
    "JobTypeDefaults",
    "LIMIT_SCOPE_KINDS",
    "LimitKind",
    "PAUSE_SCOPE_KINDS",
    "PauseKind",
    "PauseRecord",
    "PauseScope",
    "PurgeResult",
    "RateLimit",
    "StatusCount",
    "TenantWeight",
    "TenantWeights",
    "UniqueKey",
    "UniqueKeyRule",
    "WaitReason",
    "WaitReasonKind",
    "WindowCounts",
    "WorkerView",
    "category_name",
    "pause_scope",
    "pause_scope_text",
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
        failed_after: With an attempt that failed (FAILED, LEASE_EXPIRED or
            TIMED_OUT) at or after it, whatever the status now.
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
    failed_after: datetime | None = None
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
        for field in (
            "created_after",
            "created_before",
            "due_after",
            "due_before",
            "failed_after",
        ):
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
        lift_time: When it was lifted; None while in force and for one that
            expired (:meth:`ended` says when and by whom it ended either way).
        lifted_by: Who lifted it ("" while in force, once expired, or lifted
            through a coordinator without authentication by a caller naming no one).
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

    def ended(self, now: datetime) -> tuple[datetime, str] | None:
        """When the pause stopped holding jobs, and who or what ended it: the
        name of who lifted it (``"unauthenticated"`` when a coordinator without
        authentication recorded none, as for :attr:`actor`), or ``"expiry"``
        for one whose expiry came; None while it is in force."""
        if self.lift_time is not None:
            return self.lift_time, self.lifted_by or "unauthenticated"
        if self.expire_time is not None and self.expire_time <= now:
            return self.expire_time, "expiry"
        return None


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
        stale: Its coordinator (another replica) has not refreshed it for
            35 s (by default): that replica is likely dead.
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
    stale: bool = False
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
            stale=worker.stale,
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
class Backlog:
    """Pending jobs by what they wait for, each counted once
    (:attr:`JobStats.backlog`; docs/autoscaling.md): the numbers KEDA's scaler
    serves, whose metric is ``ready + no_worker + drained + running``.

    Attributes:
        tenant_id: The tenant ("" in :attr:`JobStats.backlog`: all asked for).
        job_type: The job type ("" in :attr:`JobStats.backlog`).
        ready: Runnable now: due, not paused or held, within its limits' free
            slots and admitted starts, and a connected worker (not drained) serves it.
        scheduled: Not due yet (not paused).
        paused: Held by a pause.
        limit: Held by a concurrency limit (beyond its free slots).
        rate: Held by a rate limit (beyond the starts it admits now).
        ordering: Held behind an earlier job of its ordering key.
        no_worker: Could start, but no connected worker serves it for its tenant.
        drained: Could start, but every worker serving it is drained (or the coordinator is).
        running: Running jobs.
    """

    tenant_id: str = ""
    job_type: str = ""
    ready: int = 0
    scheduled: int = 0
    paused: int = 0
    limit: int = 0
    rate: int = 0
    ordering: int = 0
    no_worker: int = 0
    drained: int = 0
    running: int = 0

    @property
    def held(self) -> int:
        """Every held job, whatever holds it."""
        return self.paused + self.limit + self.rate + self.ordering + self.no_worker + self.drained

    @classmethod
    def from_proto(cls, b: admin_service_pb2.Backlog) -> Backlog:
        """Read a ``workflowjobs.v1.Backlog`` message."""
        return cls(
            b.tenant_id,
            b.job_type,
            b.ready,
            b.scheduled,
            b.held_paused,
            b.held_limit,
            b.held_rate,
            b.held_ordering,
            b.held_no_worker,
            b.held_drained,
            b.running,
        )


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
        backlog: The pending jobs split into ready, scheduled and held by
            reason (:class:`Backlog`).
        backlog_by_type: The same per tenant and job type.
        read_time: The coordinator's time the counts were read at: pending
            jobs due after it are ``scheduled``, the others due (None from a
            coordinator that does not say).
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
    backlog: Backlog = Backlog()
    backlog_by_type: list[Backlog] = dataclasses.field(default_factory=list)
    read_time: datetime | None = None
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
            backlog=Backlog.from_proto(response.backlog),
            backlog_by_type=[Backlog.from_proto(b) for b in response.backlog_by_type],
            read_time=_when(response, "read_time"),
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


@dataclasses.dataclass(frozen=True, slots=True)
class PurgeResult:
    """Outcome of :meth:`AdminClient.purge_jobs`.

    Attributes:
        matched: Finished jobs the filter matched that a purge deletes.
        deleted: Those deleted (0 on a dry run).
        kept: Finished jobs the filter matched that are kept: FAULTED jobs
            holding their ordering key (cancel one to set it aside) and
            members of groups that have not completed.
    """

    matched: int
    deleted: int
    kept: int


@dataclasses.dataclass(frozen=True, slots=True)
class GroupPage:
    """One page of :meth:`AdminClient.list_groups`, newest first.

    Attributes:
        groups: The groups, each with its members counted by status.
        next_page_token: Pass to the next call for the page after; empty on the last page.
    """

    groups: list[GroupView]
    next_page_token: str


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
