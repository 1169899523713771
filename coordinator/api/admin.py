"""AdminService: what operators see and steer.

RPCs not overridden here answer UNIMPLEMENTED (the generated base class).
"""

from __future__ import annotations

import functools

import grpc

from coordinator import tenancy
from coordinator.api import convert
from coordinator.api.auth import ROLES, current_principal, tenant_scope
from coordinator.engine import Engine
from coordinator.engine.explain import explain, last_failure, unique_key
from coordinator.engine.scaling import summed
from coordinator.errors import InvalidArgument
from coordinator.model import JobStatus, ScalingFigures
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc

_DEFAULT_WINDOW_US = 300 * 1_000_000
# GetStatsRequest.windows: a chart's buckets, not a scan per second.
_MAX_STATS_WINDOWS = 24


def audit_actor(sent: str) -> str:
    """Who an operator action is recorded as: the caller's credential, never its claim.

    With authentication on, the credential's name (the token file's ``name``);
    without it (loopback, or a port behind a network boundary) the actor the
    client sent is all the coordinator knows.
    """
    principal = current_principal()
    return sent if principal is None else principal.name


def _reason_with_claim(sent: str, reason: str) -> str:
    """The reason, keeping an actor the client claimed besides its credential as a note."""
    principal = current_principal()
    if principal is None or not sent or sent == principal.name:
        return reason
    note = f"client-sent actor: {sent}"
    return f"{reason} ({note})" if reason else note


class AdminServicer(apb_grpc.AdminServiceServicer):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def GetJob(
        self,
        request: apb.AdminServiceGetJobRequest,
        context: grpc.aio.ServicerContext[
            apb.AdminServiceGetJobRequest, apb.AdminServiceGetJobResponse
        ],
    ) -> apb.AdminServiceGetJobResponse:
        row, attempts = await self._engine.get_job(request.job_id, with_attempts=True)
        return apb.AdminServiceGetJobResponse(job=convert.job_to_proto(row, attempts))

    async def ListJobs(
        self,
        request: apb.ListJobsRequest,
        context: grpc.aio.ServicerContext[apb.ListJobsRequest, apb.ListJobsResponse],
    ) -> apb.ListJobsResponse:
        page = await self._engine.list_jobs(
            convert.filter_from_proto(request.filter),
            request.page_size,
            request.page_token,
            newest_first=convert.newest_first(request.order),
            include_total=request.include_total,
            last_page=request.last_page,
        )
        return apb.ListJobsResponse(
            jobs=[convert.job_to_proto(r) for r in page.jobs],
            next_page_token=page.next_page_token,
            prev_page_token=page.prev_page_token,
            total_count=page.total,
        )

    async def GetStats(
        self,
        request: apb.GetStatsRequest,
        context: grpc.aio.ServicerContext[apb.GetStatsRequest, apb.GetStatsResponse],
    ) -> apb.GetStatsResponse:
        window = (
            convert.duration_ms(request.window, "window") * 1000
            if request.HasField("window")
            else _DEFAULT_WINDOW_US
        )
        category = convert.category_from_proto(request.category)
        if len(request.windows) > _MAX_STATS_WINDOWS:
            raise InvalidArgument(
                f"windows: at most {_MAX_STATS_WINDOWS} windows, not {len(request.windows)}"
            )
        windows = [convert.duration_ms(w, "windows") * 1000 for w in request.windows]
        s = await self._engine.ops.stats(request.tenant_id, window, category)
        counted = await self._engine.ops.window_counts(request.tenant_id, windows, category)
        backlog = await self._engine.scaling.backlog((), request.tenant_id, category)
        totals = s.totals
        age_us = s.oldest_pending_age_us
        return apb.GetStatsResponse(
            counts=[
                apb.StatusCount(
                    tenant_id=r.tenant_id,
                    job_type=r.job_type,
                    status=r.status,  # type: ignore[arg-type]  # protoc .pyi: an enum is its class
                    count=r.count,
                    scheduled=r.scheduled,
                )
                for r in s.counts
            ],
            pending=totals[JobStatus.PENDING],
            held=s.held,
            scheduled=s.scheduled,
            windows=[
                apb.WindowCounts(
                    window=convert.ms_to_duration(w.window_us // 1000),
                    completions=w.completions,
                    failures=w.failures,
                    retries=w.retries,
                )
                for w in counted
            ],
            running=totals[JobStatus.RUNNING],
            completed=totals[JobStatus.COMPLETED],
            faulted=totals[JobStatus.FAULTED],
            cancelled=totals[JobStatus.CANCELLED],
            oldest_pending_age=convert.ms_to_duration(age_us // 1000),
            retries_in_window=s.retries,
            failures_in_window=s.failures,
            completions_in_window=s.completions,
            dead_letter=totals[JobStatus.FAULTED],
            draining=s.draining,
            connected_workers=s.connected_workers,
            backlog=convert.backlog_to_proto(functools.reduce(summed, backlog, ScalingFigures(""))),
            backlog_by_type=[convert.backlog_to_proto(b) for b in backlog],
            read_time=convert.us_to_ts(s.read_time_us),
        )

    async def Pause(
        self,
        request: apb.PauseRequest,
        context: grpc.aio.ServicerContext[apb.PauseRequest, apb.PauseResponse],
    ) -> apb.PauseResponse:
        expires = (
            convert.ts_to_us(request.expire_time, "expire_time")
            if request.HasField("expire_time")
            else None
        )
        record = await self._engine.pause(
            convert.scope_from_proto(request.scope),
            audit_actor(request.actor),
            _reason_with_claim(request.actor, request.reason),
            expires,
        )
        return apb.PauseResponse(pause=convert.pause_to_proto(record))

    async def Unpause(
        self,
        request: apb.UnpauseRequest,
        context: grpc.aio.ServicerContext[apb.UnpauseRequest, apb.UnpauseResponse],
    ) -> apb.UnpauseResponse:
        lifted = await self._engine.unpause(
            convert.scope_from_proto(request.scope), audit_actor(request.actor)
        )
        return apb.UnpauseResponse(lifted=[convert.pause_to_proto(r) for r in lifted])

    async def ListPauses(
        self,
        request: apb.ListPausesRequest,
        context: grpc.aio.ServicerContext[apb.ListPausesRequest, apb.ListPausesResponse],
    ) -> apb.ListPausesResponse:
        records, next_token = await self._engine.list_pauses(
            request.include_lifted, request.tenant_id, request.page_size, request.page_token
        )
        return apb.ListPausesResponse(
            pauses=[convert.pause_to_proto(r) for r in records], next_page_token=next_token
        )

    async def SetTenantWeight(
        self,
        request: apb.SetTenantWeightRequest,
        context: grpc.aio.ServicerContext[apb.SetTenantWeightRequest, apb.SetTenantWeightResponse],
    ) -> apb.SetTenantWeightResponse:
        await self._engine.set_tenant_weight(request.tenant_id, request.weight)
        return apb.SetTenantWeightResponse()

    async def ListTenantWeights(
        self,
        request: apb.ListTenantWeightsRequest,
        context: grpc.aio.ServicerContext[
            apb.ListTenantWeightsRequest, apb.ListTenantWeightsResponse
        ],
    ) -> apb.ListTenantWeightsResponse:
        weights = await self._engine.list_tenant_weights(request.tenant_id)
        return apb.ListTenantWeightsResponse(
            weights=[apb.TenantWeight(tenant_id=t, weight=w) for t, w in sorted(weights.items())],
            default_weight=self._engine.default_tenant_weight,
        )

    async def SetCategoryWeight(
        self,
        request: apb.SetCategoryWeightRequest,
        context: grpc.aio.ServicerContext[
            apb.SetCategoryWeightRequest, apb.SetCategoryWeightResponse
        ],
    ) -> apb.SetCategoryWeightResponse:
        category = convert.category_from_proto(request.category)
        await self._engine.set_category_weight(request.tenant_id, category, request.weight)
        return apb.SetCategoryWeightResponse()

    async def ListCategoryWeights(
        self,
        request: apb.ListCategoryWeightsRequest,
        context: grpc.aio.ServicerContext[
            apb.ListCategoryWeightsRequest, apb.ListCategoryWeightsResponse
        ],
    ) -> apb.ListCategoryWeightsResponse:
        weights = await self._engine.list_category_weights(request.tenant_id)
        return apb.ListCategoryWeightsResponse(
            weights=[
                apb.CategoryWeight(tenant_id=t, category=k, weight=w)  # type: ignore[arg-type]  # protoc .pyi: an enum is its class
                for (t, k), w in sorted(weights.items())
            ]
        )

    async def RemoveCategoryWeight(
        self,
        request: apb.RemoveCategoryWeightRequest,
        context: grpc.aio.ServicerContext[
            apb.RemoveCategoryWeightRequest, apb.RemoveCategoryWeightResponse
        ],
    ) -> apb.RemoveCategoryWeightResponse:
        category = convert.category_from_proto(request.category)
        removed = await self._engine.remove_category_weight(request.tenant_id, category)
        return apb.RemoveCategoryWeightResponse(removed=removed)

    async def SetConcurrencyLimit(
        self,
        request: apb.SetConcurrencyLimitRequest,
        context: grpc.aio.ServicerContext[
            apb.SetConcurrencyLimitRequest, apb.SetConcurrencyLimitResponse
        ],
    ) -> apb.SetConcurrencyLimitResponse:
        await self._engine.set_limit(convert.limit_from_proto(request.limit))
        return apb.SetConcurrencyLimitResponse()

    async def ListConcurrencyLimits(
        self,
        request: apb.ListConcurrencyLimitsRequest,
        context: grpc.aio.ServicerContext[
            apb.ListConcurrencyLimitsRequest, apb.ListConcurrencyLimitsResponse
        ],
    ) -> apb.ListConcurrencyLimitsResponse:
        limits = await self._engine.list_limits()
        return apb.ListConcurrencyLimitsResponse(
            limits=[convert.limit_to_proto(limit, running) for limit, running in limits]
        )

    async def SetRateLimit(
        self,
        request: apb.SetRateLimitRequest,
        context: grpc.aio.ServicerContext[apb.SetRateLimitRequest, apb.SetRateLimitResponse],
    ) -> apb.SetRateLimitResponse:
        await self._engine.set_rate_limit(convert.rate_limit_from_proto(request.limit))
        return apb.SetRateLimitResponse()

    async def ListRateLimits(
        self,
        request: apb.ListRateLimitsRequest,
        context: grpc.aio.ServicerContext[apb.ListRateLimitsRequest, apb.ListRateLimitsResponse],
    ) -> apb.ListRateLimitsResponse:
        limits = await self._engine.list_rate_limits()
        return apb.ListRateLimitsResponse(
            limits=[convert.rate_limit_to_proto(*entry) for entry in limits]
        )

    async def RemoveRateLimit(
        self,
        request: apb.RemoveRateLimitRequest,
        context: grpc.aio.ServicerContext[apb.RemoveRateLimitRequest, apb.RemoveRateLimitResponse],
    ) -> apb.RemoveRateLimitResponse:
        kind = convert.limit_kind_from_proto(request.kind, "kind")
        removed = await self._engine.remove_rate_limit(kind, request.value)
        return apb.RemoveRateLimitResponse(removed=removed)

    async def ExplainJob(
        self,
        request: apb.ExplainJobRequest,
        context: grpc.aio.ServicerContext[apb.ExplainJobRequest, apb.ExplainJobResponse],
    ) -> apb.ExplainJobResponse:
        row, reasons = await explain(self._engine, request.job_id, tenant_scope())
        failure = await last_failure(self._engine, row)
        key = await unique_key(self._engine, row)
        return apb.ExplainJobResponse(
            job=convert.job_to_proto(row),
            reasons=[convert.wait_reason_to_proto(r) for r in reasons],
            last_failure=convert.attempt_to_proto(failure) if failure is not None else None,
            unique_key=convert.unique_key_to_proto(key) if key is not None else None,
        )

    # -- operator actions (engine/operations.py) ------------------------------------

    async def RetryJob(
        self,
        request: apb.RetryJobRequest,
        context: grpc.aio.ServicerContext[apb.RetryJobRequest, apb.RetryJobResponse],
    ) -> apb.RetryJobResponse:
        row = await self._engine.ops.retry_job(request.job_id, request.keep_attempts)
        return apb.RetryJobResponse(job=convert.job_to_proto(row))

    async def CancelJob(
        self,
        request: apb.CancelJobRequest,
        context: grpc.aio.ServicerContext[apb.CancelJobRequest, apb.CancelJobResponse],
    ) -> apb.CancelJobResponse:
        row = await self._engine.ops.cancel_job(request.job_id, request.reason)
        return apb.CancelJobResponse(job=convert.job_to_proto(row))

    async def RunJobNow(
        self,
        request: apb.RunJobNowRequest,
        context: grpc.aio.ServicerContext[apb.RunJobNowRequest, apb.RunJobNowResponse],
    ) -> apb.RunJobNowResponse:
        row = await self._engine.ops.run_job_now(request.job_id)
        return apb.RunJobNowResponse(job=convert.job_to_proto(row))

    async def PurgeJobs(
        self,
        request: apb.PurgeJobsRequest,
        context: grpc.aio.ServicerContext[apb.PurgeJobsRequest, apb.PurgeJobsResponse],
    ) -> apb.PurgeJobsResponse:
        result = await self._engine.ops.purge(
            convert.filter_from_proto(request.filter), request.dry_run
        )
        return apb.PurgeJobsResponse(
            matched=result.matched, deleted=result.deleted, kept=result.kept
        )

    async def ListGroups(
        self,
        request: apb.ListGroupsRequest,
        context: grpc.aio.ServicerContext[apb.ListGroupsRequest, apb.ListGroupsResponse],
    ) -> apb.ListGroupsResponse:
        rows, next_token = await self._engine.groups.list(
            request.tenant_id, list(request.statuses), request.page_size, request.page_token
        )
        return apb.ListGroupsResponse(
            groups=[convert.group_to_proto(g) for g in rows], next_page_token=next_token
        )

    async def GetGroup(
        self,
        request: apb.AdminServiceGetGroupRequest,
        context: grpc.aio.ServicerContext[
            apb.AdminServiceGetGroupRequest, apb.AdminServiceGetGroupResponse
        ],
    ) -> apb.AdminServiceGetGroupResponse:
        group = await self._engine.groups.get(request.group_id)
        return apb.AdminServiceGetGroupResponse(group=convert.group_to_proto(group))

    async def CancelGroup(
        self,
        request: apb.CancelGroupRequest,
        context: grpc.aio.ServicerContext[apb.CancelGroupRequest, apb.CancelGroupResponse],
    ) -> apb.CancelGroupResponse:
        group, cancelled = await self._engine.groups.cancel(request.group_id, request.reason)
        return apb.CancelGroupResponse(
            group=convert.group_to_proto(group), cancelled_job_ids=cancelled
        )

    async def UnlockJob(
        self,
        request: apb.UnlockJobRequest,
        context: grpc.aio.ServicerContext[apb.UnlockJobRequest, apb.UnlockJobResponse],
    ) -> apb.UnlockJobResponse:
        row = await self._engine.ops.unlock_job(request.job_id)
        return apb.UnlockJobResponse(job=convert.job_to_proto(row))

    async def ReplayJob(
        self,
        request: apb.ReplayJobRequest,
        context: grpc.aio.ServicerContext[apb.ReplayJobRequest, apb.ReplayJobResponse],
    ) -> apb.ReplayJobResponse:
        row = await self._engine.ops.replay_job(request.job_id)
        return apb.ReplayJobResponse(job=convert.job_to_proto(row))

    async def BulkRetryJobs(
        self,
        request: apb.BulkRetryJobsRequest,
        context: grpc.aio.ServicerContext[apb.BulkRetryJobsRequest, apb.BulkRetryJobsResponse],
    ) -> apb.BulkRetryJobsResponse:
        result = await self._engine.ops.bulk_retry(
            convert.filter_from_proto(request.filter), request.dry_run, request.keep_attempts
        )
        return apb.BulkRetryJobsResponse(matched=result.matched, changed=result.changed)

    async def BulkCancelJobs(
        self,
        request: apb.BulkCancelJobsRequest,
        context: grpc.aio.ServicerContext[apb.BulkCancelJobsRequest, apb.BulkCancelJobsResponse],
    ) -> apb.BulkCancelJobsResponse:
        result = await self._engine.ops.bulk_cancel(
            convert.filter_from_proto(request.filter), request.dry_run, request.reason
        )
        return apb.BulkCancelJobsResponse(matched=result.matched, changed=result.changed)

    async def Drain(
        self,
        request: apb.DrainRequest,
        context: grpc.aio.ServicerContext[apb.DrainRequest, apb.DrainResponse],
    ) -> apb.DrainResponse:
        await self._engine.ops.drain(request.cluster, request.worker_id)
        return apb.DrainResponse()

    async def Undrain(
        self,
        request: apb.UndrainRequest,
        context: grpc.aio.ServicerContext[apb.UndrainRequest, apb.UndrainResponse],
    ) -> apb.UndrainResponse:
        await self._engine.ops.undrain(request.cluster, request.worker_id)
        return apb.UndrainResponse()

    async def ListWorkers(
        self,
        request: apb.ListWorkersRequest,
        context: grpc.aio.ServicerContext[apb.ListWorkersRequest, apb.ListWorkersResponse],
    ) -> apb.ListWorkersResponse:
        workers = await self._engine.ops.list_workers()
        return apb.ListWorkersResponse(workers=[convert.worker_to_proto(w) for w in workers])

    async def SetJobTypeDefaults(
        self,
        request: apb.SetJobTypeDefaultsRequest,
        context: grpc.aio.ServicerContext[
            apb.SetJobTypeDefaultsRequest, apb.SetJobTypeDefaultsResponse
        ],
    ) -> apb.SetJobTypeDefaultsResponse:
        job_type, defaults = convert.type_defaults_from_proto(request.defaults)
        await self._engine.set_job_type_defaults(job_type, defaults)
        return apb.SetJobTypeDefaultsResponse()

    async def ListJobTypeDefaults(
        self,
        request: apb.ListJobTypeDefaultsRequest,
        context: grpc.aio.ServicerContext[
            apb.ListJobTypeDefaultsRequest, apb.ListJobTypeDefaultsResponse
        ],
    ) -> apb.ListJobTypeDefaultsResponse:
        return apb.ListJobTypeDefaultsResponse(
            defaults=[
                convert.type_defaults_to_proto(job_type, d)
                for job_type, d in sorted(self._engine.type_defaults.items())
            ]
        )

    async def WhoAmI(
        self,
        request: apb.WhoAmIRequest,
        context: grpc.aio.ServicerContext[apb.WhoAmIRequest, apb.WhoAmIResponse],
    ) -> apb.WhoAmIResponse:
        principal = current_principal()
        if principal is None:
            return apb.WhoAmIResponse(
                authenticated=False, roles=ROLES, tenants=tenancy.names_of_scope(None)
            )
        return apb.WhoAmIResponse(
            authenticated=True,
            name=principal.name,
            roles=sorted(principal.roles),
            tenants=tenancy.names_of_scope(principal.tenants),
            job_types=sorted(principal.job_types or ()),
        )
