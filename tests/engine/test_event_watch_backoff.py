"""A watcher whose read finds committed events held back above the release
horizon (PostgreSQL: an older transaction that wrote events is still open)
reads again on its own, after a capped doubling delay (``CappedBackoff``,
coordinator/engine/events.py), without waiting for a wake-up; a read that
finds nothing held back starts the delays over.

The older transaction is another store's, so its commit wakes nothing here:
only the watcher's own re-reads can find its events.

The test asserts on the delays the watcher schedules (read from its
``CappedBackoff``), not on the gaps between reads seen from outside: any
wake-up (this coordinator's own NOTIFY echoing back, say) may end a wait
early on a busy machine, and a read late by a loaded CPU says nothing about
the schedule.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from coordinator.backoff import CappedBackoff
from coordinator.engine import Engine, EngineConfig
from coordinator.engine import events as engine_events
from coordinator.engine.events import EventWatchConfig
from coordinator.model import EventCursor, EventFilter, JobEvent, JobEventKind
from coordinator.store import open_store
from coordinator.store.events import EventEntry
from wfj_testing import make_job

MIN_S, MAX_S = 0.05, 0.4
# Held-back reads before the older transaction commits.
HELD_BACK_READS = 7

Watch = AsyncIterator[tuple[list[JobEvent], EventCursor | None]]


def capped_doubling(count: int) -> list[float]:
    """The first ``count`` delays of a held-back episode: MIN_S doubling, held at MAX_S."""
    return [min(MIN_S * 2**n, MAX_S) for n in range(count)]


class NotedBackoff(CappedBackoff):
    """The watcher's backoff, noting each delay it hands out and each start-over."""

    decisions: list[float | str] = []

    def next_delay(self) -> float:
        delay = super().next_delay()
        self.decisions.append(delay)
        return delay

    def reset(self) -> None:
        super().reset()
        self.decisions.append("reset")


async def _held_back_episode(
    engine: Engine, url: str, watch: Watch, reads: list[int], count: int
) -> list[float | str]:
    """Hold a transaction with an event open until the watcher has re-read
    ``count`` times, then commit it: the watcher delivers its event and the later
    one. Returns what the watcher's backoff decided meanwhile."""
    [(first, _, _)] = await engine.enqueue([make_job(due_at=0)])
    [(events, _)] = [await anext(watch)]
    assert [e.job_id for e in events] == [first]
    reads.clear()
    NotedBackoff.decisions.clear()
    side = open_store(url)
    try:
        with side.engine.connect() as conn:
            tx = conn.begin()
            # The lower id, left uncommitted; then a later event commits here.
            side._events.record_events(
                conn, [EventEntry(first, JobEventKind.RETRY_SCHEDULED)], 0, bump=True
            )
            [(second, _, _)] = await engine.enqueue([make_job(due_at=0)])
            delivered = asyncio.ensure_future(anext(watch))
            # A generous bound: the delays add up to about 2 s.
            deadline = time.monotonic() + 60
            while len(reads) < count and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            # Nothing commits meanwhile that the watcher could see: it re-read on its own.
            assert len(reads) >= count, f"only {len(reads)} re-reads while events were held back"
            assert not delivered.done()
            decided = list(NotedBackoff.decisions)
            tx.commit()
        events, _ = await asyncio.wait_for(delivered, 30)
    finally:
        side.dispose()
    assert [(e.job_id, e.kind) for e in events] == [
        (first, JobEventKind.RETRY_SCHEDULED),
        (second, JobEventKind.ENQUEUED),
    ]
    return decided


def test_a_held_back_read_is_retried_after_capped_doubling_delays(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer: no event is ever held back")
    monkeypatch.setattr(engine_events, "CappedBackoff", NotedBackoff)

    async def main() -> None:
        config = EngineConfig(events=EventWatchConfig(held_back_min_s=MIN_S, held_back_max_s=MAX_S))
        engine = Engine(open_store(store_url), config)
        await engine.start()
        reads: list[int] = []  # one entry per read that found events held back
        store_read = engine.store.event_read

        def noted_read(*args: object):  # type: ignore[no-untyped-def]
            page = store_read(*args)  # type: ignore[arg-type]
            if page.held_back:
                reads.append(1)
            return page

        engine.store.event_read = noted_read  # type: ignore[method-assign]
        watch = engine.events.watch(EventFilter(), None)
        try:
            assert (await anext(watch))[0] == []
            for _ in range(2):
                decided = await _held_back_episode(engine, store_url, watch, reads, HELD_BACK_READS)
                # The read that delivered the last episode's events started the
                # delays over. The shared reader reads ahead of the watcher's
                # client, so that start-over may come before the decisions were
                # cleared; either way the delays then begin at MIN_S again (not
                # starting over, the second episode would wait MAX_S first) ...
                delays = decided[1:] if decided[:1] == ["reset"] else decided
                assert "reset" not in delays, decided
                # ... and every held-back read waited one delay more: doubling
                # from MIN_S, held at MAX_S (doubling on would wait 0.8 s, 1.6 s).
                # (The last read's delay may not be decided yet when it is counted.)
                assert len(delays) >= HELD_BACK_READS - 1, decided
                assert delays == capped_doubling(len(delays)), decided
        finally:
            await watch.aclose()
            await engine.stop()

    asyncio.run(main())
