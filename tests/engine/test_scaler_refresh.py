"""The scaler's single-flight refresh: a failure reaches every caller waiting on it,
and one whose callers all went away is still collected, not left for the loop to
report as "Task exception was never retrieved"."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from coordinator.engine.scaling import ScalerQuery, Scaling


class Unreachable(Exception):
    pass


def _scaling(release: asyncio.Event) -> Scaling:
    scaling = Scaling(store=None, run_store=None, clock=None, settings=None, operations=None)  # type: ignore[arg-type]

    async def backlog(*args: Any) -> Any:
        await release.wait()
        raise Unreachable("the database went away")

    scaling.backlog = backlog  # type: ignore[method-assign]
    return scaling


def test_a_failed_refresh_reaches_its_caller() -> None:
    async def main() -> None:
        release = asyncio.Event()
        scaling = _scaling(release)
        caller = asyncio.ensure_future(scaling.scaler_figures(ScalerQuery(("a",))))
        await asyncio.sleep(0)
        release.set()
        with pytest.raises(Unreachable):
            await caller

    asyncio.run(main())


def test_a_failed_refresh_whose_callers_left_is_not_reported_unretrieved() -> None:
    reported: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))
        release = asyncio.Event()
        scaling = _scaling(release)
        caller = asyncio.ensure_future(scaling.scaler_figures(ScalerQuery(("a",))))
        await asyncio.sleep(0)
        caller.cancel()  # the only caller goes away; the refresh runs on, shielded
        await asyncio.gather(caller, return_exceptions=True)
        release.set()
        for _ in range(5):
            await asyncio.sleep(0)
        gc.collect()

    asyncio.run(main())
    gc.collect()
    assert [ctx.get("message") for ctx in reported] == []
