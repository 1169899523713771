"""OpenTelemetry tracing for the SDK: enqueue spans, W3C propagation, one span per attempt.

Design note
-----------
OpenTelemetry is optional: a worker-only install has grpcio and protobuf and
nothing else. Whether tracing is on is decided once, on first use, and kept in
a module flag, so with tracing off every hook is a function call that returns
``None`` and no span object is ever created. Tracing is on when:

* ``opentelemetry-api`` is importable and ``OTEL_SDK_DISABLED`` is not true, and
* the application installed its own global ``TracerProvider`` before the first
  job or enqueue (then its configuration is used as it is), or
* ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``), or an OTLP
  endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, meaning ``otlp``) and
  ``opentelemetry-sdk`` is installed (the ``otel`` extra). The SDK then installs
  a global provider with a batch span processor; ``OTEL_SERVICE_NAME``,
  ``OTEL_RESOURCE_ATTRIBUTES`` and the ``OTEL_BSP_*`` variables apply.

Unlike OpenTelemetry's own auto-configuration, an unset ``OTEL_TRACES_EXPORTER``
means *off*, not ``otlp``: telemetry costs nothing until asked for.

Trace shape: ``enqueue <job type>`` (PRODUCER) is the current span while the
``Enqueue`` RPC runs, so its W3C context goes both into ``JobSpec.traceparent``
(stored with the job) and into the call's metadata (the coordinator's RPC span
becomes its child). Each attempt is an ``execute <job type>`` span (CONSUMER)
whose parent is the stored context: a job's attempts all sit in the
enqueuer's trace, however long after the enqueue they run. A job with
``trace_links`` (a group's completion job: its members' enqueue contexts)
gets a span link to each.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any

from workflowjobs.v1 import job_pb2, worker_service_pb2

logger = logging.getLogger("worker_sdk.tracing")

_SCOPE = "worker_sdk"

_decided = False
_tracer: Any = None  # an opentelemetry.trace.Tracer once decided on


def exporter_from_env(signal: str) -> str:
    """The exporter chosen for ``signal`` ("traces" or "metrics") by ``OTEL_*`` variables.

    Returns ``"otlp"``, ``"console"`` or ``"none"``.
    """
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return "none"
    named = env.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip().lower()
    if named:
        first = named.split(",")[0].strip()
        return first if first in ("otlp", "console") else "none"
    endpoint_vars = ("OTEL_EXPORTER_OTLP_ENDPOINT", f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    return "otlp" if any(env.get(v) for v in endpoint_vars) else "none"


def resource_attributes(default_service_name: str) -> dict[str, str]:
    """Resource attributes to add to the environment's: a default service name."""
    env = os.environ
    if env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        return {}
    return {"service.name": default_service_name}


def _decide() -> Any:
    global _decided, _tracer
    _decided = True
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    provider = trace.get_tracer_provider()
    if not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        _tracer = trace.get_tracer(_SCOPE)
        return _tracer
    exporter_name = exporter_from_env("traces")
    if exporter_name == "none":
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        logger.warning(
            "OTEL_* variables ask for traces but opentelemetry-sdk is not installed; "
            "install workflow-jobs[otel]"
        )
        return None
    exporter: Any
    if exporter_name == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    sdk_provider = TracerProvider(resource=Resource.create(resource_attributes("wfjobs-worker")))
    sdk_provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(sdk_provider)
    _tracer = trace.get_tracer(_SCOPE)
    return _tracer


def tracer() -> Any:
    """The SDK's tracer, or None when tracing is off (decided once, then a flag check)."""
    if _decided:
        return _tracer
    return _decide()


def use_tracer_provider(provider: Any) -> None:
    """Trace with ``provider`` instead of deciding from the global one and ``OTEL_*``.

    ``None`` forgets the choice: the next use decides again. For tests and for
    applications that keep their provider out of the global slot.
    """
    global _decided, _tracer
    _decided = provider is not None
    _tracer = provider.get_tracer(_SCOPE) if provider is not None else None


# -- propagation -------------------------------------------------------------------------------


def _inject() -> dict[str, str]:
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def outgoing_metadata(metadata: Sequence[tuple[str, str]]) -> Sequence[tuple[str, str]]:
    """``metadata`` plus the current W3C trace context (unchanged when tracing is off)."""
    if tracer() is None:
        return metadata
    carrier = _inject()
    if not carrier:
        return metadata
    return (*metadata, *carrier.items())


@contextlib.contextmanager
def _enqueue_span(name: str, tenant_id: str, count: int) -> Iterator[tuple[str, str]]:
    from opentelemetry import trace

    attributes: dict[str, Any] = {
        "messaging.system": "workflow-jobs",
        "wfjobs.tenant_id": tenant_id,
    }
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    with _tracer.start_as_current_span(name, kind=trace.SpanKind.PRODUCER, attributes=attributes):
        carrier = _inject()
        yield carrier.get("traceparent", ""), carrier.get("tracestate", "")


_NO_SPAN = contextlib.nullcontext(None)


def enqueue_span(job_type: str, tenant_id: str) -> contextlib.AbstractContextManager[Any]:
    """A current ``enqueue <job type>`` span yielding ``(traceparent, tracestate)``.

    Yields None (and creates nothing) when tracing is off.
    """
    if tracer() is None:
        return _NO_SPAN
    return _enqueue_span(f"enqueue {job_type}", tenant_id, 1)


def enqueue_batch_span(specs: Sequence[job_pb2.JobSpec]) -> contextlib.AbstractContextManager[Any]:
    """Like :func:`enqueue_span` for a batch; specs without a traceparent get the span's."""
    if tracer() is None or not specs:
        return _NO_SPAN
    types = {s.job_type for s in specs}
    tenants = {s.tenant_id for s in specs}
    name = f"enqueue {next(iter(types))}" if len(types) == 1 else "enqueue batch"
    return _filling(
        specs, _enqueue_span(name, next(iter(tenants)) if len(tenants) == 1 else "", len(specs))
    )


@contextlib.contextmanager
def _filling(
    specs: Sequence[job_pb2.JobSpec], span: contextlib.AbstractContextManager[tuple[str, str]]
) -> Iterator[tuple[str, str]]:
    with span as (traceparent, tracestate):
        for spec in specs:
            if not spec.traceparent:
                spec.traceparent = traceparent
                spec.tracestate = tracestate
        yield traceparent, tracestate


# -- execution ---------------------------------------------------------------------------------


class ExecutionSpan:
    """The ``execute <job type>`` span of one attempt, current in the job's task while it runs."""

    def __init__(self, span: Any, token: object) -> None:
        self.span = span
        self._token = token

    def event(self, name: str, **attributes: Any) -> None:
        """Record an event (lease lost, cancel requested) on the span."""
        self.span.add_event(name, attributes)

    def finish(self, outcome: Any, *, cancelled: bool = False) -> None:
        """Set the status from the reported outcome, end the span and detach it.

        ``cancelled``: the handler returned after its cancel was requested, so
        the coordinator ends the job CANCELLED whatever the outcome says.
        """
        from opentelemetry import context
        from opentelemetry.trace import Status, StatusCode

        span = self.span
        if cancelled:
            span.set_attribute("wfjobs.outcome", "cancelled")
        elif isinstance(outcome, worker_service_pb2.Completion):
            span.set_attribute("wfjobs.outcome", "completed")
        elif isinstance(outcome, worker_service_pb2.Failure):
            span.set_attribute("wfjobs.outcome", "failed")
            span.set_attribute("error.type", outcome.error_kind or "Error")
            span.set_attribute("wfjobs.non_retryable", outcome.non_retryable)
            span.set_status(Status(StatusCode.ERROR, outcome.error))
        else:
            span.set_attribute("wfjobs.outcome", "released")
            reason = getattr(outcome, "reason", "")
            if reason:
                span.set_attribute("wfjobs.release_reason", reason)
        span.end()
        context.detach(self._token)  # type: ignore[arg-type]


def start_execution(ctx: Any) -> ExecutionSpan | None:
    """Start and attach the span of one attempt of ``ctx``'s job; None when tracing is off."""
    if tracer() is None:
        return None
    from opentelemetry import context, propagate, trace

    job = ctx.job
    carrier = {"traceparent": job.traceparent, "tracestate": job.tracestate}
    parent = propagate.extract(carrier) if job.traceparent else None
    workflow = job.workflow
    attributes = {
        "messaging.system": "workflow-jobs",
        "wfjobs.job_id": job.id,
        "wfjobs.job_type": job.job_type,
        "wfjobs.attempt": job.attempt,
        "wfjobs.tenant_id": job.tenant_id,
        "wfjobs.definition_id": workflow.definition_id,
        "wfjobs.definition_version": workflow.definition_version,
        "wfjobs.instance_id": workflow.instance_id,
        "wfjobs.activity_id": workflow.activity_id,
        "wfjobs.correlation_id": workflow.correlation_id,
        "wfjobs.worker_id": ctx.worker_id,
    }
    links = [
        trace.Link(
            trace.get_current_span(propagate.extract({"traceparent": tp})).get_span_context()
        )
        for tp in job.trace_links
    ]
    span = _tracer.start_span(
        f"execute {job.job_type}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
        links=[link for link in links if link.context.is_valid],
    )
    token = context.attach(trace.set_span_in_context(span))
    span_context = span.get_span_context()
    ctx.logger.extra["trace_id"] = format(span_context.trace_id, "032x")
    ctx.logger.extra["span_id"] = format(span_context.span_id, "016x")
    return ExecutionSpan(span, token)


def record_exception(exc: BaseException) -> None:
    """Record ``exc`` on the current span (the attempt's span inside a handler)."""
    if tracer() is None:
        return
    from opentelemetry import trace

    trace.get_current_span().record_exception(exc)


def event(execution: ExecutionSpan | None, name: str, **attributes: Any) -> None:
    """Add an event to an attempt's span, if it has one."""
    if execution is not None:
        execution.event(name, **attributes)


__all__ = [
    "ExecutionSpan",
    "enqueue_batch_span",
    "enqueue_span",
    "event",
    "exporter_from_env",
    "outgoing_metadata",
    "record_exception",
    "start_execution",
    "tracer",
    "use_tracer_provider",
]
