"""A loop woken in the very tick it is stopped still stops.

Every coordinator loop sleeps on an event with a timeout and is stopped by a
cancel. ``asyncio.wait_for`` on Python 3.11 drops a cancel that arrives in the
tick its awaitable finishes, so a wake landing beside the stop (the wake
listener reconnecting as the engine stops) left the loop running and its
``stop`` waiting forever. Each test wakes the loop and stops it in one tick.
"""

from __future__ import annotations

import asyncio

from coordinator.chores.loop import Chore
from coordinator.clock import ManualClock
from coordinator.engine import Engine, EngineConfig
from coordinator.engine.sessions import WorkerSession
from coordinator.store import open_store

# Only turns a stop that never returns into a failure; a stop takes one tick.
STOP_BOUND_S = 30.0


class Sleepy(Chore[int]):
    """Runs instantly, then asks to sleep a minute; notes each run."""

    name = "sleepy"

    def __init__(self) -> None:
        super().__init__(ManualClock())
        self.ran = asyncio.Event()
        self.runs = 0

    async def run_once(self, now: int | None = None) -> int:
        self.runs += 1
        self.ran.set()
        return 1

    def delay_after(self, result: int | None) -> float:
        return 60.0


def test_a_chore_woken_in_the_tick_it_is_stopped_stops() -> None:
    async def main() -> None:
        chore = Sleepy()
        chore.start()
        # run_once returns straight into the sleep, in the same step.
        await chore.ran.wait()
        chore.wake()
        async with asyncio.timeout(STOP_BOUND_S):
            await chore.stop()
        assert not chore.running
        assert chore.runs == 1

    asyncio.run(main())


def test_the_dispatcher_woken_in_the_tick_it_is_stopped_stops(store_url: str) -> None:
    async def main() -> None:
        engine = Engine(open_store(store_url), EngineConfig())
        await engine.start()
        dispatcher = engine.dispatcher
        try:
            # A session waiting for work: the dispatcher sleeps with a timeout
            # (its idle poll) between passes over an empty store.
            session = WorkerSession(worker_id="w", job_types=frozenset({"noop"}), slots=5)
            engine.open_session(session)
            dispatcher.grant(session, 5)
            async with asyncio.timeout(STOP_BOUND_S):
                while dispatcher.passes == 0 or not _sleeping(dispatcher._wake):
                    await asyncio.sleep(0.01)
            passes = dispatcher.passes
            dispatcher.wake()
            async with asyncio.timeout(STOP_BOUND_S):
                await dispatcher.stop()
            assert dispatcher.passes == passes
        finally:
            await engine.stop()

    asyncio.run(main())


def _sleeping(wake: asyncio.Event) -> bool:
    """Someone waits on ``wake`` (asyncio keeps an Event's waiters in ``_waiters``)."""
    return bool(getattr(wake, "_waiters", ()))
