"""Builds the gRPC server: services, health, reflection, error mapping."""

from __future__ import annotations

import logging

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from coordinator import telemetry
from coordinator.api.admin import AdminServicer
from coordinator.api.errors import ErrorMappingInterceptor
from coordinator.api.scheduler import JobSchedulerServicer
from coordinator.api.worker import WorkerServicer
from coordinator.engine import Engine
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

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class CoordinatorServer:
    """The coordinator's gRPC server around one engine."""

    def __init__(self, engine: Engine, listen: str) -> None:
        self.engine = engine
        self.listen = listen
        self.port = 0
        self.health = health.aio.HealthServicer()
        self.server = grpc.aio.server(
            # Tracing (when on) is outermost, so RPC spans see every status code.
            interceptors=[*telemetry.server_interceptors(), ErrorMappingInterceptor()],
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
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
        wpb_grpc.add_WorkerServiceServicer_to_server(WorkerServicer(engine), self.server)
        apb_grpc.add_AdminServiceServicer_to_server(AdminServicer(engine), self.server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection(
            (
                *SERVICE_NAMES,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            self.server,
        )

    async def start(self) -> None:
        await self.engine.start()
        self.port = self.server.add_insecure_port(self.listen)
        if self.port == 0:
            raise OSError(f"cannot listen on {self.listen}")
        await self.server.start()
        await self._set_serving(True)

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

    async def stop(self, grace: float = 5.0) -> None:
        """Stop serving, let in-flight RPCs finish within ``grace``, stop the engine."""
        await self._set_serving(False)
        await self.engine.dispatcher.stop()
        await self.server.stop(grace)
        await self.engine.stop()
