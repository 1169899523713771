"""Operator client: one typed method per ``AdminService`` RPC.

Each method answers one of the value types of :mod:`worker_sdk._admin_types`
(jobs as :class:`JobView`, ExplainJob as :class:`JobExplanation`, pauses as
:class:`PauseRecord`, ...): no method returns a protobuf message (each value
keeps it as ``raw``). Scope kinds are accepted as short names
(``"tenant"``, ``"definition"``, ``"instance"``, ``"job_type"``,
``"concurrency_key"``, ``"category"``), full enum names, or enum numbers, so a CLI can pass its
arguments straight through.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Unpack, cast

from workflowjobs.v1 import admin_service_pb2, admin_service_pb2_grpc, job_pb2

from ._admin_types import (
    BulkResult,
    CategoryWeights,
    ConcurrencyLimit,
    GroupPage,
    Identity,
    JobExplanation,
    JobFilter,
    JobPage,
    JobStats,
    JobTypeDefaults,
    PauseRecord,
    PurgeResult,
    RateLimit,
    TenantWeights,
    UniqueKey,
    WaitReason,
    WorkerView,
    _enum_value,
    pause_scope,
)
from ._convert import (
    GroupView,
    JobAttemptView,
    JobCategory,
    JobView,
    RetryPolicy,
    category_to_proto,
    to_duration,
    to_timestamp,
)
from ._transport import BlockingClient, ClientOptions

__all__ = ["AdminClient"]


def _filter(value: JobFilter | admin_service_pb2.JobFilter | None) -> admin_service_pb2.JobFilter:
    if value is None:
        return admin_service_pb2.JobFilter()
    if isinstance(value, JobFilter):
        return value.to_proto()
    return value


def _group_status(value: str | int) -> job_pb2.JobGroupStatus:
    status = _enum_value(job_pb2.JobGroupStatus, "JOB_GROUP_STATUS_", value, "group status")
    return cast(job_pb2.JobGroupStatus, status)


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
        """Cancel a job; a running job's handler is signalled. A FAULTED job is
        set aside (CANCELLED, never run again; its ordering key's next job runs)."""
        request = admin_service_pb2.CancelJobRequest(job_id=job_id, reason=reason)
        return JobView.from_proto(self._call(self._stub.CancelJob, request).job)

    def run_job_now(self, job_id: str) -> JobView:
        """Make a pending job that is not due yet (a delay, or a retry's backoff)
        due now; a job already due is returned unchanged.

        Raises:
            FailedPreconditionError: The job is not PENDING (the message names its status).
        """
        request = admin_service_pb2.RunJobNowRequest(job_id=job_id)
        return JobView.from_proto(self._call(self._stub.RunJobNow, request).job)

    def purge_jobs(
        self,
        filter: JobFilter | admin_service_pb2.JobFilter | None,
        *,
        dry_run: bool = False,
    ) -> PurgeResult:
        """Delete the finished jobs (COMPLETED, FAULTED, CANCELLED) matching
        ``filter``, with their attempt history (``dry_run`` only counts).

        FAULTED jobs holding their ordering key and members of groups that have
        not completed are kept (``PurgeResult.kept``); live jobs never match.
        """
        request = admin_service_pb2.PurgeJobsRequest(filter=_filter(filter), dry_run=dry_run)
        response = self._call(self._stub.PurgeJobs, request)
        return PurgeResult(matched=response.matched, deleted=response.deleted, kept=response.kept)

    def list_groups(
        self,
        *,
        tenant_id: str = "",
        statuses: Sequence[str | int] = (),
        page_size: int = 100,
        page_token: str = "",
    ) -> GroupPage:
        """Job groups newest first, one page at a time, with their members counted.

        Args:
            tenant_id: Only this tenant's groups (empty: every tenant the token may see).
            statuses: Only groups in these statuses (``"open"``, ``"closed"``,
                ``"completed"``, or ``JOB_GROUP_STATUS_...``).
            page_size: 1..1000.
            page_token: ``next_page_token`` of the page before.
        """
        request = admin_service_pb2.ListGroupsRequest(
            tenant_id=tenant_id,
            statuses=[_group_status(s) for s in statuses],
            page_size=page_size,
            page_token=page_token,
        )
        response = self._call(self._stub.ListGroups, request)
        return GroupPage(
            groups=[GroupView.from_proto(g) for g in response.groups],
            next_page_token=response.next_page_token,
        )

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
