"""Lease heartbeats: one background task renews every lease the worker holds.

Each tick sends one ``WorkerService.Heartbeat`` carrying every held lease
(running jobs and finished jobs whose outcome is not yet recorded), chunked to
keep messages small. The coordinator answers per lease; the answers go back to
the worker through a callback. A handler can ask for an early tick with
``JobContext.heartbeat()``. With no leases held, ticks send nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence

import grpc

from workflowjobs.v1 import worker_service_pb2, worker_service_pb2_grpc

__all__ = ["Heartbeater", "HeartbeatResult"]

LeaseStatusCallback = Callable[[worker_service_pb2.LeaseRef, worker_service_pb2.LeaseStatus], None]

_CHUNK = 500


@dataclasses.dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """What one tick did."""

    sent: int = 0
    lost: int = 0
    cancel_requested: int = 0
    failed: bool = False


class Heartbeater:
    """Renews held leases on an interval.

    Args:
        stub: WorkerService stub.
        worker_id: Id sent with every heartbeat.
        leases: Returns the leases to renew now.
        on_status: Called with each lease and the coordinator's answer for it.
        interval: Returns the seconds to wait between ticks (read every tick).
        metadata: Metadata sent with every call.
        rpc_timeout: Deadline of one Heartbeat call, in seconds.
        logger: Where failures are logged.
    """

    def __init__(
        self,
        stub: worker_service_pb2_grpc.WorkerServiceStub,
        *,
        worker_id: str,
        leases: Callable[[], list[worker_service_pb2.LeaseRef]],
        on_status: LeaseStatusCallback,
        interval: Callable[[], float],
        metadata: Sequence[tuple[str, str]] = (),
        rpc_timeout: float = 10.0,
        logger: logging.Logger | None = None,
    ) -> None:
        self._stub = stub
        self._worker_id = worker_id
        self._leases = leases
        self._on_status = on_status
        self._interval = interval
        self._metadata = tuple(metadata)
        self._rpc_timeout = rpc_timeout
        self._logger = logger or logging.getLogger("worker_sdk.heartbeat")
        self._wake = asyncio.Event()
        self._send_now = False
        self._failing = False

    def trigger(self) -> None:
        """Ask for a tick now (call on the event loop)."""
        self._send_now = True
        self._wake.set()

    def reschedule(self) -> None:
        """Re-read the interval now, e.g. after the coordinator recommended one."""
        self._wake.set()

    async def run(self) -> None:
        """Tick until cancelled."""
        loop = asyncio.get_running_loop()
        last_tick = loop.time()
        while True:
            interval = self._interval()
            if self._failing:
                interval = min(interval, 1.0)
            wait = last_tick + interval - loop.time()
            if wait > 0 and not self._send_now:
                self._wake.clear()
                try:
                    async with asyncio.timeout(wait):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                else:
                    continue
            self._send_now = False
            last_tick = loop.time()
            await self.run_once()

    async def run_once(self) -> HeartbeatResult:
        """Send one round of heartbeats for every held lease."""
        leases = self._leases()
        if not leases:
            return HeartbeatResult()
        lost = cancel_requested = 0
        for start in range(0, len(leases), _CHUNK):
            chunk = leases[start : start + _CHUNK]
            request = worker_service_pb2.HeartbeatRequest(worker_id=self._worker_id, leases=chunk)
            try:
                response = await self._stub.Heartbeat(
                    request, timeout=self._rpc_timeout, metadata=self._metadata
                )
            except grpc.aio.AioRpcError as exc:
                log = self._logger.debug if self._failing else self._logger.warning
                log(
                    "heartbeat of %d lease(s) failed: %s: %s",
                    len(chunk),
                    exc.code().name,
                    exc.details(),
                )
                self._failing = True
                return HeartbeatResult(sent=start, failed=True)
            for ref, status in zip(chunk, response.leases, strict=False):
                if status.state == worker_service_pb2.LEASE_STATE_LOST:
                    lost += 1
                elif status.state == worker_service_pb2.LEASE_STATE_CANCEL_REQUESTED:
                    cancel_requested += 1
                self._on_status(ref, status)
        if self._failing:
            self._logger.info("heartbeats recovered")
        self._failing = False
        return HeartbeatResult(sent=len(leases), lost=lost, cancel_requested=cancel_requested)
