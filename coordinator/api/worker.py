"""WorkerService: the AcquireJobs stream, heartbeats and outcomes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator, Sequence

import grpc

from coordinator import tenancy
from coordinator.api import convert
from coordinator.api.auth import Principal, TokenBook, current_principal, tenant_scope
from coordinator.engine import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DrainSignal,
    Engine,
    LeaseAnswer,
    LeaseBatch,
    OutcomeResult,
    OutcomesAnswered,
    WorkerSession,
)
from coordinator.engine.sessions import OutboxItem
from coordinator.engine.validation import check_job_type_name, check_length
from coordinator.errors import (
    InvalidArgument,
    LeaseLost,
    PermissionDenied,
    ResourceExhausted,
    StoreUnavailable,
    Unauthenticated,
)
from coordinator.model import Completion, Failure, JobRow, Release
from coordinator.telemetry import stages
from workflowjobs.contract import MAX_MESSAGE_BYTES
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

Outcome = Completion | Failure | Release

log = logging.getLogger(__name__)

_LEASE_STATES = {
    "extended": wpb.LEASE_STATE_EXTENDED,
    "lost": wpb.LEASE_STATE_LOST,
    "cancel_requested": wpb.LEASE_STATE_CANCEL_REQUESTED,
}


class WorkerServicer(wpb_grpc.WorkerServiceServicer):
    def __init__(
        self,
        engine: Engine,
        heartbeat_interval_ms: int = 10_000,
        max_credits_per_stream: int = 10_000,
        book: TokenBook | None = None,
        max_send_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self._engine = engine
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._max_credits = max_credits_per_stream
        # The server's max_send_message_length: no JobBatch is built larger.
        self._max_send_bytes = max_send_message_bytes
        # Open streams and the credential each was opened with, re-checked
        # whenever the token file changes.
        self._streams: dict[WorkerSession, Principal] = {}
        self._book = book
        self._rechecks: set[asyncio.Task[None]] = set()
        if book is not None:
            book.subscribe(self._credentials_changed)

    def _credentials_changed(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # reloaded outside the server's loop: no stream to re-check
        task = loop.create_task(self.recheck_streams())
        self._rechecks.add(task)
        task.add_done_callback(self._rechecks.discard)

    async def recheck_streams(self) -> None:
        """End the streams whose credential was removed or changed.

        Removed (or no longer holding the worker role): the stream ends with
        UNAUTHENTICATED (PERMISSION_DENIED) and every job it held is handed
        back. Changed scope: the stream ends cleanly so the worker reconnects
        under the new scope; the jobs it held outside that scope are handed back.
        """
        if self._book is None:
            return
        ended: list[tuple[WorkerSession, Principal | None, str]] = []
        for session, principal in list(self._streams.items()):
            now = self._book.principal(principal.key)
            if session.closed or now == principal:
                continue
            if now is None:
                session.close(
                    Unauthenticated(
                        f"the credential {principal.name!r} was revoked: this stream is "
                        "closed and the jobs it held were handed back"
                    )
                )
            elif "worker" not in now.roles:
                session.close(
                    PermissionDenied(
                        f"credential {principal.name!r} no longer has the worker role: this "
                        "stream is closed and the jobs it held were handed back"
                    )
                )
            else:
                session.close()
            reason = "worker credential changed" if now is not None else "worker credential revoked"
            ended.append((session, now, reason))
        for session, now, reason in ended:
            keep: set[str] = set()
            if now is not None and "worker" in now.roles and session.in_flight:
                held = set(session.in_flight)
                keep = held - await tenancy.foreign_jobs(self._engine, now.tenants, held)
            handed_back = await self._engine.end_session(session, session.ended_by, reason, keep)
            log.warning(
                "worker %r: %s; stream ended, %d job(s) handed back",
                session.worker_id,
                reason,
                handed_back,
            )

    async def AcquireJobs(
        self,
        request_iterator: AsyncIterator[wpb.AcquireJobsRequest],
        context: grpc.aio.ServicerContext[wpb.AcquireJobsRequest, wpb.AcquireJobsResponse],
    ) -> AsyncIterator[wpb.AcquireJobsResponse]:
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("kind") != "hello":
            raise InvalidArgument("the first AcquireJobs message must be a WorkerHello")
        hello = first.hello
        if not hello.worker_id:
            raise InvalidArgument("hello.worker_id is required")
        if hello.max_batch_size < 0:
            raise InvalidArgument("hello.max_batch_size must be >= 0")
        if hello.max_receive_message_bytes < 0:
            raise InvalidArgument(
                "hello.max_receive_message_bytes must be >= 0 (0 = gRPC's default of 4 MiB)"
            )
        _check_hello_sizes(hello, self._engine.config.max_string_length)
        principal = current_principal()
        if principal is not None and principal.job_types is not None:
            refused = sorted(set(hello.job_types) - principal.job_types)
            if refused:
                raise PermissionDenied(
                    f"credential {principal.name!r} may not acquire job type(s) "
                    f"{', '.join(refused)}; it may acquire: {', '.join(sorted(principal.job_types))}"
                )
        session = WorkerSession(
            worker_id=hello.worker_id,
            job_types=frozenset(hello.job_types),
            slots=hello.slots,
            hostname=hello.hostname,
            pid=hello.pid,
            sdk_version=hello.sdk_version,
            max_batch_size=hello.max_batch_size or 100,
            max_message_bytes=min(
                hello.max_receive_message_bytes or DEFAULT_MAX_MESSAGE_BYTES, self._max_send_bytes
            ),
            tenants=tenant_scope(),
            principal=principal.key if principal is not None else None,
            credential=principal.name if principal is not None else "",
        )
        self._engine.open_session(session)
        if principal is not None:
            self._streams[session] = principal
        # Outcomes received on this stream and not yet answered.
        reports: set[asyncio.Task[None]] = set()
        reader = asyncio.get_running_loop().create_task(
            self._read_requests(request_iterator, session, reports)
        )
        try:
            yield wpb.AcquireJobsResponse(
                accepted=wpb.WorkerAccepted(
                    coordinator_id=self._engine.coordinator_id,
                    heartbeat_interval_ms=self._heartbeat_interval_ms,
                    outcomes_on_stream=True,
                )
            )
            # An item taken from the outbox while coalescing, sent next.
            held: list[OutboxItem] = []
            while True:
                item = held.pop() if held else await session.outbox.get()
                if session.ended_by is not None:
                    # Ended by the coordinator (revoked credential): send nothing more.
                    raise session.ended_by
                if item is None:
                    # The session ended (the worker closed its side, or the
                    # coordinator ended it cleanly): the outcomes received
                    # before are still answered.
                    if reports:
                        await asyncio.gather(*reports, return_exceptions=True)
                    while not session.outbox.empty():
                        late = session.outbox.get_nowait()
                        if isinstance(late, OutcomesAnswered):
                            yield convert.answers_message(late.batch_id, late.results)
                    break
                if isinstance(item, OutcomesAnswered):
                    yield convert.answers_message(item.batch_id, item.results)
                    continue
                if isinstance(item, DrainSignal):
                    yield wpb.AcquireJobsResponse(drain=wpb.DrainRequested(reason=item.reason))
                    continue
                # Each message fits what the worker accepts. ``writing`` holds the
                # jobs of the messages not yet handed to gRPC, which are handed
                # back at once if the stream ends. A message handed to gRPC may
                # reach the worker however the call ends (its completion can come
                # after the worker received it and cancelled): its jobs stay leased.
                # Lease batches queued behind this one go in the same message
                # (up to the worker's batch size): one write for what one loop
                # turn leased to this stream, not one per enqueue.
                leased = [(row, item.lease_token) for row in item.jobs]
                while not session.outbox.empty():
                    following = session.outbox.get_nowait()
                    if (
                        not isinstance(following, LeaseBatch)
                        or len(leased) + len(following.jobs) > session.max_batch_size
                    ):
                        held.append(following)
                        break
                    leased += [(row, following.lease_token) for row in following.jobs]
                session.writing[:] = [(row.id, token) for row, token in leased]
                if held and isinstance(held[0], LeaseBatch):
                    # Out of the outbox but not yet written: handed back with
                    # the rest if the stream ends first.
                    session.writing += [(row.id, held[0].lease_token) for row in held[0].jobs]
                for message, count in _batch_messages(leased, session.max_message_bytes):
                    if session.closed:
                        break  # the stream ended: the rest go back with the session
                    if stages.ENABLED:
                        stages.mark("stream_write", (j.job.id for j in message.jobs.jobs))
                    del session.writing[:count]
                    yield message
        finally:
            reader.cancel()
            self._streams.pop(session, None)
            self._engine.close_session(session)
        if reader.done() and not reader.cancelled():
            error = reader.exception()
            if error is not None:
                raise error

    async def _read_requests(
        self,
        request_iterator: AsyncIterator[wpb.AcquireJobsRequest],
        session: WorkerSession,
        reports: set[asyncio.Task[None]],
    ) -> None:
        try:
            async for message in request_iterator:
                kind = message.WhichOneof("kind")
                if kind == "outcomes":
                    batch = message.outcomes
                    self._grant(session, batch.credits)
                    task = asyncio.get_running_loop().create_task(self._answer(session, batch))
                    reports.add(task)
                    task.add_done_callback(reports.discard)
                elif kind == "credit":
                    self._grant(session, message.credit.credits)
                elif kind == "hello":
                    raise InvalidArgument("WorkerHello may only be sent once per stream")
        finally:
            # The worker closed its side (drain) or the stream broke: no more
            # leases for it (answers still go out, see AcquireJobs).
            self._engine.close_session(session)

    def _grant(self, session: WorkerSession, credits: int) -> None:
        if credits < 0:
            raise InvalidArgument(f"credits must be >= 0, got {credits}")
        if session.credits + credits > self._max_credits:
            raise ResourceExhausted(
                f"granting {credits} more credit would leave "
                f"{session.credits + credits} outstanding on this "
                f"stream; the limit is {self._max_credits} (grant free slots only)"
            )
        if credits:
            self._engine.grant(session, credits)

    async def _answer(self, session: WorkerSession, batch: wpb.OutcomeBatch) -> None:
        """Record one batch of outcomes sent on the stream and queue the answers."""
        limit = self._engine.config.max_batch_size
        if len(batch.outcomes) > limit:
            error = InvalidArgument(
                f"{len(batch.outcomes)} outcomes exceed the batch limit of {limit}; "
                f"send at most {limit} per OutcomeBatch"
            )
            results = [OutcomeResult(o.job_id, False, error=error) for o in batch.outcomes]
        else:
            outcomes = await self._outside_scope(
                session,
                convert.outcomes_from_proto(batch.outcomes, self._engine.config.max_string_length),
            )
            results = await self._engine.report_each(outcomes)
        session.outbox.put_nowait(OutcomesAnswered(batch.batch_id, results))

    async def _outside_scope(
        self, session: WorkerSession, outcomes: list[Outcome | OutcomeResult]
    ) -> list[Outcome | OutcomeResult]:
        """Outcomes of jobs outside the stream's tenant scope answer like a lost lease.

        A job delivered on this stream is in scope; only the others are looked up.
        """
        unknown = [
            o.job_id
            for o in outcomes
            if not isinstance(o, OutcomeResult) and o.job_id not in session.in_flight
        ]
        try:
            foreign = await tenancy.foreign_jobs(self._engine, session.tenants, unknown)
        except StoreUnavailable as e:
            return [
                OutcomeResult(o.job_id, False, error=e) if o.job_id in unknown else o
                for o in outcomes
            ]
        return _lost_if_foreign(outcomes, foreign)

    async def Heartbeat(
        self,
        request: wpb.HeartbeatRequest,
        context: grpc.aio.ServicerContext[wpb.HeartbeatRequest, wpb.HeartbeatResponse],
    ) -> wpb.HeartbeatResponse:
        limit = self._engine.config.max_string_length
        check_length(request.worker_id, "worker_id", limit)
        refs = [(lease.job_id, lease.lease_token) for lease in request.leases]
        for i, (_, token) in enumerate(refs):
            check_length(token, f"leases[{i}].lease_token", limit)
        foreign: set[str] = set()
        if len(refs) <= self._engine.config.max_batch_size:  # else the engine refuses the call
            foreign = await tenancy.foreign_jobs(
                self._engine, tenant_scope(), [job_id for job_id, _ in refs]
            )
        own = [ref for ref in refs if ref[0] not in foreign]
        principal = current_principal()
        answers = await self._engine.heartbeat(
            request.worker_id, own, principal.key if principal is not None else None
        )
        if foreign:
            # Another tenant's job answers exactly like a lease that is gone.
            by_id = iter(answers)
            answers = [
                LeaseAnswer(job_id, "lost") if job_id in foreign else next(by_id)
                for job_id, _ in refs
            ]
        return wpb.HeartbeatResponse(
            leases=[
                wpb.LeaseStatus(
                    job_id=a.job_id,
                    state=_LEASE_STATES[a.state],
                    lease_expire_time=convert.us_to_ts(a.lease_expires_at),
                )
                for a in answers
            ]
        )

    async def CompleteJob(
        self,
        request: wpb.CompleteJobRequest,
        context: grpc.aio.ServicerContext[wpb.CompleteJobRequest, wpb.CompleteJobResponse],
    ) -> wpb.CompleteJobResponse:
        limit = self._engine.config.max_string_length
        check_length(request.lease_token, "lease_token", limit)
        check_length(request.result.content_type, "result.content_type", limit)
        result = await self._engine.report_one(
            Completion(
                request.job_id,
                request.lease_token,
                request.result.data,
                request.result.content_type,
            )
        )
        return wpb.CompleteJobResponse(already_recorded=result.already_recorded)

    async def FailJob(
        self,
        request: wpb.FailJobRequest,
        context: grpc.aio.ServicerContext[wpb.FailJobRequest, wpb.FailJobResponse],
    ) -> wpb.FailJobResponse:
        result = await self._engine.report_one(
            convert.failure_from_proto(
                request.job_id,
                request.lease_token,
                request,
                self._engine.config.max_string_length,
            )
        )
        row, _ = await self._engine.get_job(request.job_id)
        return wpb.FailJobResponse(
            status=row.status,  # type: ignore[arg-type]  # protoc .pyi: an enum is its class
            next_attempt_time=convert.us_to_ts(row.due_at) if result.status == 1 else None,
            already_recorded=result.already_recorded,
        )

    async def ReportOutcomes(
        self,
        request: wpb.ReportOutcomesRequest,
        context: grpc.aio.ServicerContext[wpb.ReportOutcomesRequest, wpb.ReportOutcomesResponse],
    ) -> wpb.ReportOutcomesResponse:
        limit = self._engine.config.max_batch_size
        if len(request.outcomes) > limit:
            raise InvalidArgument(
                f"{len(request.outcomes)} outcomes exceed the batch limit of {limit}; "
                f"send at most {limit} per ReportOutcomes call"
            )
        # Answered per outcome: a malformed one is refused on its own, like on the stream.
        outcomes = convert.outcomes_from_proto(
            request.outcomes, self._engine.config.max_string_length
        )
        foreign = await tenancy.foreign_jobs(
            self._engine,
            tenant_scope(),
            [o.job_id for o in outcomes if not isinstance(o, OutcomeResult)],
        )
        results = await self._engine.report_each(_lost_if_foreign(outcomes, foreign))
        for r in results:
            if isinstance(r.error, StoreUnavailable):
                raise r.error  # the call fails UNAVAILABLE; the caller sends it again
        response = wpb.ReportOutcomesResponse()
        convert.fill_outcome_results(response.results, results)
        return response


def _lost_if_foreign(
    outcomes: list[Outcome | OutcomeResult], foreign: set[str]
) -> list[Outcome | OutcomeResult]:
    """Another tenant's job answers exactly like a lease that is gone."""
    if not foreign:
        return outcomes
    return [
        OutcomeResult(o.job_id, False, error=LeaseLost(o.job_id))
        if not isinstance(o, OutcomeResult) and o.job_id in foreign
        else o
        for o in outcomes
    ]


def _check_hello_sizes(hello: wpb.WorkerHello, limit: int) -> None:
    for name in ("worker_id", "hostname", "sdk_version"):
        if len(getattr(hello, name)) > limit:
            raise InvalidArgument(f"hello.{name} is longer than {limit} characters")
    if len(hello.job_types) > limit:
        raise InvalidArgument(f"hello.job_types lists more than {limit} job types")
    for job_type in hello.job_types:
        if not job_type or len(job_type) > limit:
            raise InvalidArgument(f"hello.job_types entries must be 1 to {limit} characters")
        check_job_type_name(job_type, "hello.job_types entry")


# Bytes a LeasedJob costs inside JobBatch beyond its own size (field tag and
# length prefix), and of the AcquireJobsResponse around the batch; rounded up.
_PER_JOB_FRAMING = 8
_ENVELOPE = 16


def _batch_messages(
    leased: Sequence[tuple[JobRow, str]], limit: int
) -> Iterator[tuple[wpb.AcquireJobsResponse, int]]:
    """``leased`` jobs (each with its lease token) as AcquireJobsResponse
    messages of at most ``limit`` bytes each, with the number of jobs in each.
    A single job larger than ``limit`` goes alone (it cannot be split; the
    worker's channel decides)."""
    message = wpb.AcquireJobsResponse()
    jobs = message.jobs
    for row, token in leased:
        convert.add_leased_job(jobs, row, token)
    if message.ByteSize() <= limit:
        yield message, len(leased)
        return
    message = wpb.AcquireJobsResponse()
    size = _ENVELOPE
    for row, token in leased:
        convert.add_leased_job(message.jobs, row, token)
        added = message.jobs.jobs[-1].ByteSize() + _PER_JOB_FRAMING
        if len(message.jobs.jobs) > 1 and size + added > limit:
            del message.jobs.jobs[-1]
            yield message, len(message.jobs.jobs)
            message = wpb.AcquireJobsResponse()
            convert.add_leased_job(message.jobs, row, token)
            size = _ENVELOPE
        if size + added > limit:
            log.warning(
                "job %s is %d bytes, more than the %d bytes worker accepts in one message; "
                "sending it alone",
                row.id,
                added,
                limit,
            )
        size += added
    yield message, len(message.jobs.jobs)
