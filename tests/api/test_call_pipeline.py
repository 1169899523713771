"""The server's one interceptor (api/pipeline.py): a unary method's handler is
built once and kept, not rebuilt around the servicer on every call, and the
kept handler still maps errors and refuses undecodable bytes (a real
coordinator in this process, raw gRPC, both stores)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from coordinator.api import handlers
from coordinator.api.server import CoordinatorServer
from coordinator.engine import Engine
from coordinator.store import open_store
from workflowjobs.v1 import scheduler_service_pb2 as spb
from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc

MISSING = "0190b6e2-5c1a-7d3e-8f00-123456789abc"  # well formed, never stored
GET_JOB = "/workflowjobs.v1.JobSchedulerService/GetJob"


def test_a_unary_methods_handler_is_built_once_and_still_maps_errors(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[Any] = []
    make = grpc.unary_unary_rpc_method_handler

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return make(*args, **kwargs)

    async def main() -> None:
        server = CoordinatorServer(Engine(open_store(store_url)), "127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                stub = spb_grpc.JobSchedulerServiceStub(channel)
                raw = channel.unary_unary(GET_JOB)
                with pytest.raises(grpc.aio.AioRpcError) as first:
                    await stub.GetJob(spb.GetJobRequest(job_id=MISSING))
                assert first.value.code() == grpc.StatusCode.NOT_FOUND
                # Every way a handler gets built: grpc's maker, and the one rewrap uses.
                monkeypatch.setattr(grpc, "unary_unary_rpc_method_handler", counting)
                monkeypatch.setitem(handlers._MAKERS, "unary_unary", counting)
                for _ in range(5):
                    with pytest.raises(grpc.aio.AioRpcError) as again:
                        await stub.GetJob(spb.GetJobRequest(job_id=MISSING))
                    assert again.value.code() == grpc.StatusCode.NOT_FOUND
                    assert MISSING in (again.value.details() or "")
                with pytest.raises(grpc.aio.AioRpcError) as undecodable:
                    await raw(b"\xff\xff\xff")
                assert undecodable.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "GetJobRequest" in (undecodable.value.details() or "")
        finally:
            await server.stop(0)

    asyncio.run(main())
    # Six calls after the first, none rebuilt the handler around the servicer.
    assert built == []
