"""A watcher whose read finds committed events held back above the release
horizon (PostgreSQL: an older transaction that wrote events is still open)
reads again on its own, after a capped doubling delay (``CappedBackoff``,
coordinator/engine/events.py), without waiting for a wake-up; a read that
finds nothing held back starts the delays over.

The older transaction is another store's, so its commit wakes nothing here:
only the watcher's own re-reads can find its events.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from coordinator.engine import Engine, EngineConfig
from coordinator.engine.events import EventWatchConfig
from coordinator.model import EventCursor, EventFilter, JobEvent, JobEventKind
from coordinator.store import open_store
from coordinator.store.events import EventEntry
from wfj_testing import make_job

MIN_S, MAX_S = 0.05, 0.4
# First and later re-reads: MIN_S doubling, held at MAX_S.
DELAYS = (0.05, 0.1, 0.2, 0.4, 0.4, 0.4)

Watch = AsyncIterator[tuple[list[JobEvent], EventCursor | None]]


async def _held_back_episode(
    engine: Engine, url: str, watch: Watch, reads: list[float], count: int
) -> None:
    """Hold a transaction with an event open until the watcher has re-read
    ``count`` times, then commit it: the watcher delivers its event and the later one."""
    [(first, _, _)] = await engine.enqueue([make_job(due_at=0)])
    [(events, _)] = [await anext(watch)]
    assert [e.job_id for e in events] == [first]
    reads.clear()
    side = open_store(url)
    try:
        with side.engine.connect() as conn:
            tx = conn.begin()
            # The lower id, left uncommitted; then a later event commits here.
            side._record_events(
                conn, [EventEntry(first, JobEventKind.RETRY_SCHEDULED)], 0, bump=True
            )
            [(second, _, _)] = await engine.enqueue([make_job(due_at=0)])
            delivered = asyncio.ensure_future(anext(watch))
            deadline = time.monotonic() + 30
            while len(reads) < count and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert not delivered.done()
            tx.commit()
        events, _ = await asyncio.wait_for(delivered, 10)
    finally:
        side.dispose()
    assert [(e.job_id, e.kind) for e in events] == [
        (first, JobEventKind.RETRY_SCHEDULED),
        (second, JobEventKind.ENQUEUED),
    ]


def test_a_held_back_read_is_retried_after_capped_doubling_delays(store_url: str) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer: no event is ever held back")

    async def main() -> None:
        config = EngineConfig(events=EventWatchConfig(held_back_min_s=MIN_S, held_back_max_s=MAX_S))
        engine = Engine(open_store(store_url), config)
        await engine.start()
        reads: list[float] = []  # when each read that found events held back returned
        store_read = engine.store.event_read

        def noted_read(*args: object):  # type: ignore[no-untyped-def]
            page = store_read(*args)  # type: ignore[arg-type]
            if page.held_back:
                reads.append(time.monotonic())
            return page

        engine.store.event_read = noted_read  # type: ignore[method-assign]
        watch = engine.events.watch(EventFilter(), None)
        try:
            assert (await anext(watch))[0] == []
            for _ in range(2):
                await _held_back_episode(engine, store_url, watch, reads, len(DELAYS) + 1)
                gaps = [b - a for a, b in zip(reads, reads[1:], strict=False)]
                # Never sooner than the delay (a read follows each on its own) ...
                for gap, delay in zip(gaps, DELAYS, strict=False):
                    assert gap >= delay - 0.005, (gaps, DELAYS)
                # ... starting over at MIN_S (the second episode follows a read
                # that delivered; not starting over would wait MAX_S), and held
                # at MAX_S: doubling on would wait 0.8 s and 1.6 s for the last two.
                assert gaps[0] < 0.25, gaps
                assert gaps[-1] + gaps[-2] < 1.2, gaps
        finally:
            await watch.aclose()
            await engine.stop()

    asyncio.run(main())
