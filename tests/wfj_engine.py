"""An engine over a real store with a manual clock, driven pass by pass."""

from __future__ import annotations

import asyncio
import random

from coordinator.chores import Chores
from coordinator.clock import ManualClock
from coordinator.engine import Engine, EngineConfig, LeaseBatch, WorkerSession
from coordinator.store import open_store
from wfj_testing import T0, make_job

_CHORES: dict[int, tuple[Engine, Chores]] = {}


def chores_of(engine: Engine) -> Chores:
    """The chores of ``engine`` (built once, wired to it, not started: tests run them)."""
    held = _CHORES.get(id(engine))
    if held is None or held[0] is not engine:
        held = _CHORES[id(engine)] = (engine, Chores(engine))
    return held[1]


class Harness:
    def __init__(self, url: str) -> None:
        self.clock = ManualClock(T0)
        self.engine = Engine(
            open_store(url), EngineConfig(), clock=self.clock, rng=random.Random(7)
        )
        self.chores = chores_of(self.engine)

    async def enqueue(self, **fields) -> str:
        job = make_job(**fields)
        [(job_id, _, _)] = await self.engine.enqueue([job])
        return job_id

    async def lease(self, n: int = 10, types=("noop",), worker="w1") -> list[tuple[object, str]]:
        session = WorkerSession(worker, frozenset(types), max_batch_size=1000)
        self.engine.open_session(session)
        self.engine.grant(session, n)
        while await self.engine.dispatcher.run_pass():
            pass
        out = []
        # Taken off the outbox before the session closes: closing hands back
        # whatever a stream has not sent.
        while not session.outbox.empty():
            item = session.outbox.get_nowait()
            if isinstance(item, LeaseBatch):
                out.extend((row, item.lease_token) for row in item.jobs)
        self.engine.close_session(session)
        return out

    async def job(self, job_id: str):
        return await self.engine.get_job(job_id, with_attempts=True)

    def after_insert(self, callback) -> None:
        """Run ``callback`` on the event loop right after each insert of a
        single enqueue's commit returns, before the engine sees its result."""
        store = self.engine.store
        loop = asyncio.get_running_loop()
        threaded = store.job_insert_many

        def insert(*args, **kwargs):
            result = threaded(*args, **kwargs)
            loop.call_soon_threadsafe(callback)
            return result

        store.job_insert_many = insert  # type: ignore[method-assign]


def run(url: str, scenario) -> None:
    async def main() -> None:
        h = Harness(url)
        try:
            await scenario(h)
        finally:
            await h.engine.stop()

    asyncio.run(main())
