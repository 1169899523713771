"""Worker session identity over real gRPC (SPEC §5.13, §5.18), on both stores.

The worker id a client announces is a label: a stream belongs to the
credential that opened it, a hello colliding with another credential's live
stream is refused, and a revoked credential's streams end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from faults.harness import CoordinatorProcess
from google.protobuf import duration_pb2
from security.conftest import write_tokens

from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

pytestmark = pytest.mark.e2e

CREDENTIALS = {
    "iso-a-secret": (["worker"], ["a"], None),
    "iso-b-secret": (["worker"], ["b"], None),
    "iso-root-secret": (["admin", "scheduler", "worker"], ["*"], None),
    "iso-doomed-secret": (["worker"], ["a"], None),
    "iso-shift-secret": (["worker"], ["a"], None),
}
WAIT_S = 30


def auth(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture(params=["sqlite", "postgres"])
def coordinator(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CoordinatorProcess]:
    tokens = tmp_path / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    drop = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'identity.db'}"
    else:
        request.getfixturevalue("pg_database")
        from conftest import new_pg_database

        url, drop = new_pg_database("wfj_identity")
    process = CoordinatorProcess(url, tmp_path, env={"WFJOBS_TOKENS_FILE": str(tokens)})
    process.tokens_file = tokens  # type: ignore[attr-defined]
    try:
        yield process
    finally:
        process.stop()
        if drop is not None:
            drop()


class RawStream:
    """One AcquireJobs stream on a raw stub: hello, credit, collect pushed jobs."""

    def __init__(self, channel: grpc.aio.Channel, token: str, worker_id: str) -> None:
        self._requests: asyncio.Queue = asyncio.Queue()
        self._requests.put_nowait(
            wpb.AcquireJobsRequest(hello=wpb.WorkerHello(worker_id=worker_id, job_types=["iso"]))
        )
        self.call = wpb_grpc.WorkerServiceStub(channel).AcquireJobs(
            self._outgoing(), metadata=auth(token)
        )
        self.jobs: list[wpb.LeasedJob] = []
        self.accepted = asyncio.Event()
        self.arrived = asyncio.Event()
        self.error: grpc.aio.AioRpcError | None = None
        self.ended = asyncio.Event()
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _outgoing(self):
        while True:
            item = await self._requests.get()
            if item is None:
                return
            yield item

    async def _read(self) -> None:
        try:
            async for response in self.call:
                kind = response.WhichOneof("kind")
                if kind == "accepted":
                    self.accepted.set()
                elif kind == "jobs":
                    self.jobs.extend(response.jobs.jobs)
                    self.arrived.set()
        except grpc.aio.AioRpcError as e:
            self.error = e
        finally:
            self.ended.set()

    def grant(self, credits: int) -> None:
        self._requests.put_nowait(wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=credits)))

    async def wait_for_jobs(self, n: int) -> list[wpb.LeasedJob]:
        async def enough() -> None:
            while len(self.jobs) < n:
                if self.ended.is_set():
                    raise AssertionError(f"stream ended after {len(self.jobs)} of {n} jobs")
                self.arrived.clear()
                await asyncio.wait(
                    [
                        asyncio.ensure_future(self.arrived.wait()),
                        asyncio.ensure_future(self.ended.wait()),
                    ],
                    return_when=asyncio.FIRST_COMPLETED,
                )

        await asyncio.wait_for(enough(), WAIT_S)
        return self.jobs

    async def close(self) -> None:
        self.call.cancel()
        await asyncio.wait_for(self.ended.wait(), WAIT_S)


async def _enqueue(
    channel: grpc.aio.Channel, tenants: list[str], lease_s: int | None = None
) -> list[str]:
    stub = spb_grpc.JobSchedulerServiceStub(channel)
    lease = {"heartbeat_timeout": duration_pb2.Duration(seconds=lease_s)} if lease_s else {}
    response = await stub.EnqueueBatch(
        spb.EnqueueBatchRequest(
            jobs=[
                jpb.JobSpec(
                    job_type="iso", tenant_id=t, payload=jpb.Payload(data=t.encode()), **lease
                )
                for t in tenants
            ]
        ),
        metadata=auth("iso-root-secret"),
        timeout=WAIT_S,
    )
    return [r.job_id for r in response.results]


def test_same_worker_id_under_two_credentials_never_crosses(coordinator) -> None:
    async def scenario() -> None:
        async with grpc.aio.insecure_channel(coordinator.target) as channel:
            a = RawStream(channel, "iso-a-secret", "shared-id")
            await asyncio.wait_for(a.accepted.wait(), WAIT_S)
            a.grant(100)
            # Another credential announcing the same id is refused, and says why ...
            hostile = RawStream(channel, "iso-b-secret", "shared-id")
            await asyncio.wait_for(hostile.ended.wait(), WAIT_S)
            assert hostile.error is not None
            assert hostile.error.code() == grpc.StatusCode.ALREADY_EXISTS
            assert "under a different credential" in hostile.error.details()
            assert hostile.jobs == []
            # ... however often it tries; the first worker keeps its stream.
            for _ in range(3):
                again = RawStream(channel, "iso-b-secret", "shared-id")
                await asyncio.wait_for(again.ended.wait(), WAIT_S)
                assert again.error is not None
                assert again.error.code() == grpc.StatusCode.ALREADY_EXISTS
            b = RawStream(channel, "iso-b-secret", "b-own-id")
            await asyncio.wait_for(b.accepted.wait(), WAIT_S)
            b.grant(100)
            tenants = ["a", "b"] * 30
            ids = await _enqueue(channel, tenants)
            tenant_of = dict(zip(ids, tenants, strict=True))
            got_a = await a.wait_for_jobs(30)
            got_b = await b.wait_for_jobs(30)
            assert not a.ended.is_set(), f"the first worker lost its stream: {a.error}"
            assert {j.job.tenant_id for j in got_a} == {"a"}
            assert {j.job.id for j in got_a} == {i for i, t in tenant_of.items() if t == "a"}
            assert {j.job.tenant_id for j in got_b} == {"b"}
            assert {j.job.payload.data for j in got_a} == {b"a"}
            await a.close()
            await b.close()

    asyncio.run(scenario())


def test_the_same_credential_reconnecting_replaces_its_own_stream(coordinator) -> None:
    async def scenario() -> None:
        async with grpc.aio.insecure_channel(coordinator.target) as channel:
            first = RawStream(channel, "iso-a-secret", "restarting")
            await asyncio.wait_for(first.accepted.wait(), WAIT_S)
            second = RawStream(channel, "iso-a-secret", "restarting")
            await asyncio.wait_for(second.accepted.wait(), WAIT_S)
            # The older stream is closed by the coordinator, without an error.
            await asyncio.wait_for(first.ended.wait(), WAIT_S)
            assert first.error is None
            second.grant(5)
            [job_id] = await _enqueue(channel, ["a"])
            [leased] = await second.wait_for_jobs(1)
            assert leased.job.id == job_id and first.jobs == []
            await second.close()

    asyncio.run(scenario())


async def _get(channel: grpc.aio.Channel, job_id: str) -> jpb.Job:
    stub = spb_grpc.JobSchedulerServiceStub(channel)
    response = await stub.GetJob(
        spb.GetJobRequest(job_id=job_id), metadata=auth("iso-root-secret"), timeout=WAIT_S
    )
    return response.job


def test_revoked_token_ends_its_stream_and_hands_back_its_jobs(coordinator) -> None:
    async def scenario() -> None:
        async with grpc.aio.insecure_channel(coordinator.target) as channel:
            doomed = RawStream(channel, "iso-doomed-secret", "doomed")
            await asyncio.wait_for(doomed.accepted.wait(), WAIT_S)
            doomed.grant(50)
            # Leases of an hour: only a hand-back can make these jobs pending again.
            held = await _enqueue(channel, ["a", "a"], lease_s=3600)
            await doomed.wait_for_jobs(2)
            before = {j: (await _get(channel, j)).max_attempts for j in held}
            remaining = dict(CREDENTIALS)
            del remaining["iso-doomed-secret"]
            write_tokens(coordinator.tokens_file, remaining)
            # No call needs to arrive: the coordinator notices and ends the stream.
            await asyncio.wait_for(doomed.ended.wait(), WAIT_S)
            assert doomed.error is not None
            assert doomed.error.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "was revoked" in doomed.error.details()
            assert {j.job.id for j in doomed.jobs} == set(held)
            # The jobs it held are pending again at once, the attempt released
            # (not counted against the unchanged budget).
            for job_id in held:
                for _ in range(200):
                    job = await _get(channel, job_id)
                    if job.status == jpb.JOB_STATUS_PENDING:
                        break
                    await asyncio.sleep(0.05)
                assert job.status == jpb.JOB_STATUS_PENDING
                assert job.last_error == "worker credential revoked"
                assert job.max_attempts == before[job_id] and job.released_attempts == 1
            # Another worker of the tenant takes them; the revoked token opens nothing.
            heir = RawStream(channel, "iso-a-secret", "heir")
            await asyncio.wait_for(heir.accepted.wait(), WAIT_S)
            heir.grant(50)
            assert {j.job.id for j in await heir.wait_for_jobs(2)} == set(held)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await wpb_grpc.WorkerServiceStub(channel).Heartbeat(
                    wpb.HeartbeatRequest(worker_id="doomed"),
                    metadata=auth("iso-doomed-secret"),
                    timeout=WAIT_S,
                )
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            await heir.close()

    asyncio.run(scenario())


def test_two_sdk_workers_with_one_id_and_different_tenants_never_cross(coordinator) -> None:
    """The scenario as users hit it: two SDK workers, tenant-scoped tokens, one worker id."""
    from worker_sdk import Worker

    async def scenario() -> None:
        seen: dict[str, list[str]] = {"a": [], "b": []}
        progress = asyncio.Event()

        def make(token: str, tenant: str) -> Worker:
            worker = Worker(
                coordinator.target,
                worker_id="twin",
                token=token,
                concurrency=4,
                shutdown_grace=5,
                reconnect_initial_backoff=0.05,
                reconnect_max_backoff=0.5,
            )

            @worker.handler("iso")
            async def run(payload: bytes) -> None:
                seen[tenant].append(payload.decode())
                progress.set()

            return worker

        workers = {"a": make("iso-a-secret", "a"), "b": make("iso-b-secret", "b")}
        tasks = {t: asyncio.create_task(w.arun()) for t, w in workers.items()}
        async with grpc.aio.insecure_channel(coordinator.target) as channel:
            await _enqueue(channel, ["a", "b"] * 20)

            async def until(done) -> None:
                while not done():
                    progress.clear()
                    await progress.wait()

            # One of them holds the id and runs its tenant's jobs; the other is refused.
            await asyncio.wait_for(until(lambda: 20 in (len(seen["a"]), len(seen["b"]))), WAIT_S)
            holder = "a" if len(seen["a"]) == 20 else "b"
            other = "b" if holder == "a" else "a"
            assert seen[other] == []
            await workers[holder].shutdown()
            await asyncio.wait_for(tasks[holder], WAIT_S)
            # Once the id is free the other connects and runs its own tenant's jobs.
            await asyncio.wait_for(until(lambda: len(seen[other]) == 20), WAIT_S)
            await workers[other].shutdown()
            await asyncio.wait_for(tasks[other], WAIT_S)
        assert seen == {"a": ["a"] * 20, "b": ["b"] * 20}

    asyncio.run(scenario())


def test_a_changed_scope_closes_the_stream_and_hands_back_what_it_no_longer_covers(
    coordinator,
) -> None:
    async def scenario() -> None:
        async with grpc.aio.insecure_channel(coordinator.target) as channel:
            stream = RawStream(channel, "iso-shift-secret", "shifting")
            await asyncio.wait_for(stream.accepted.wait(), WAIT_S)
            stream.grant(50)
            held = await _enqueue(channel, ["a", "a"], lease_s=3600)
            await stream.wait_for_jobs(2)
            shifted = dict(CREDENTIALS)
            shifted["iso-shift-secret"] = (["worker"], ["b"], None)
            write_tokens(coordinator.tokens_file, shifted)
            # Closed cleanly: a worker reconnects under its new scope.
            await asyncio.wait_for(stream.ended.wait(), WAIT_S)
            assert stream.error is None
            for job_id in held:
                for _ in range(200):
                    job = await _get(channel, job_id)
                    if job.status == jpb.JOB_STATUS_PENDING:
                        break
                    await asyncio.sleep(0.05)
                assert job.status == jpb.JOB_STATUS_PENDING
                assert job.last_error == "worker credential changed"

    asyncio.run(scenario())


def test_a_refused_stream_reports_the_refusal_not_a_failed_write(coordinator) -> None:
    """A stream refused at authentication, whose client sent its hello at once,
    gets UNAUTHENTICATED every time (not INTERNAL from the client's own write)."""

    async def scenario() -> None:
        async with grpc.aio.insecure_channel(coordinator.target) as channel:
            codes = []
            for _ in range(60):
                stream = RawStream(channel, "not-a-known-token", "stranger")
                await asyncio.wait_for(stream.ended.wait(), WAIT_S)
                assert stream.error is not None
                codes.append(stream.error.code())
                await stream.close()
            assert set(codes) == {grpc.StatusCode.UNAUTHENTICATED}, codes

    asyncio.run(scenario())
