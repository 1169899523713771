"""A chore that keeps failing (a database outage) logs the traceback once,
then a short line now and then, and its recovery once."""

from __future__ import annotations

import asyncio
import logging

import pytest

from coordinator.chores.loop import REPEAT_LOG_S, Chore
from coordinator.clock import ManualClock
from coordinator.errors import StoreUnavailable

RETRY_S = 2.0  # how often clock-sync retries while the database is away


class Flaky(Chore[int]):
    """Fails while ``script`` says so (True: fail); each run takes ``RETRY_S`` of the clock."""

    name = "flaky"

    def __init__(self, clock: ManualClock, script: list[bool]) -> None:
        super().__init__(clock)
        self.manual = clock
        self.script = script
        self.done = asyncio.Event()

    async def run_once(self, now: int | None = None) -> int:
        self.manual.advance(RETRY_S)
        if not self.script:
            self.done.set()
            await asyncio.Event().wait()  # idle until stopped
        if self.script.pop(0):
            raise StoreUnavailable("database unreachable: connection refused")
        return 1

    def delay_after(self, result: int | None) -> float:
        return 0.0


def _run(script: list[bool]) -> None:
    async def main() -> None:
        chore = Flaky(ManualClock(0), script)
        chore.start()
        try:
            await asyncio.wait_for(chore.done.wait(), 30)
        finally:
            await chore.stop()

    asyncio.run(main())


def test_an_outage_logs_one_traceback_then_rare_lines_then_one_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = 100  # 200 s of outage at one retry per 2 s
    caplog.set_level(logging.INFO, logger="coordinator.chores.loop")
    _run([True] * failures + [False, False])

    records = [r for r in caplog.records if r.name == "coordinator.chores.loop"]
    tracebacks = [r for r in records if r.exc_info]
    assert len(tracebacks) == 1
    assert tracebacks[0].getMessage() == "flaky run failed"
    still = [r.getMessage() for r in records if "still failing" in r.getMessage()]
    # First failure at 2 s, the last at 200 s: a line at 62, 122 and 182 s.
    assert len(still) == int((failures - 1) * RETRY_S // REPEAT_LOG_S) == 3
    assert all("StoreUnavailable: database unreachable" in line for line in still)
    assert not any(r.exc_info for r in records if "still failing" in r.getMessage())
    recovered = [r.getMessage() for r in records if "recovered" in r.getMessage()]
    assert recovered == [f"flaky recovered after {failures} failed run(s)"]
    assert len(records) == 1 + 3 + 1


def test_each_outage_gets_its_own_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="coordinator.chores.loop")
    _run([True, True, False, True, True, True, False])

    records = [r for r in caplog.records if r.name == "coordinator.chores.loop"]
    assert [r.getMessage() for r in records] == [
        "flaky run failed",
        "flaky recovered after 2 failed run(s)",
        "flaky run failed",
        "flaky recovered after 3 failed run(s)",
    ]
    assert [bool(r.exc_info) for r in records] == [True, False, True, False]
