"""Observability across real processes.

Traces: this test process enqueues inside its own span; a coordinator and a
worker subprocess export over OTLP to a receiver the test runs (a gRPC server
implementing ``TraceService/Export``), and the test checks how the spans of
the three processes join up. Metrics: ``/metrics`` of a live coordinator is
scraped over HTTP after a known workload. Tests wait on conditions, never on
the clock.
"""

from __future__ import annotations

import re
import threading
import urllib.request
from collections.abc import Callable, Iterator
from concurrent import futures
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from prometheus_client.parser import text_string_to_metric_families

from wfj_testing import wait_until
from worker_sdk import AdminClient, JobRequest, JobStatus, RetryPolicy, SchedulerClient, _tracing

pytestmark = pytest.mark.e2e

Processes = dict[str, Callable[..., Any]]


class ReceivedSpan:
    """One span as the receiver got it, with the exporting process's service name."""

    def __init__(self, service: str, span: trace_pb2.Span) -> None:
        self.service = service
        self.name = span.name
        self.trace_id = span.trace_id.hex()
        self.span_id = span.span_id.hex()
        self.parent_span_id = span.parent_span_id.hex()
        self.kind = span.kind
        self.status_code = span.status.code
        self.status_message = span.status.message
        self.events = [e.name for e in span.events]
        self.attributes = {a.key: _value(a.value) for a in span.attributes}
        self.links = [(link.trace_id.hex(), link.span_id.hex()) for link in span.links]

    def __repr__(self) -> str:
        return f"<{self.service}: {self.name} {self.trace_id}/{self.span_id}>"


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class OtlpReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """A real OTLP/gRPC trace endpoint that keeps what it receives."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        received = []
        for resource_spans in request.resource_spans:
            service = next(
                (
                    a.value.string_value
                    for a in resource_spans.resource.attributes
                    if a.key == "service.name"
                ),
                "",
            )
            for scope_spans in resource_spans.scope_spans:
                received.extend(ReceivedSpan(service, s) for s in scope_spans.spans)
        with self._lock:
            self.spans.extend(received)
        return trace_service_pb2.ExportTraceServiceResponse()

    def find(self, **match: Any) -> list[ReceivedSpan]:
        with self._lock:
            spans = list(self.spans)
        return [s for s in spans if all(getattr(s, k) == v for k, v in match.items())]

    def stop(self) -> None:
        self.server.stop(None)


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """The receiver, with OTEL_* variables pointing subprocesses at it."""
    recv = OtlpReceiver()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{recv.port}")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    # Export promptly so the test's waits end soon.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    yield recv
    recv.stop()


@pytest.fixture
def local_tracing(receiver: OtlpReceiver) -> Iterator[TracerProvider]:
    """Tracing in this test process, exporting to the receiver as service 'test-app'."""
    provider = TracerProvider(resource=Resource.create({"service.name": "test-app"}))
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{receiver.port}", insecure=True)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _tracing.use_tracer_provider(provider)
    yield provider
    _tracing.use_tracer_provider(None)
    provider.shutdown()


def test_execution_span_is_a_child_of_the_enqueue_span_across_processes(
    tmp_path: Path,
    processes: Processes,
    receiver: OtlpReceiver,
    local_tracing: TracerProvider,
) -> None:
    coordinator = processes["coordinator"](f"sqlite:///{tmp_path / 'traces.db'}")
    processes["worker"](coordinator.target)
    app = local_tracing.get_tracer("test-app")
    with SchedulerClient(coordinator.target) as client:
        with app.start_as_current_span("place order") as root:
            job = client.enqueue("noop", {"order": 7}, tenant_id="acme")
        done = client.wait_for_job(job.id, timeout=60)
    assert done.status == JobStatus.COMPLETED
    trace_id = format(root.get_span_context().trace_id, "032x")

    [execute] = wait_until(
        lambda: receiver.find(name="execute noop", trace_id=trace_id), 30, "the execute span"
    )
    [enqueue] = receiver.find(name="enqueue noop", trace_id=trace_id)
    [rpc] = wait_until(
        lambda: receiver.find(
            name="/workflowjobs.v1.JobSchedulerService/Enqueue", trace_id=trace_id
        ),
        30,
        "the coordinator's Enqueue RPC span",
    )
    assert enqueue.service == "test-app"
    assert enqueue.parent_span_id == format(root.get_span_context().span_id, "016x")
    assert enqueue.kind == trace_pb2.Span.SPAN_KIND_PRODUCER
    # The coordinator continued the enqueuer's context from the call's metadata.
    assert rpc.service == "wfjobs-coordinator"
    assert rpc.parent_span_id == enqueue.span_id
    # The worker's span continues the context stored with the job.
    assert execute.service == "wfjobs-worker"
    assert execute.parent_span_id == enqueue.span_id
    assert execute.kind == trace_pb2.Span.SPAN_KIND_CONSUMER
    assert execute.status_code == trace_pb2.Status.STATUS_CODE_UNSET
    assert execute.attributes["wfjobs.job_id"] == job.id
    assert execute.attributes["wfjobs.tenant_id"] == "acme"
    assert execute.attributes["wfjobs.attempt"] == 1
    assert execute.attributes["wfjobs.outcome"] == "completed"
    assert execute.attributes["wfjobs.worker_id"].startswith("worker-")


def test_a_group_s_completion_span_links_to_its_members_across_processes(
    tmp_path: Path,
    processes: Processes,
    receiver: OtlpReceiver,
    local_tracing: TracerProvider,
) -> None:
    """The worker process's span of a group's completion job links (span links,
    not parents) to the contexts its members were enqueued in by this process
    (create_group enqueues them in the caller's trace)."""
    coordinator = processes["coordinator"](f"sqlite:///{tmp_path / 'links.db'}")
    processes["worker"](coordinator.target)
    app = local_tracing.get_tracer("test-app")
    with SchedulerClient(coordinator.target) as client, AdminClient(coordinator.target) as admin:
        with app.start_as_current_span("fan out") as root:
            group, members = client.create_group(
                JobRequest("noop"), [JobRequest("noop", {"n": i}) for i in range(3)], close=True
            )
        wait_until(lambda: client.get_group(group.id).completion_job_id, 60, "the completion")
        completion_id = client.get_group(group.id).completion_job_id
        assert client.wait_for_job(completion_id, timeout=60).status == JobStatus.COMPLETED
        member_traceparents = {}
        for member in members:
            _, trace, span, _ = admin.get_job(member.job_id).raw.traceparent.split("-")
            member_traceparents[member.job_id] = (trace, span)
        member_contexts = set(member_traceparents.values())
    trace_id = format(root.get_span_context().trace_id, "032x")
    assert {trace for trace, _ in member_contexts} == {trace_id}

    def completion_span() -> list[ReceivedSpan]:
        return [
            s
            for s in receiver.find(name="execute noop", service="wfjobs-worker")
            if s.attributes.get("wfjobs.job_id") == completion_id
        ]

    [execute] = wait_until(completion_span, 30, "the completion job's execute span")
    assert sorted(execute.links) == sorted(
        (trace, span) for member in members for trace, span in [member_traceparents[member.job_id]]
    )
    # create_group enqueued the members inside one "enqueue noop" span of this
    # process, a child of the caller's span.
    [enqueue] = receiver.find(name="enqueue noop", trace_id=trace_id)
    assert enqueue.parent_span_id == format(root.get_span_context().span_id, "016x")
    assert member_contexts == {(trace_id, enqueue.span_id)}
    # Links, not parents: the completion is no child of any member's context.
    assert execute.parent_span_id not in {span for _, span in member_contexts}

    # Each member's own execute span is a child of the context it was enqueued in.
    def member_spans() -> dict[str, ReceivedSpan]:
        found = receiver.find(name="execute noop", service="wfjobs-worker", trace_id=trace_id)
        spans = {s.attributes["wfjobs.job_id"]: s for s in found}
        return spans if all(m.job_id in spans for m in members) else {}

    by_member = wait_until(member_spans, 30, "the members' execute spans")
    for member in members:
        span = by_member[member.job_id]
        assert (span.trace_id, span.parent_span_id) in member_contexts


def test_failure_and_retry_give_one_span_per_attempt(
    tmp_path: Path,
    processes: Processes,
    receiver: OtlpReceiver,
    local_tracing: TracerProvider,
) -> None:
    coordinator = processes["coordinator"](f"sqlite:///{tmp_path / 'retries.db'}")
    processes["worker"](coordinator.target)
    with SchedulerClient(coordinator.target) as client:
        job = client.enqueue(
            "flaky",
            {"succeed_on": 3},
            retry_policy=RetryPolicy(
                max_attempts=3, initial_backoff=timedelta(milliseconds=10), jitter=0.0
            ),
        )
        done = client.wait_for_job(job.id, timeout=60)
    assert done.status == JobStatus.COMPLETED

    def attempts() -> list[ReceivedSpan]:
        spans = receiver.find(name="execute flaky")
        return (
            sorted(spans, key=lambda s: s.attributes["wfjobs.attempt"]) if len(spans) == 3 else []
        )

    spans = wait_until(attempts, 30, "three execute spans")
    [enqueue] = receiver.find(name="enqueue flaky")
    assert [s.attributes["wfjobs.attempt"] for s in spans] == [1, 2, 3]
    assert {s.trace_id for s in spans} == {enqueue.trace_id}
    assert {s.parent_span_id for s in spans} == {enqueue.span_id}
    failed, failed_again, succeeded = spans
    for span, attempt in ((failed, 1), (failed_again, 2)):
        assert span.status_code == trace_pb2.Status.STATUS_CODE_ERROR
        assert span.status_message == f"RuntimeError: attempt {attempt} fails on purpose"
        assert "exception" in span.events
        assert span.attributes["error.type"] == "RuntimeError"
    assert succeeded.status_code == trace_pb2.Status.STATUS_CODE_UNSET
    assert "exception" not in succeeded.events


_METRICS_RE = re.compile(r"metrics for Prometheus on http://[^:]+:(\d+)/metrics")


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(
                sorted((k, v) for k, v in sample.labels.items() if k in ("tenant", "job_type"))
            )
            samples[(sample.name, labels)] = sample.value
    return samples


def test_metrics_endpoint_counts_a_known_workload(
    tmp_path: Path, processes: Processes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WFJOBS_METRICS_PORT", "0")
    monkeypatch.setenv("WFJOBS_METRICS_HOST", "127.0.0.1")
    monkeypatch.setenv("WFJOBS_METRICS_BACKLOG_REFRESH", "0")  # every scrape reads the store
    coordinator = processes["coordinator"](f"sqlite:///{tmp_path / 'metrics.db'}")
    port = int(
        wait_until(
            lambda: _METRICS_RE.search(coordinator.log_path.read_text()), 30, "the metrics line"
        ).group(1)
    )
    quick = RetryPolicy(initial_backoff=timedelta(milliseconds=10), jitter=0.0)
    with SchedulerClient(coordinator.target) as client:
        ids = [client.enqueue("noop", {}, tenant_id="acme").id for _ in range(5)]
        ids.append(
            client.enqueue("flaky", {"succeed_on": 2}, tenant_id="acme", retry_policy=quick).id
        )
        ids.append(
            client.enqueue(
                "flaky", {"succeed_on": 9}, tenant_id="acme", max_attempts=2, retry_policy=quick
            ).id
        )
        before = _scrape(port)
        assert (
            before[("wfjobs_jobs_enqueued_total", (("job_type", "noop"), ("tenant", "acme")))] == 5
        )
        assert before[("wfjobs_queue_depth", (("job_type", "noop"), ("tenant", "acme")))] == 5

        processes["worker"](coordinator.target)
        statuses = [client.wait_for_job(job_id, timeout=60).status for job_id in ids]
    assert statuses == [JobStatus.COMPLETED] * 6 + [JobStatus.FAULTED]

    after = _scrape(port)
    noop = (("job_type", "noop"), ("tenant", "acme"))
    flaky = (("job_type", "flaky"), ("tenant", "acme"))
    assert after[("wfjobs_jobs_enqueued_total", flaky)] == 2
    assert after[("wfjobs_jobs_started_total", noop)] == 5
    assert after[("wfjobs_jobs_completed_total", noop)] == 5
    assert after[("wfjobs_jobs_started_total", flaky)] == 4
    assert after[("wfjobs_jobs_completed_total", flaky)] == 1
    assert after[("wfjobs_jobs_retried_total", flaky)] == 2
    assert after[("wfjobs_jobs_failed_total", flaky)] == 1
    assert after[("wfjobs_job_start_latency_seconds_count", noop)] == 5
    assert after[("wfjobs_acquisition_duration_seconds_count", ())] >= 1
    assert after[("wfjobs_workers_connected", ())] == 1
    assert ("wfjobs_queue_depth", noop) not in after or after[("wfjobs_queue_depth", noop)] == 0
