"""Coordinator telemetry: OpenTelemetry traces and metrics, a Prometheus endpoint, logs.

Design note. Everything is off unless configured, and off means the engine
keeps its do-nothing hooks (:mod:`coordinator.telemetry.hooks`) and the gRPC
server gets no tracing interceptor: no span or measurement object is created.

Configuration (read once at start, ``TelemetryConfig.from_env``):

* traces: ``OTEL_TRACES_EXPORTER`` = ``otlp`` | ``console`` | ``none``; unset
  means ``otlp`` when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the traces-specific
  endpoint) is set, else off. The OTLP exporter (gRPC) reads the standard
  ``OTEL_EXPORTER_OTLP_*`` variables; ``OTEL_SERVICE_NAME`` defaults to
  ``wfjobs-coordinator``; ``OTEL_BSP_*`` tune the batch processor.
* metrics: ``OTEL_METRICS_EXPORTER`` likewise pushes over OTLP (or prints);
  ``WFJOBS_METRICS_PORT`` serves ``/metrics`` for Prometheus on
  ``WFJOBS_METRICS_HOST`` (default ``0.0.0.0``; port 0 picks a free port,
  logged at start). Either turns the instruments on.
* ``OTEL_SDK_DISABLED=true`` turns all of it off.

Spans: one per RPC (``opentelemetry-instrumentation-grpc``'s aio server
interceptor, continuing the caller's W3C context from the metadata; health and
reflection are not traced), ``acquire`` for acquisitions that leased jobs or
were slow, ``reap expired leases`` for reaper runs that ended attempts.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from coordinator.telemetry.hooks import NO_TELEMETRY, EngineTelemetry

log = logging.getLogger(__name__)

_current: Telemetry | None = None


def _exporter_from_env(signal: str) -> str:
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return "none"
    named = env.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip().lower()
    if named:
        first = named.split(",")[0].strip()
        if first not in ("otlp", "console", "none"):
            log.warning("OTEL_%s_EXPORTER=%s is not supported; using none", signal.upper(), named)
            return "none"
        return first
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    return "otlp" if any(env.get(v) for v in endpoints) else "none"


@dataclass
class TelemetryConfig:
    """What to export; every field off by default."""

    # Span exporter: "otlp", "console" or "none".
    traces_exporter: str = "none"
    # Metric push exporter: "otlp", "console" or "none" (Prometheus is separate).
    metrics_exporter: str = "none"
    # Port of the Prometheus /metrics endpoint; None: no endpoint, 0: any free port.
    metrics_port: int | None = None
    # Address the /metrics endpoint binds.
    metrics_host: str = "0.0.0.0"
    # Seconds a queue-depth snapshot is reused before the store is asked again.
    backlog_refresh_s: float = 10.0
    # service.name when OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES give none.
    default_service_name: str = "wfjobs-coordinator"

    @classmethod
    def from_env(cls) -> TelemetryConfig:
        env = os.environ
        port = env.get("WFJOBS_METRICS_PORT", "").strip()
        disabled = env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
        return cls(
            traces_exporter=_exporter_from_env("traces"),
            metrics_exporter=_exporter_from_env("metrics"),
            metrics_port=int(port) if port and not disabled else None,
            metrics_host=env.get("WFJOBS_METRICS_HOST", "0.0.0.0"),
            backlog_refresh_s=float(env.get("WFJOBS_METRICS_BACKLOG_REFRESH", "10")),
        )

    @property
    def tracing(self) -> bool:
        return self.traces_exporter != "none"

    @property
    def metrics(self) -> bool:
        return self.metrics_exporter != "none" or self.metrics_port is not None

    @property
    def enabled(self) -> bool:
        return self.tracing or self.metrics


def _resource(config: TelemetryConfig) -> Any:
    from opentelemetry.sdk.resources import Resource

    env = os.environ
    attributes = {}
    if not env.get("OTEL_SERVICE_NAME") and "service.name=" not in env.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    ):
        attributes["service.name"] = config.default_service_name
    return Resource.create(attributes)


class Telemetry:
    """The providers, exporters and endpoint of one coordinator process."""

    def __init__(self, config: TelemetryConfig) -> None:
        self.config = config
        self.tracer_provider: Any = None
        self.meter_provider: Any = None
        self.metrics_port: int | None = None
        self._http: Any = None
        self._engines: list[Any] = []
        if config.tracing:
            self._setup_tracing()
        if config.metrics:
            self._setup_metrics()

    def _setup_tracing(self) -> None:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        exporter: Any
        if self.config.traces_exporter == "console":
            exporter = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        provider = TracerProvider(resource=_resource(self.config), shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer_provider = provider
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(provider)

    def _setup_metrics(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            MetricReader,
            PeriodicExportingMetricReader,
        )

        readers: list[MetricReader] = []
        if self.config.metrics_exporter == "otlp":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                OTLPMetricExporter,
            )

            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
        elif self.config.metrics_exporter == "console":
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
        if self.config.metrics_port is not None:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import CollectorRegistry

            self._registry = CollectorRegistry()
            readers.append(PrometheusMetricReader(registry=self._registry))
        self.meter_provider = MeterProvider(
            resource=_resource(self.config), metric_readers=readers, shutdown_on_exit=False
        )

    # -- wiring ---------------------------------------------------------------------------------

    def server_interceptors(self) -> list[Any]:
        """The gRPC aio server interceptors for tracing (none when tracing is off)."""
        if self.tracer_provider is None:
            return []
        from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

        untraced = filters.any_of(filters.health_check(), filters.service_prefix("grpc.reflection"))
        return [
            aio_server_interceptor(
                tracer_provider=self.tracer_provider, filter_=filters.negate(untraced)
            )
        ]

    def engine_telemetry(self, engine: Any) -> EngineTelemetry:
        """The hooks for ``engine``: OpenTelemetry-backed when anything is on."""
        if not self.config.enabled:
            return NO_TELEMETRY
        from coordinator.telemetry.instruments import OtelEngineTelemetry

        meter = self.meter_provider.get_meter("coordinator") if self.meter_provider else None
        tracer = self.tracer_provider.get_tracer("coordinator") if self.tracer_provider else None
        return OtelEngineTelemetry(
            engine, meter=meter, tracer=tracer, backlog_refresh_s=self.config.backlog_refresh_s
        )

    def attach(self, engine: Any) -> None:
        """Give ``engine``, its dispatcher and its reaper the hooks (before it starts)."""
        install(engine, self.engine_telemetry(engine))

    def start(self) -> None:
        """Serve ``/metrics`` when a port is configured; the bound port is ``metrics_port``."""
        if self.config.metrics_port is None or self._http is not None:
            return
        from prometheus_client import start_http_server

        server, _thread = start_http_server(
            self.config.metrics_port, addr=self.config.metrics_host, registry=self._registry
        )
        self._http = server
        self.metrics_port = server.server_address[1]
        log.info(
            "metrics for Prometheus on http://%s:%d/metrics",
            self.config.metrics_host,
            self.metrics_port,
        )

    def shutdown(self) -> None:
        """Stop the endpoint, flush and stop the exporters. Idempotent."""
        global _current
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
            self.tracer_provider = None
        if self.meter_provider is not None:
            self.meter_provider.shutdown()
            self.meter_provider = None
        if _current is self:
            _current = None


def install(engine: Any, hooks: EngineTelemetry) -> None:
    """Make ``hooks`` the telemetry of ``engine`` and its dispatcher (the chores use the engine's)."""
    engine.telemetry = hooks
    engine.dispatcher.telemetry = hooks


def setup_telemetry(config: TelemetryConfig | None = None) -> Telemetry:
    """Build the process's telemetry from ``config`` (default: the environment)."""
    global _current
    telemetry = Telemetry(config or TelemetryConfig.from_env())
    _current = telemetry
    return telemetry


def server_interceptors() -> list[Any]:
    """Tracing interceptors of the process's telemetry; empty when it is off or not set up."""
    return _current.server_interceptors() if _current is not None else []


__all__ = [
    "EngineTelemetry",
    "Telemetry",
    "TelemetryConfig",
    "install",
    "server_interceptors",
    "setup_telemetry",
]
