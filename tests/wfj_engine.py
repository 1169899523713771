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
        on_loop = store.job_insert_on_loop

        async def insert_on_loop(*args, **kwargs):
            result = await on_loop(*args, **kwargs)
            if result is not None:
                callback()  # the engine resumes only after this returns
            return result

        store.job_insert_on_loop = insert_on_loop  # type: ignore[method-assign]


async def refused_in_a_shared_commit(h: Harness, held, calls: list[int], release) -> None:
    """Enqueue four good jobs and one of job type ``refused`` (which the database
    refuses) while ``held`` (a started enqueue whose commit waits for
    ``release()``) is in flight, so that the five share the next commit; check
    that only the refused one's caller fails."""
    from coordinator.errors import InvalidArgument
    from coordinator.model import JobStatus

    good = [make_job() for _ in range(4)]
    bad = make_job(job_type="refused")
    callers = [asyncio.create_task(h.engine.enqueue_one(j)) for j in (*good[:2], bad, *good[2:])]
    await asyncio.sleep(0)  # every caller has queued behind the held commit
    release()
    await held
    answers = await asyncio.gather(*callers, return_exceptions=True)
    assert calls[1] == 5  # the five shared one commit, which the database refused
    refused = answers.pop(2)
    assert isinstance(refused, InvalidArgument), refused
    assert "the database refused a value" in str(refused)
    assert [row.id for row, _ in answers] == [j.id for j in good]
    for job in good:
        row, _ = await h.job(job.id)
        assert row.status == JobStatus.PENDING
    try:
        await h.job(bad.id)
    except Exception as e:  # noqa: BLE001 - the refused job was never stored
        assert "not found" in str(e)
    else:
        raise AssertionError("the refused job was stored")


def run(url: str, scenario) -> None:
    async def main() -> None:
        h = Harness(url)
        try:
            await scenario(h)
        finally:
            await h.engine.stop()

    asyncio.run(main())
