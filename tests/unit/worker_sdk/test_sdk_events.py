"""JobEvent.result_value decodes a COMPLETED event's result as JobView.result_value does."""

from __future__ import annotations

from dataclasses import dataclass

from worker_sdk import JobEvent
from workflowjobs.v1 import job_pb2, scheduler_service_pb2


@dataclass
class Greeting:
    greeting: str


def test_a_completed_event_decodes_its_result_and_others_have_none() -> None:
    completed = JobEvent.from_proto(
        scheduler_service_pb2.JobEvent(
            kind=scheduler_service_pb2.JOB_EVENT_KIND_COMPLETED,
            job_id="j-1",
            result=job_pb2.Payload(data=b'{"greeting": "hi"}', content_type="application/json"),
        )
    )
    assert completed.result_value() == {"greeting": "hi"}
    assert completed.result_value(Greeting) == Greeting("hi")
    started = JobEvent.from_proto(
        scheduler_service_pb2.JobEvent(kind=scheduler_service_pb2.JOB_EVENT_KIND_STARTED)
    )
    assert started.result is None
    assert started.result_value() is None
