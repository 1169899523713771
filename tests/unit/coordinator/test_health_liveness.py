"""The health watch's liveness pings: a database that stops answering (no call
fails, calls just wait) turns health NOT_SERVING, and SERVING again once the
ping it sent is answered."""

from __future__ import annotations

import asyncio

from coordinator.api.health import HealthWatchConfig, StoreHealthWatch
from coordinator.errors import StoreUnavailable


def test_an_unanswered_ping_turns_health_not_serving_until_it_is_answered() -> None:
    async def main() -> tuple[list[bool], int]:
        serving: list[bool] = []
        changed = asyncio.Event()
        answer = asyncio.Event()
        pings = 0

        async def ping() -> None:
            nonlocal pings
            pings += 1
            if pings >= 3:  # the database goes silent at the third ping
                await answer.wait()

        async def set_serving(value: bool) -> None:
            serving.append(value)
            changed.set()

        watch = StoreHealthWatch(
            ping,
            set_serving,
            HealthWatchConfig(liveness_interval_s=0.01, liveness_timeout_s=0.05),
        )
        watch.start()
        await changed.wait()
        changed.clear()
        # Silent: NOT_SERVING, and no further ping while the first is unanswered.
        assert serving == [False]
        sent = pings
        await asyncio.sleep(0.2)
        assert pings == sent == 3
        answer.set()
        await changed.wait()
        await watch.stop()
        return serving, pings

    serving, pings = asyncio.run(main())
    assert serving == [False, True]
    assert pings == 3


def test_a_ping_that_fails_starts_the_probe_at_once() -> None:
    async def main() -> list[bool]:
        serving: list[bool] = []
        back = asyncio.Event()
        failures = 2

        async def ping() -> None:
            nonlocal failures
            if failures:
                failures -= 1
                raise StoreUnavailable("refused")

        async def set_serving(value: bool) -> None:
            serving.append(value)
            if value:
                back.set()

        watch = StoreHealthWatch(
            ping,
            set_serving,
            HealthWatchConfig(
                initial_interval_s=0.01,
                liveness_interval_s=0.01,
                liveness_timeout_s=10,
            ),
        )
        watch.start()
        await back.wait()
        await watch.stop()
        return serving

    assert asyncio.run(main()) == [False, True]


def test_stop_ends_the_watch_and_leaves_health_alone() -> None:
    async def main() -> list[bool]:
        serving: list[bool] = []

        async def ping() -> None:
            await asyncio.Event().wait()  # never answers

        async def set_serving(value: bool) -> None:
            serving.append(value)

        watch = StoreHealthWatch(
            ping,
            set_serving,
            HealthWatchConfig(liveness_interval_s=10, liveness_timeout_s=10),
        )
        watch.start()
        watch.start()
        await watch.stop()
        await watch.stop()
        return serving

    assert asyncio.run(main()) == []


def test_the_database_bounds_come_from_the_environment_and_the_flags(monkeypatch) -> None:
    from coordinator.__main__ import _parser
    from coordinator.settings import Settings
    from coordinator.store.liveness import ConnectionBounds

    monkeypatch.setenv("WFJOBS_DATABASE_TIMEOUT", "3.5")
    monkeypatch.setenv("WFJOBS_DATABASE_TCP_TIMEOUT", "20")
    monkeypatch.setenv("WFJOBS_STATEMENT_TIMEOUT", "0")
    settings = Settings.from_env()
    assert settings.connection_bounds() == ConnectionBounds(
        connect_timeout_s=4, tcp_timeout_s=20, statement_timeout_s=0, liveness_timeout_s=3.5
    )
    args = _parser(settings).parse_args(
        ["serve", "--database-timeout", "2", "--statement-timeout", "45"]
    )
    assert (args.database_timeout, args.database_tcp_timeout, args.statement_timeout) == (
        2.0,
        20.0,
        45.0,
    )


def test_database_bounds_out_of_range_name_their_flag() -> None:
    import dataclasses

    import pytest

    from coordinator.settings import Settings

    for field, flag in (
        ("database_timeout_s", "--database-timeout"),
        ("database_tcp_timeout_s", "--database-tcp-timeout"),
        ("statement_timeout_s", "--statement-timeout"),
    ):
        for value in (-1.0, float("nan"), 1e9):
            settings = dataclasses.replace(Settings(), **{field: value})
            with pytest.raises(ValueError, match=flag):
                settings.connection_bounds()
