"""OpenTelemetry metrics of the worker: how long handlers run.

Decided once, like tracing (see :mod:`worker_sdk._tracing`): on when the
application installed a global ``MeterProvider``, or when ``OTEL_METRICS_EXPORTER``
names an exporter or an OTLP endpoint is set and ``opentelemetry-sdk`` is
installed (then a periodic OTLP or console reader is installed globally;
``OTEL_METRIC_EXPORT_INTERVAL`` applies). Off, the hook is a flag check.

Instrument: ``wfjobs.handler.duration`` (histogram, seconds) with attributes
``wfjobs.job_type`` and ``wfjobs.outcome`` (completed, failed, released): bounded
cardinality, never a job id.
"""

from __future__ import annotations

import logging
from typing import Any

from workflowjobs.v1 import worker_service_pb2

from ._tracing import exporter_from_env, resource_attributes

logger = logging.getLogger("worker_sdk.metrics")

_decided = False
_histogram: Any = None


def _decide() -> Any:
    global _decided, _histogram
    _decided = True
    try:
        from opentelemetry import metrics
        from opentelemetry.metrics import NoOpMeterProvider
    except ImportError:
        return None
    provider = metrics.get_meter_provider()
    if type(provider).__name__ == "_ProxyMeterProvider" or isinstance(provider, NoOpMeterProvider):
        exporter_name = exporter_from_env("metrics")
        if exporter_name == "none":
            return None
        try:
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import (
                ConsoleMetricExporter,
                PeriodicExportingMetricReader,
            )
            from opentelemetry.sdk.resources import Resource
        except ImportError:
            logger.warning(
                "OTEL_* variables ask for metrics but opentelemetry-sdk is not installed; "
                "install workflow-jobs[otel]"
            )
            return None
        exporter: Any
        if exporter_name == "console":
            exporter = ConsoleMetricExporter()
        else:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

            exporter = OTLPMetricExporter()
        metrics.set_meter_provider(
            MeterProvider(
                resource=Resource.create(resource_attributes("wfjobs-worker")),
                metric_readers=[PeriodicExportingMetricReader(exporter)],
            )
        )
    meter = metrics.get_meter("worker_sdk")
    _histogram = meter.create_histogram(
        "wfjobs.handler.duration",
        unit="s",
        description="Time a handler ran for one attempt, by job type and outcome.",
    )
    return _histogram


def record_handler(job_type: str, seconds: float, outcome: Any, *, cancelled: bool = False) -> None:
    """Record one handler run (nothing when metrics are off); ``cancelled``
    when its cancel was requested (the job ends CANCELLED)."""
    histogram = _histogram if _decided else _decide()
    if histogram is None:
        return
    if cancelled:
        name = "cancelled"
    elif isinstance(outcome, worker_service_pb2.Completion):
        name = "completed"
    elif isinstance(outcome, worker_service_pb2.Failure):
        name = "failed"
    else:
        name = "released"
    histogram.record(seconds, {"wfjobs.job_type": job_type, "wfjobs.outcome": name})


__all__ = ["record_handler"]
