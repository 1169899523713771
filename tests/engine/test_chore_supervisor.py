"""The chore supervisor (coordinator/chores/__init__.py) on both stores: the
order it starts and stops the chores in, and start and stop idempotent.

The real chores run on a real, started engine; each chore's ``start`` and
``stop`` are wrapped to note which chores' tasks were alive when it was called.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

import coordinator.chores
from coordinator.chores import Chores
from coordinator.engine import Engine, EngineConfig
from coordinator.store import open_store

# (call, chore name, the chores whose task was alive when it was called)
Call = tuple[str, str, list[str]]


def _documented_order() -> list[str]:
    """The start order the supervisor's design note writes down."""
    doc = coordinator.chores.__doc__ or ""
    return re.findall(r"^\d+\. ``([a-z-]+)``", doc, re.MULTILINE)


def _running(chores: Chores) -> list[str]:
    return [c.name for c in chores.in_order if c.running]


def _alive(chores: Chores) -> list[str]:
    alive = {t.get_name() for t in _chore_tasks(chores)}
    return [c.name for c in chores.in_order if c.name in alive]


def _note_calls(chores: Chores, calls: list[Call]) -> None:
    for chore in chores.in_order:
        start, stop = chore.start, chore.stop

        def noted_start(name: str = chore.name, start: Callable[[], None] = start) -> None:
            calls.append(("start", name, _alive(chores)))
            start()

        async def noted_stop(
            name: str = chore.name, stop: Callable[[], Awaitable[None]] = stop
        ) -> None:
            calls.append(("stop", name, _alive(chores)))
            await stop()

        chore.start = noted_start  # type: ignore[method-assign]
        chore.stop = noted_stop  # type: ignore[method-assign]


def _chore_tasks(chores: Chores) -> list[asyncio.Task[object]]:
    names = {c.name for c in chores.in_order}
    return [t for t in asyncio.all_tasks() if t.get_name() in names and not t.done()]


def _run(url: str, scenario: Callable[[Engine, Chores], Awaitable[None]]) -> None:
    async def main() -> None:
        engine = Engine(open_store(url), EngineConfig())
        chores = Chores(engine)
        await engine.start()
        try:
            await scenario(engine, chores)
        finally:
            await chores.stop()
            await engine.stop()

    asyncio.run(main())


def test_every_chore_is_in_the_documented_order(store_url: str) -> None:
    async def scenario(engine: Engine, chores: Chores) -> None:
        expected = _documented_order()
        assert len(expected) == len(coordinator.chores.ChoresConfig.__dataclass_fields__)
        if engine.store.capabilities.database_clock:
            assert chores.clock_sync is not None
        else:
            # The clock-sync chore keeps a database clock; SQLite's coordinator has none.
            assert chores.clock_sync is None
            expected.remove("clock-sync")
        assert [c.name for c in chores.in_order] == expected

    _run(store_url, scenario)


def test_chores_start_in_order_and_stop_in_reverse_each_after_the_previous(
    store_url: str,
) -> None:
    async def scenario(engine: Engine, chores: Chores) -> None:
        names = [c.name for c in chores.in_order]
        calls: list[Call] = []
        _note_calls(chores, calls)
        await chores.start()
        assert _running(chores) == names
        await chores.stop()
        assert _running(chores) == []
        assert calls == [
            *(("start", name, names[:i]) for i, name in enumerate(names)),
            *(("stop", name, names[: i + 1]) for i, name in reversed(list(enumerate(names)))),
        ]

    _run(store_url, scenario)


def test_a_second_start_starts_nothing_more(store_url: str) -> None:
    async def scenario(engine: Engine, chores: Chores) -> None:
        await chores.start()
        tasks = _chore_tasks(chores)
        assert len(tasks) == len(chores.in_order)
        await chores.start()
        assert set(_chore_tasks(chores)) == set(tasks)
        assert _running(chores) == [c.name for c in chores.in_order]

    _run(store_url, scenario)


def test_stop_before_start_and_twice_is_harmless_and_start_then_works(store_url: str) -> None:
    async def scenario(engine: Engine, chores: Chores) -> None:
        await chores.stop()
        assert _running(chores) == []
        await chores.start()
        tasks = _chore_tasks(chores)
        assert len(tasks) == len(chores.in_order)
        await chores.stop()
        await chores.stop()
        assert _running(chores) == [] and all(t.done() for t in tasks)
        assert _chore_tasks(chores) == []

    _run(store_url, scenario)
