"""The SDK's heartbeat loop, rescheduled in the very tick it is cancelled,
still ends (``asyncio.wait_for`` on Python 3.11 dropped that cancel, and the
worker's shutdown waited for a loop that went on ticking)."""

from __future__ import annotations

import asyncio

from worker_sdk._heartbeat import Heartbeater

# Only turns a cancel that is never delivered into a failure; it takes one tick.
STOP_BOUND_S = 30.0


def test_a_heartbeat_loop_rescheduled_in_the_tick_it_is_cancelled_ends() -> None:
    async def main() -> None:
        reads = 0

        def interval() -> float:
            nonlocal reads
            reads += 1
            return 60.0

        beater = Heartbeater(
            None,  # type: ignore[arg-type]  # with no leases held a tick sends nothing
            worker_id="w",
            leases=list,
            on_status=lambda lease, status: None,
            interval=interval,
        )
        task = asyncio.create_task(beater.run())
        while reads == 0:
            await asyncio.sleep(0)
        beater.reschedule()
        task.cancel()
        async with asyncio.timeout(STOP_BOUND_S):
            await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled()
        assert reads == 1

    asyncio.run(main())
