"""What the coordinator answers on the AcquireJobs stream, as docs/protocol.md
states it for a second implementation: WorkerAccepted first (a refused hello
gets a status and no message), batch_id echoed whatever it is (0 included),
a malformed outcome refused on its own while a NUL anywhere in the message
ends the stream INVALID_ARGUMENT, and a stream replaced by a newer one of the
same worker id ending with status OK."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from wfj_testing import Coordinator
from workflowjobs.v1 import job_pb2 as jpb
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
from workflowjobs.v1 import worker_service_pb2 as wpb
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc


@pytest.fixture
def channel(database: str, tmp_path: Path) -> Iterator[grpc.Channel]:
    coordinator = Coordinator(database, tmp_path / "coordinator.log")
    ch = grpc.insecure_channel(coordinator.target)
    try:
        yield ch
    finally:
        ch.close()
        coordinator.stop()


class Stream:
    """An AcquireJobs call whose requests the test sends one at a time."""

    def __init__(self, channel: grpc.Channel, worker_id: str, job_types: list[str]) -> None:
        self._requests: queue.Queue[wpb.AcquireJobsRequest | None] = queue.Queue()
        self._requests.put(
            wpb.AcquireJobsRequest(
                hello=wpb.WorkerHello(worker_id=worker_id, job_types=job_types, slots=1)
            )
        )
        self.call = wpb_grpc.WorkerServiceStub(channel).AcquireJobs(
            iter(self._requests.get, None), timeout=30
        )
        self.responses: queue.Queue[wpb.AcquireJobsResponse | grpc.RpcError] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for response in self.call:
                self.responses.put(response)
        except grpc.RpcError as e:
            self.responses.put(e)
        else:
            self.responses.put(grpc.RpcError())  # ended with OK: see status()

    def send(self, request: wpb.AcquireJobsRequest) -> None:
        self._requests.put(request)

    def next(self) -> wpb.AcquireJobsResponse | grpc.RpcError:
        return self.responses.get(timeout=30)

    def close(self) -> None:
        self._requests.put(None)
        self.call.cancel()


def _enqueue(channel: grpc.Channel, job_type: str) -> str:
    scheduler = spb_grpc.JobSchedulerServiceStub(channel)
    spec = jpb.JobSpec(job_type=job_type, tenant_id="t", payload=jpb.Payload(data=b"{}"))
    return str(scheduler.Enqueue(spb.EnqueueRequest(job=spec), timeout=10).job.id)


def test_a_refused_hello_gets_a_status_and_no_message(channel: grpc.Channel) -> None:
    stream = Stream(channel, "w-refused", ["bad,type"])
    first = stream.next()
    assert isinstance(first, grpc.RpcError)
    assert stream.call.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_answers_on_the_stream(channel: grpc.Channel) -> None:
    job_type = "answers"
    job_id = _enqueue(channel, job_type)
    stream = Stream(channel, "w-answers", [job_type])
    try:
        first = stream.next()
        assert not isinstance(first, grpc.RpcError) and first.WhichOneof("kind") == "accepted"
        stream.send(wpb.AcquireJobsRequest(credit=wpb.CreditGrant(credits=1)))
        jobs = stream.next()
        assert not isinstance(jobs, grpc.RpcError) and jobs.WhichOneof("kind") == "jobs"
        [leased] = jobs.jobs.jobs
        assert leased.job.id == job_id
        # batch_id 0 is echoed; a malformed outcome (none set) is refused alone.
        malformed = wpb.JobOutcome(job_id=job_id, lease_token=leased.lease_token)
        done = wpb.JobOutcome(
            job_id=job_id, lease_token=leased.lease_token, completed=wpb.Completion()
        )
        stream.send(
            wpb.AcquireJobsRequest(
                outcomes=wpb.OutcomeBatch(batch_id=0, outcomes=[malformed, done])
            )
        )
        answers = stream.next()
        assert not isinstance(answers, grpc.RpcError)
        assert answers.WhichOneof("kind") == "outcomes"
        assert answers.outcomes.batch_id == 0
        refused, recorded = answers.outcomes.results
        assert (refused.accepted, refused.error_code) == (False, "INVALID_ARGUMENT")
        assert recorded.accepted and recorded.status == jpb.JOB_STATUS_COMPLETED
        # A NUL in any string of the message ends the stream.
        nul = wpb.JobOutcome(
            job_id=job_id,
            lease_token=leased.lease_token,
            failed=wpb.Failure(error="bad\x00byte", error_kind="X"),
        )
        stream.send(wpb.AcquireJobsRequest(outcomes=wpb.OutcomeBatch(batch_id=7, outcomes=[nul])))
        ended = stream.next()
        assert isinstance(ended, grpc.RpcError)
        assert stream.call.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "NUL" in (stream.call.details() or "")
    finally:
        stream.close()


def test_a_replaced_stream_ends_with_status_ok(channel: grpc.Channel) -> None:
    old = Stream(channel, "w-replaced", ["replaced"])
    new: Stream | None = None
    try:
        first = old.next()
        assert not isinstance(first, grpc.RpcError) and first.WhichOneof("kind") == "accepted"
        new = Stream(channel, "w-replaced", ["replaced"])
        accepted = new.next()
        assert not isinstance(accepted, grpc.RpcError)
        assert accepted.WhichOneof("kind") == "accepted"
        ended = old.next()
        assert isinstance(ended, grpc.RpcError)
        assert old.call.code() == grpc.StatusCode.OK
    finally:
        old.close()
        if new is not None:
            new.close()
