"""Builds the gRPC server: services, health, reflection, error mapping,
authentication, limits and TLS.

Interceptor order (outermost first): tracing when it is on, then one
interceptor (``CallPipeline``, api/pipeline.py) doing, in this order, error
mapping, the token gate (bearer token and role, from metadata only), request
decoding, the rest of authentication (tenant scopes) and limits. So every
error gets its status code, an unauthenticated caller is refused before its
bytes are decoded, tenant checks see decoded requests and limits know the
caller.
"""

from __future__ import annotations

import asyncio
import logging

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from coordinator import telemetry
from coordinator.api.admin import AdminServicer
from coordinator.api.auth import SCALER_SERVICE, AuthConfig, AuthInterceptor, TokenBook
from coordinator.api.decoding import RequestDecodingInterceptor
from coordinator.api.errors import ErrorMappingInterceptor
from coordinator.api.handlers import ServerInterceptor
from coordinator.api.health import HealthWatchConfig, StoreHealthWatch
from coordinator.api.keda import ExternalScalerServicer
from coordinator.api.pipeline import CallPipeline
from coordinator.api.request_limits import ApiLimits, LimitsInterceptor
from coordinator.api.scheduler import JobSchedulerServicer
from coordinator.api.tls import TlsConfig
from coordinator.api.worker import WorkerServicer
from coordinator.engine import Engine
from workflowjobs.contract import MAX_MESSAGE_BYTES
from workflowjobs.externalscaler import externalscaler_pb2_grpc as kpb_grpc
from workflowjobs.v1 import admin_service_pb2, scheduler_service_pb2, worker_service_pb2
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc
from workflowjobs.v1 import worker_service_pb2_grpc as wpb_grpc

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    scheduler_service_pb2.DESCRIPTOR.services_by_name["JobSchedulerService"].full_name,
    worker_service_pb2.DESCRIPTOR.services_by_name["WorkerService"].full_name,
    admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
)


class CoordinatorServer:
    """The coordinator's gRPC server around one engine."""

    def __init__(
        self,
        engine: Engine,
        listen: str,
        *,
        auth: AuthConfig | None = None,
        limits: ApiLimits | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        self.engine = engine
        self.listen = listen
        self.port = 0
        self.tls = tls
        self.limits = limits or ApiLimits()
        # grpc_health-stubs lacks ``health.aio`` (grpcio-health-checking's asyncio servicer).
        self.health = health.aio.HealthServicer()  # type: ignore[attr-defined]
        bounds = engine.store.bounds
        self.health_watch = StoreHealthWatch(
            engine.ping_store,
            self._set_serving,
            HealthWatchConfig(
                liveness_interval_s=bounds.liveness_interval_s,
                liveness_timeout_s=bounds.liveness_timeout_s,
            ),
        )
        self._token_watch: asyncio.Task[None] | None = None
        self.auth = AuthInterceptor(auth, engine) if auth is not None else None
        interceptors: list[ServerInterceptor] = [
            # Tracing (when on) is outermost, so RPC spans see every status code.
            *telemetry.server_interceptors(),
            CallPipeline(
                errors=ErrorMappingInterceptor(
                    on_store_unavailable=self.health_watch.report_unavailable
                ),
                # Decodes requests itself: undecodable bytes and NUL in strings
                # are INVALID_ARGUMENT.
                decoding=RequestDecodingInterceptor(engine.config.max_string_length),
                auth=self.auth,
                limits=LimitsInterceptor(self.limits),
            ),
        ]
        self.server = grpc.aio.server(
            interceptors=interceptors,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                # The coordinator pings each connection every 20 s (10 s to answer),
                # and permits the clients' own pings down to one every 5 s with
                # or without calls (both SDKs ping every 10 s): a silent path is
                # found from either end.
                ("grpc.keepalive_time_ms", 20_000),
                ("grpc.keepalive_timeout_ms", 10_000),
                ("grpc.http2.max_pings_without_data", 0),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
            ],
        )
        spb_grpc.add_JobSchedulerServiceServicer_to_server(
            JobSchedulerServicer(engine), self.server
        )
        wpb_grpc.add_WorkerServiceServicer_to_server(
            WorkerServicer(
                engine,
                max_credits_per_stream=self.limits.max_credits_per_stream,
                book=self.auth.book if self.auth is not None else None,
                max_send_message_bytes=MAX_MESSAGE_BYTES,
            ),
            self.server,
        )
        apb_grpc.add_AdminServiceServicer_to_server(AdminServicer(engine), self.server)
        kpb_grpc.add_ExternalScalerServicer_to_server(ExternalScalerServicer(engine), self.server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection(
            (
                *SERVICE_NAMES,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                SCALER_SERVICE,
                reflection.SERVICE_NAME,
            ),
            self.server,
        )

    async def start(self) -> None:
        await self.engine.start()
        if self.tls is not None:
            self.port = self.server.add_secure_port(self.listen, self.tls.server_credentials())
        else:
            self.port = self.server.add_insecure_port(self.listen)
        if self.port == 0:
            raise OSError(f"cannot listen on {self.listen}")
        await self.server.start()
        await self._set_serving(True)
        if self.engine.store.is_postgres:
            # A file on local disk does not go silent the way a server across
            # a network does (and SQLite's one connection would queue pings).
            self.health_watch.start()
        if self.auth is not None:
            self._token_watch = asyncio.get_running_loop().create_task(
                self._watch_tokens(self.auth.book), name="token-file-watch"
            )

    async def _watch_tokens(self, book: TokenBook) -> None:
        """Re-read the token file even while no call arrives, so open streams
        of a removed credential end within about ``book.recheck_s``."""
        while True:
            await asyncio.sleep(book.recheck_s)
            book.maybe_reload()

    async def _set_serving(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", *SERVICE_NAMES):
            result = self.health.set(name, status)
            if result is not None:
                await result

    async def stop_serving(self, grace: float = 5.0) -> None:
        """Stop handing out jobs and serving; in-flight RPCs get ``grace`` to finish."""
        watch, self._token_watch = self._token_watch, None
        if watch is not None:
            watch.cancel()
        await self.health_watch.stop()
        await self._set_serving(False)
        await self.engine.dispatcher.stop()
        # Event watches never end on their own: end them now, not after the grace.
        self.engine.events.close_watches()
        await self.server.stop(grace)

    async def stop(self, grace: float = 5.0) -> None:
        """``stop_serving``, then stop the engine (its chores' supervisor stops before)."""
        await self.stop_serving(grace)
        await self.engine.stop()
