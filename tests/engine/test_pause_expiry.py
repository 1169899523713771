"""A timed pause lifts at its expiry, on a coordinator started after it was set too.

``Engine.pause`` wakes the dispatcher that set it at the expiry; a coordinator
started later reads the active pauses' expiries at start
(``Pauses.wake_at_pause_expiries``), so the held job goes out at the expiry,
not at the 15 s idle poll.
"""

from __future__ import annotations

import asyncio

from coordinator.engine import Engine, EngineConfig, LeaseBatch, WorkerSession
from coordinator.model import PauseKind, PauseScope
from coordinator.store import open_store
from wfj_testing import make_job

US = 1_000_000
# Far below the 15 s idle poll, far above an honest wake-up.
PROMPT_S = 10.0


def test_a_timed_pause_lifts_at_its_expiry_after_a_restart(store_url: str) -> None:
    async def main() -> None:
        first = Engine(open_store(store_url), EngineConfig())
        await first.start()
        now = first.clock.now_us()
        expiry = now + int(1.5 * US)
        job = make_job(job_type="held", due_at=0)
        await first.enqueue([job])
        await first.pause(PauseScope(PauseKind.JOB_TYPE, "", "held"), "ana", "", expiry)
        await first.stop()

        second = Engine(open_store(store_url), EngineConfig())
        assert second.config.idle_poll_s >= 15.0
        await second.start()
        try:
            session = WorkerSession("w1", frozenset({"held"}), max_batch_size=10)
            second.open_session(session)
            second.grant(session, 1)
            while True:
                item = await asyncio.wait_for(session.outbox.get(), PROMPT_S)
                if isinstance(item, LeaseBatch):
                    break
            assert [r.id for r in item.jobs] == [job.id]
            # Leased once the pause had lifted, at its expiry (not before).
            assert item.jobs[0].started_at is not None and item.jobs[0].started_at >= expiry
        finally:
            await second.stop()

    asyncio.run(main())


def test_the_store_lists_each_future_expiry_of_active_pauses_once(store_url: str) -> None:
    store = open_store(store_url)
    try:
        now = 1_000 * US
        for pause_id, value, expires in (
            ("p1", "a", now + 2 * US),
            ("p2", "b", now + US),
            ("p3", "c", now + 2 * US),
            ("p4", "d", None),
            ("p5", "e", now - US),
        ):
            scope = PauseScope(PauseKind.JOB_TYPE, "", value)
            store.pause_create(pause_id, scope, "ana", "", expires, now - 2 * US)
        store.pause_lift(PauseScope(PauseKind.JOB_TYPE, "", "b"), "ana", now)
        assert store.pause_expiries(now) == [now + 2 * US]
        assert store.pause_expiries(now - 2 * US) == [now - US, now + 2 * US]
    finally:
        store.dispose()
