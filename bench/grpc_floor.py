"""What one unary call costs a bare grpc.aio server on this machine.

    python -m bench.grpc_floor serve PORT     (the server process)

The coordinator's cost per job at a steady rate is compared with the cost of
the cheapest call grpc.aio can serve here: the standard health service's
`Check`, on a server with nothing else registered, no interceptor and no
database. Its process CPU (user + system) over an open-loop run of `Check`
calls at the same rate, divided by the calls, is the floor a coordinator in
the path pays for each unary call before any of its own work; a job at that
rate costs one unary `Enqueue` and three stream messages besides.
"""

from __future__ import annotations

import asyncio
import socket
import sys

import grpc
import psutil
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from bench.processes import ManagedProcess


async def serve(port: int) -> None:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def cpu_per_call_us(rate: int, seconds: float) -> float:
    """Server CPU µs per `Check` call, offered open-loop at `rate` calls/s."""
    from bench.latency import offer_load

    port = _free_port()
    process = ManagedProcess(
        "grpc-floor",
        ["python", "-m", "bench.grpc_floor", "serve", str(port)],
        deadline_s=seconds + 120,
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            async with asyncio.timeout(30):
                await channel.channel_ready()
            stub = health_pb2_grpc.HealthStub(channel)
            request = health_pb2.HealthCheckRequest()

            async def send(_payload: bytes) -> object:
                return await stub.Check(request, timeout=30)

            await send(b"")
            server = psutil.Process(process.pid)
            before = server.cpu_times()
            total, _, failed = await offer_load(send, rate, seconds)
            after = server.cpu_times()
        used = (after.user + after.system) - (before.user + before.system)
        return used / max(total - failed, 1) * 1e6
    finally:
        process.stop()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "serve":
        sys.exit("usage: python -m bench.grpc_floor serve PORT")
    asyncio.run(serve(int(sys.argv[2])))
