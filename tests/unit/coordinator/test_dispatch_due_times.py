"""A due time that passes while an acquisition pass runs gets a pass of its own.

The pass looked for jobs due by its start; a job that came due after that was
not eligible to it, so the dispatcher must not drop that due time and sleep
until the safety-net poll.
"""

from __future__ import annotations

import asyncio

from coordinator.clock import ManualClock
from coordinator.engine.dispatch import AcquisitionBatch, Dispatcher
from coordinator.engine.sessions import WorkerSession


def test_a_due_time_passing_during_a_pass_gets_its_own_pass() -> None:
    asyncio.run(_scenario())


async def _scenario() -> None:
    clock = ManualClock(1_000_000_000_000)
    passes: list[int] = []
    second_pass = asyncio.Event()

    class Acquisition:
        async def lease(self, job_types, tenants, owners, token, now):  # noqa: ANN001
            passes.append(now)
            if len(passes) == 1:
                clock.advance(
                    2.0
                )  # the first pass is slow: the job due at +1 s comes due meanwhile
            else:
                second_pass.set()
            return AcquisitionBatch([])

        async def hand_back(self, refs):  # noqa: ANN001
            return None

    dispatcher = Dispatcher(clock=clock, acquisition=Acquisition(), idle_poll_s=600.0)
    session = WorkerSession(worker_id="w", job_types=frozenset({"t"}), slots=1)
    session.credits = 1
    dispatcher.add_session(session)
    dispatcher.wake_at([clock.now_us() + 1_000_000])
    dispatcher.start()
    try:
        # With the due time dropped, the next pass would come at the 600 s poll.
        await asyncio.wait_for(second_pass.wait(), timeout=30)
    finally:
        await dispatcher.stop()
    assert len(passes) >= 2
    assert passes[1] >= passes[0] + 2_000_000
