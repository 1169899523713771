"""The SDK's tracing hooks: off by default and without OpenTelemetry, W3C context
into job specs, attempt spans with status and events, JSON log lines."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from worker_sdk import JobContext, _tracing, jsonlog
from workflowjobs.v1 import job_pb2, worker_service_pb2

OTEL_VARS = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in OTEL_VARS:
        monkeypatch.delenv(name, raising=False)
    _tracing.use_tracer_provider(None)
    yield
    _tracing.use_tracer_provider(None)


@pytest.fixture
def spans(clean_env: None) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _tracing.use_tracer_provider(provider)
    yield exporter
    provider.shutdown()


def _context(**job_fields: object) -> JobContext:
    job = job_pb2.Job(id="job-1", job_type="send", tenant_id="acme", attempt=2, **job_fields)
    return JobContext(job=job, lease_token="t", worker_id="w-1")


def test_tracing_is_off_without_otel_variables(clean_env: None) -> None:
    metadata = (("authorization", "Bearer x"),)
    assert _tracing.tracer() is None
    assert _tracing.outgoing_metadata(metadata) is metadata
    with _tracing.enqueue_span("send", "acme") as context:
        assert context is None
    assert _tracing.start_execution(_context()) is None


def test_tracing_is_off_when_opentelemetry_is_not_installed(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # makes the import fail
    assert _tracing.tracer() is None


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "none"),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "none"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_TRACES_EXPORTER": "none"}, "none"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, "none"),
    ],
)
def test_exporter_choice_from_env(
    clean_env: None, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _tracing.exporter_from_env("traces") == expected


def test_enqueue_span_hands_out_its_w3c_context(spans: InMemorySpanExporter) -> None:
    with _tracing.enqueue_span("send", "acme") as (traceparent, tracestate):
        metadata = dict(_tracing.outgoing_metadata((("x", "1"),)))
    [span] = spans.get_finished_spans()
    context = span.get_span_context()
    assert span.name == "enqueue send"
    assert span.kind == SpanKind.PRODUCER
    assert traceparent.startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
    assert metadata["traceparent"] == traceparent
    assert metadata["x"] == "1"


def test_batch_span_fills_only_specs_without_a_traceparent(spans: InMemorySpanExporter) -> None:
    explicit = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    specs = [
        job_pb2.JobSpec(job_type="send", tenant_id="acme"),
        job_pb2.JobSpec(job_type="send", tenant_id="acme", traceparent=explicit),
    ]
    with _tracing.enqueue_batch_span(specs):
        pass
    [span] = spans.get_finished_spans()
    assert span.name == "enqueue send"
    assert span.attributes["messaging.batch.message_count"] == 2
    assert specs[0].traceparent.split("-")[1] == f"{span.get_span_context().trace_id:032x}"
    assert specs[1].traceparent == explicit


def test_execution_span_continues_the_stored_context(spans: InMemorySpanExporter) -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    ctx = _context(
        traceparent=parent,
        workflow=job_pb2.WorkflowRef(definition_id="order", definition_version=3, instance_id="i"),
    )
    execution = _tracing.start_execution(ctx)
    assert execution is not None
    try:
        raise ValueError("card declined")
    except ValueError as exc:
        _tracing.record_exception(exc)
    _tracing.event(execution, "cancel requested")
    execution.finish(
        worker_service_pb2.Failure(error="ValueError: card declined", error_kind="ValueError")
    )
    [span] = spans.get_finished_spans()
    assert span.name == "execute send"
    assert span.kind == SpanKind.CONSUMER
    assert f"{span.parent.span_id:016x}" == "b7ad6b7169203331"
    assert f"{span.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "ValueError: card declined"
    assert [e.name for e in span.events] == ["exception", "cancel requested"]
    assert span.attributes["wfjobs.attempt"] == 2
    assert span.attributes["wfjobs.definition_version"] == 3
    assert span.attributes["wfjobs.worker_id"] == "w-1"
    assert ctx.logger.extra["trace_id"] == "0af7651916cd43dd8448eb211c80319c"


def test_execution_span_of_a_cancelled_job_says_cancelled(spans: InMemorySpanExporter) -> None:
    execution = _tracing.start_execution(_context())
    assert execution is not None
    execution.finish(worker_service_pb2.Completion(), cancelled=True)
    [span] = spans.get_finished_spans()
    assert span.attributes["wfjobs.outcome"] == "cancelled"


def test_job_logger_lines_carry_job_and_trace_ids_as_json(spans: InMemorySpanExporter) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(jsonlog.JsonFormatter())
    logger = logging.getLogger("test.sdk.jsonlog")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        job = job_pb2.Job(id="job-9", job_type="send", tenant_id="acme", attempt=1)
        ctx = JobContext(job=job, worker_id="w-1", logger=logger)
        execution = _tracing.start_execution(ctx)
        assert execution is not None
        ctx.logger.warning("charging %s", "card")
        execution.finish(worker_service_pb2.Completion())
    finally:
        logger.removeHandler(handler)
    line = json.loads(stream.getvalue())
    [span] = spans.get_finished_spans()
    assert line["message"] == "charging card"
    assert line["level"] == "WARNING"
    assert line["job_id"] == "job-9"
    assert line["tenant_id"] == "acme"
    assert line["trace_id"] == f"{span.context.trace_id:032x}"
    assert line["span_id"] == f"{span.context.span_id:016x}"


def test_an_enqueue_from_outside_continues_the_callers_trace(spans: InMemorySpanExporter) -> None:
    provider_tracer = _tracing.tracer()
    assert provider_tracer is not None
    with provider_tracer.start_as_current_span("POST /orders") as caller:
        with _tracing.enqueue_span("send", "acme") as (traceparent, _):
            pass
    enqueue = next(s for s in spans.get_finished_spans() if s.name == "enqueue send")
    assert enqueue.parent is not None
    assert enqueue.parent.span_id == caller.get_span_context().span_id
    assert traceparent.split("-")[1] == f"{caller.get_span_context().trace_id:032x}"


def test_a_child_jobs_spans_descend_from_the_handler_span_that_enqueued_it(
    spans: InMemorySpanExporter,
) -> None:
    parent_job = _context(traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    handler = _tracing.start_execution(parent_job)
    assert handler is not None
    # ctx.enqueue inside the handler: the enqueue span is the handler span's child,
    # and its context is what the child job stores.
    with _tracing.enqueue_span("child", "acme") as (traceparent, tracestate):
        pass
    handler.finish(worker_service_pb2.Completion())
    child_job = _context(traceparent=traceparent, tracestate=tracestate)
    child = _tracing.start_execution(child_job)
    assert child is not None
    child.finish(worker_service_pb2.Completion())
    # Finished in this order: the enqueue, the parent's attempt, the child's attempt.
    enqueued, executed, child_span = spans.get_finished_spans()
    assert enqueued.name == "enqueue child"
    assert executed.name == child_span.name == "execute send"
    assert enqueued.parent.span_id == executed.context.span_id
    assert child_span.parent.span_id == enqueued.context.span_id
    assert (
        child_span.context.trace_id
        == executed.context.trace_id
        == 0x0AF7651916CD43DD8448EB211C80319C
    )


def test_an_execution_span_links_to_the_jobs_trace_links(spans: InMemorySpanExporter) -> None:
    members = [f"00-{i:032x}-{i:016x}-01" for i in (7, 8)]
    ctx = _context(trace_links=[*members, "not a traceparent"])
    execution = _tracing.start_execution(ctx)
    assert execution is not None
    execution.finish(worker_service_pb2.Completion())
    [span] = spans.get_finished_spans()
    assert [(link.context.trace_id, link.context.span_id) for link in span.links] == [
        (7, 7),
        (8, 8),
    ]
    assert span.parent is None  # links, not a parent: the completion starts its own trace
