"""JobSchedulerService: enqueue work and read it back."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from coordinator.api import convert
from coordinator.engine import Engine
from coordinator.engine.events import check_cursor
from coordinator.engine.ticks import check_tick
from coordinator.errors import InvalidArgument
from coordinator.model import NewJob, ScheduleTick, Uniqueness, UniqueOutcome
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc


class JobSchedulerServicer(spb_grpc.JobSchedulerServiceServicer):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def Enqueue(
        self,
        request: spb.EnqueueRequest,
        context: grpc.aio.ServicerContext[spb.EnqueueRequest, spb.EnqueueResponse],
    ) -> spb.EnqueueResponse:
        job = convert.new_job_from_spec(request.job)
        tick = convert.schedule_tick_from_spec(request.job)
        if tick is not None:
            return await self._enqueue_tick(request, job, tick)
        rule = convert.uniqueness_from_spec(request.job)
        if rule is not None:
            if job.group_id is not None:
                raise InvalidArgument("a group member cannot have uniqueness")
            if request.HasField("inline"):
                raise InvalidArgument(
                    "an inline job runs now; it cannot have uniqueness (enqueue it without inline)"
                )
            [(job_id, outcome, _)] = await self._engine.enqueue_unique([job], [rule])
            row, _ = await self._engine.get_job(job_id)
            return spb.EnqueueResponse(
                job=convert.job_to_proto(row),
                deduplicated=outcome != UniqueOutcome.CREATED,
                debounced=outcome == UniqueOutcome.DEBOUNCED,
            )
        if job.group_id is not None:
            if request.HasField("inline"):
                raise InvalidArgument("a group member cannot run inline")
            [(job_id, dedup, _)] = await self._engine.groups.enqueue([job])
            row, _ = await self._engine.get_job(job_id)
            return spb.EnqueueResponse(job=convert.job_to_proto(row), deduplicated=dedup)
        if request.HasField("inline"):
            row, dedup, token = await self._engine.enqueue_inline(
                job, request.inline.worker_id, enqueue_if_paused=request.inline.enqueue_if_paused
            )
            return spb.EnqueueResponse(
                job=convert.job_to_proto(row),
                deduplicated=dedup,
                lease_token=token or "",
                lease_expire_time=convert.us_to_ts(row.lease_expires_at) if token else None,
            )
        row, dedup = await self._engine.enqueue_one(job)
        return spb.EnqueueResponse(job=convert.job_to_proto(row), deduplicated=dedup)

    async def _enqueue_tick(
        self, request: spb.EnqueueRequest, job: NewJob, tick: ScheduleTick
    ) -> spb.EnqueueResponse:
        if request.HasField("inline") or request.job.HasField("uniqueness") or job.group_id:
            raise InvalidArgument(
                "a schedule tick cannot run inline, have uniqueness or join a group: its "
                "schedule and nominal time already make it one job"
            )
        row, existed = await self._engine.enqueue_tick(job, tick)
        if row is None:
            return spb.EnqueueResponse(skipped=True)
        return spb.EnqueueResponse(job=convert.job_to_proto(row), deduplicated=existed)

    async def EnqueueBatch(
        self,
        request: spb.EnqueueBatchRequest,
        context: grpc.aio.ServicerContext[spb.EnqueueBatchRequest, spb.EnqueueBatchResponse],
    ) -> spb.EnqueueBatchResponse:
        jobs = [_batch_job(index, s) for index, s in enumerate(request.jobs)]
        limit = self._engine.config.max_string_length
        rules = [
            _batch_rule(index, s, job, limit)
            for index, (s, job) in enumerate(zip(request.jobs, jobs, strict=True))
        ]
        if any(rules):
            if any(j.group_id is not None for j in jobs):
                raise InvalidArgument("a group member cannot have uniqueness")
            return _unique_results(await self._engine.enqueue_unique(jobs, rules))
        if any(j.group_id is not None for j in jobs):
            results = await self._engine.groups.enqueue(jobs)
        else:
            results = await self._engine.enqueue(jobs)
        # Filled field by field: several times cheaper than keyword construction.
        response = spb.EnqueueBatchResponse()
        add = response.results.add
        for job_id, deduplicated, status in results:
            result = add()
            result.job_id = job_id
            result.status = status  # type: ignore[assignment]  # protoc .pyi: an enum is its class
            if deduplicated:
                result.deduplicated = True
        return response

    async def GetJob(
        self,
        request: spb.GetJobRequest,
        context: grpc.aio.ServicerContext[spb.GetJobRequest, spb.GetJobResponse],
    ) -> spb.GetJobResponse:
        row, attempts = await self._engine.get_job(request.job_id, request.include_attempts)
        return spb.GetJobResponse(job=convert.job_to_proto(row, attempts))

    async def CreateGroup(
        self,
        request: spb.CreateGroupRequest,
        context: grpc.aio.ServicerContext[spb.CreateGroupRequest, spb.CreateGroupResponse],
    ) -> spb.CreateGroupResponse:
        if not request.HasField("completion"):
            raise InvalidArgument("completion is required: the job enqueued once the group ends")
        c = request.completion
        if c.HasField("uniqueness") or c.HasField("schedule_tick") or c.group_id:
            raise InvalidArgument(
                "completion: a completion job has no uniqueness, schedule tick or group_id "
                "(its group enqueues it exactly once)"
            )
        completion = convert.new_job_from_spec(c)
        if completion.tenant_id and completion.tenant_id != request.tenant_id:
            raise InvalidArgument(
                f"completion.tenant_id {completion.tenant_id!r} is not the group's tenant "
                f"{request.tenant_id!r}"
            )
        completion.tenant_id = request.tenant_id
        members = [_member(i, s) for i, s in enumerate(request.members)]
        group, results, deduplicated = await self._engine.groups.create(
            completion, members, request.close, request.idempotency_key or None
        )
        response = spb.CreateGroupResponse(
            group=convert.group_to_proto(group), deduplicated=deduplicated
        )
        for job_id, dedup, status in results:
            response.members.add(job_id=job_id, deduplicated=dedup, status=status)
        return response

    async def CloseGroup(
        self,
        request: spb.CloseGroupRequest,
        context: grpc.aio.ServicerContext[spb.CloseGroupRequest, spb.CloseGroupResponse],
    ) -> spb.CloseGroupResponse:
        group = await self._engine.groups.close(request.group_id)
        return spb.CloseGroupResponse(group=convert.group_to_proto(group))

    async def GetGroup(
        self,
        request: spb.GetGroupRequest,
        context: grpc.aio.ServicerContext[spb.GetGroupRequest, spb.GetGroupResponse],
    ) -> spb.GetGroupResponse:
        group = await self._engine.groups.get(request.group_id)
        return spb.GetGroupResponse(group=convert.group_to_proto(group))

    async def WatchJobEvents(
        self,
        request: spb.WatchJobEventsRequest,
        context: grpc.aio.ServicerContext[spb.WatchJobEventsRequest, spb.WatchJobEventsResponse],
    ) -> AsyncIterator[spb.WatchJobEventsResponse]:
        flt = convert.event_filter_from_proto(request.filter)
        after = check_cursor(request.after)
        watch = self._engine.events.watch(flt, after, from_oldest=request.from_oldest)
        async for events, position in watch:
            response = spb.WatchJobEventsResponse(cursor=str(position) if position else "")
            for event in events:
                convert.add_event(response.events, event)
            yield response

    async def WaitForJob(
        self,
        request: spb.WaitForJobRequest,
        context: grpc.aio.ServicerContext[spb.WaitForJobRequest, spb.WaitForJobResponse],
    ) -> spb.WaitForJobResponse:
        row = await self._engine.wait_for_finish(request.job_id)
        return spb.WaitForJobResponse(job=convert.job_to_proto(row))


def _batch_job(index: int, spec: jpb.JobSpec) -> NewJob:
    """One job of a batch; a malformed one is named by its position."""
    try:
        return convert.new_job_from_spec(spec)
    except InvalidArgument as e:
        raise InvalidArgument(f"jobs[{index}]: {e}") from None


def _batch_rule(index: int, spec: jpb.JobSpec, job: NewJob, limit: int) -> Uniqueness | None:
    """The uniqueness rule of one job of a batch; a malformed one is named by its position."""
    if spec.HasField("schedule_tick"):
        try:  # a malformed tick is named as such first
            tick = convert.schedule_tick_from_spec(spec)
            assert tick is not None
            check_tick(tick, job, limit)
        except InvalidArgument as e:
            raise InvalidArgument(f"jobs[{index}]: {e}") from None
        raise InvalidArgument(
            f"jobs[{index}]: a schedule tick goes through Enqueue, one tick at a time"
        )
    try:
        return convert.uniqueness_from_spec(spec)
    except InvalidArgument as e:
        raise InvalidArgument(f"jobs[{index}]: {e}") from None


def _unique_results(
    results: list[tuple[str, UniqueOutcome, int]],
) -> spb.EnqueueBatchResponse:
    response = spb.EnqueueBatchResponse()
    for job_id, outcome, status in results:
        response.results.add(
            job_id=job_id,
            status=status,
            deduplicated=outcome != UniqueOutcome.CREATED,
            debounced=outcome == UniqueOutcome.DEBOUNCED,
        )
    return response


def _member(index: int, spec: jpb.JobSpec) -> NewJob:
    """One first member of a group; a malformed one is named by its position."""
    if spec.HasField("uniqueness") or spec.HasField("schedule_tick") or spec.group_id:
        raise InvalidArgument(
            f"members[{index}]: a member cannot have uniqueness, a schedule tick or a group_id "
            "(it joins the group being created)"
        )
    try:
        return convert.new_job_from_spec(spec)
    except InvalidArgument as e:
        raise InvalidArgument(f"members[{index}]: {e}") from None
