"""``serve`` (coordinator/__main__.py) starts the chores after the engine and
before the gRPC port, and on SIGTERM stops them after the port and before the
engine, as its docstring writes down.

``serve`` runs in this process on a SQLite file until the test sends it
SIGTERM; the real engine, chores and server are wrapped to note when each
start and stop begins and ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from coordinator.__main__ import serve
from coordinator.api.server import CoordinatorServer
from coordinator.chores import Chores
from coordinator.engine import Engine
from coordinator.settings import Settings

Method = Callable[..., Awaitable[None]]


def _note(calls: list[str], name: str, method: Method) -> Method:
    @functools.wraps(method)
    async def noted(self: Any, *args: Any) -> None:
        calls.append(f"{name} begins")
        await method(self, *args)
        calls.append(f"{name} ends")

    return noted


def _serve_until_sigterm(tmp_path: Path, calls: list[str]) -> None:
    settings = dataclasses.replace(
        Settings(),
        listen="127.0.0.1:0",
        database_url=f"sqlite:///{tmp_path / 'wfjobs.db'}",
        migrate_on_start=True,
        drain_timeout_s=0.0,
    )

    async def main() -> None:
        served = asyncio.create_task(serve(settings))
        while "server.start ends" not in calls:
            assert not served.done(), served.exception()
            await asyncio.sleep(0.01)
        # serve installs its handlers before it next yields; never SIGTERM this
        # process without them.
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(served, 60)

    asyncio.run(main())


def test_serve_starts_the_chores_after_the_engine_and_stops_them_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    for cls, method, name in (
        (Engine, "start", "engine.start"),
        (Engine, "stop", "engine.stop"),
        (Chores, "start", "chores.start"),
        (Chores, "stop", "chores.stop"),
        (CoordinatorServer, "start", "server.start"),
        (CoordinatorServer, "stop_serving", "server.stop_serving"),
    ):
        monkeypatch.setattr(cls, method, _note(calls, name, getattr(cls, method)))
    _serve_until_sigterm(tmp_path, calls)

    def first(call: str) -> int:
        return calls.index(call)

    # Start: the engine, then the chores, then the port.
    assert first("engine.start ends") < first("chores.start begins")
    assert first("chores.start ends") < first("server.start begins")
    # Stop: the port, then the chores, then the engine; each once.
    assert first("server.stop_serving ends") < first("chores.stop begins")
    assert first("chores.stop ends") < first("engine.stop begins")
    assert calls.count("chores.start begins") == calls.count("chores.stop begins") == 1
    assert calls.count("engine.stop begins") == 1
    assert calls[-1] == "engine.stop ends"
