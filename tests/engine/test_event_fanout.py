"""Watchers of one coordinator share one reader of the live tail
(``LiveTail``, coordinator/engine/events.py): the log is read without a
filter, each watcher's filter is applied in memory; a watcher that falls
behind leaves the reader and misses nothing; one resuming from an old cursor
catches up alone, then joins. Both stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from coordinator.engine import Engine, EngineConfig
from coordinator.engine.events import EventWatchConfig
from coordinator.model import EventCursor, EventFilter, JobEvent, JobEventKind
from coordinator.store import open_store
from wfj_testing import make_job

Watch = AsyncIterator[tuple[list[JobEvent], EventCursor | None]]
ENQUEUED = JobEventKind.ENQUEUED


def _engine(url: str, **events: int) -> tuple[Engine, list[EventFilter]]:
    """An engine whose store notes the filter of every log read."""
    engine = Engine(open_store(url), EngineConfig(events=EventWatchConfig(**events)))
    filters: list[EventFilter] = []
    read = engine.store.event_read

    def noted(flt: EventFilter, *args: object):  # type: ignore[no-untyped-def]
        filters.append(flt)
        return read(flt, *args)  # type: ignore[arg-type]

    engine.store.event_read = noted  # type: ignore[method-assign]
    return engine, filters


async def _take(watch: Watch, count: int, timeout: float = 20) -> list[JobEvent]:
    got: list[JobEvent] = []
    while len(got) < count:
        events, _ = await asyncio.wait_for(anext(watch), timeout)
        got.extend(events)
    return got


async def _enqueue(engine: Engine, tenants: list[str]) -> list[str]:
    results = await engine.enqueue([make_job(tenant_id=t, due_at=0) for t in tenants])
    return [job_id for job_id, _, _ in results]


def test_watchers_at_the_tail_share_one_unfiltered_read(store_url: str) -> None:
    async def main() -> None:
        engine, filters = _engine(store_url)
        await engine.start()
        tenants = [f"t{i}" for i in range(8)]
        watches: list[Watch] = [
            engine.events.watch(EventFilter(tenant_id=t), None) for t in tenants
        ]
        everything = engine.events.watch(EventFilter(), None)
        try:
            for watch in [*watches, everything]:
                assert (await anext(watch))[0] == []
            filters.clear()
            ids: list[str] = []
            for _ in range(3):
                ids += await _enqueue(engine, tenants * 2)
            by_tenant = {t: [j for k, j in enumerate(ids) if tenants[k % 8] == t] for t in tenants}
            for tenant, watch in zip(tenants, watches, strict=True):
                got = await _take(watch, len(by_tenant[tenant]))
                assert [e.job_id for e in got] == by_tenant[tenant]
                assert {(e.tenant_id, e.kind) for e in got} == {(tenant, ENQUEUED)}
            assert [e.job_id for e in await _take(everything, len(ids))] == ids
            # Nine watchers, and every read of the log was the shared, unfiltered one.
            assert filters and set(filters) == {EventFilter()}
        finally:
            for watch in [*watches, everything]:
                await watch.aclose()
            await engine.stop()

    asyncio.run(main())


def test_a_watcher_that_falls_behind_reads_alone_and_misses_nothing(store_url: str) -> None:
    async def main() -> None:
        engine, filters = _engine(store_url, watcher_buffer_events=5)
        await engine.start()
        slow_filter = EventFilter(kinds=(ENQUEUED,))
        fast = engine.events.watch(EventFilter(), None)
        slow = engine.events.watch(slow_filter, None)
        try:
            assert (await anext(fast))[0] == [] and (await anext(slow))[0] == []
            ids: list[str] = []
            for _ in range(4):
                ids += await _enqueue(engine, ["a"] * 4)
                # The fast watcher takes each batch; the slow one takes nothing yet.
                got = await _take(fast, 4)
                assert [e.job_id for e in got] == ids[-4:]
            assert slow_filter not in filters  # not yet: it was fed from memory
            got = await _take(slow, len(ids))
            assert [e.job_id for e in got] == ids  # every event, once, in order
            # More than 5 waited: it left the shared reader and read on its own.
            assert slow_filter in filters
            more = await _enqueue(engine, ["a"] * 3)
            assert [e.job_id for e in await _take(slow, 3)] == more
            assert [e.job_id for e in await _take(fast, 3)] == more
        finally:
            await fast.aclose()
            await slow.aclose()
            await engine.stop()

    asyncio.run(main())


def test_a_watcher_resuming_from_an_old_cursor_catches_up_then_joins(store_url: str) -> None:
    async def main() -> None:
        engine, filters = _engine(store_url, page_size=4, recent_events=6)
        await engine.start()
        tail = engine.events.watch(EventFilter(), None)
        resumed: Watch | None = None
        try:
            assert (await anext(tail))[0] == []
            first = await _enqueue(engine, ["a"] * 10)
            seen = await _take(tail, 10)
            cursor = seen[2].cursor  # resume after the third event
            later = await _enqueue(engine, ["a"] * 10)
            assert len(await _take(tail, 10)) == 10
            filters.clear()
            resumed_filter = EventFilter(tenant_id="a")
            resumed = engine.events.watch(resumed_filter, cursor)
            assert (await anext(resumed))[0] == []
            got = await _take(resumed, 17)
            assert [e.job_id for e in got] == first[3:] + later
            # It read alone (the reader keeps only the last 6 events) ...
            assert resumed_filter in filters
            filters.clear()
            newest = await _enqueue(engine, ["a"] * 3)
            assert [e.job_id for e in await _take(resumed, 3)] == newest
            # ... then joined the shared reader: no read of its own since.
            assert set(filters) == {EventFilter()}
        finally:
            if resumed is not None:
                await resumed.aclose()
            await tail.aclose()
            await engine.stop()

    asyncio.run(main())


def test_filters_in_memory_match_what_the_store_filters(store_url: str) -> None:
    """``event_matches`` keeps exactly the events the store's filtered read returns."""
    from coordinator.engine.events import event_matches

    async def main() -> None:
        engine = Engine(open_store(store_url))
        await engine.start()
        try:
            jobs = [
                make_job(
                    tenant_id=t,
                    job_type=k,
                    definition_id=d,
                    instance_id=f"i-{n % 3}",
                    correlation_id=f"c-{n % 2}",
                    due_at=0,
                )
                for n, (t, k, d) in enumerate(
                    (t, k, d) for t in ("a", "b") for k in ("x", "y") for d in ("d1", "d2")
                )
            ]
            ids = [job_id for job_id, _, _ in await engine.enqueue(jobs)]
            everything = engine.store.event_read(EventFilter(), None, 1000).events
            assert len(everything) == len(ids)
            filters = [
                EventFilter(tenant_id="a"),
                EventFilter(job_type="y"),
                EventFilter(definition_id="d2"),
                EventFilter(instance_id="i-1"),
                EventFilter(correlation_id="c-0"),
                EventFilter(job_id=ids[5]),
                EventFilter(kinds=(JobEventKind.COMPLETED,)),
                EventFilter(kinds=(ENQUEUED,)),
                EventFilter(tenant_id="b", job_type="x", definition_id="d1"),
                EventFilter(tenant_id="nobody"),
            ]
            for flt in filters:
                stored = [e.cursor for e in engine.store.event_read(flt, None, 1000).events]
                in_memory = [e.cursor for e in everything if event_matches(flt, e)]
                assert in_memory == stored, flt
        finally:
            await engine.stop()

    asyncio.run(main())
