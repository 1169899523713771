"""The coordinator's wait-and-retry loops (store health probe, wake listener
reconnect) wait by one capped exponential backoff."""

from __future__ import annotations

import asyncio
import math

import psycopg
import pytest

from coordinator.api import health
from coordinator.backoff import CappedBackoff
from coordinator.errors import StoreUnavailable
from coordinator.store import notify


def test_delays_double_up_to_the_cap_and_start_over_after_a_success() -> None:
    backoff = CappedBackoff(0.1, 1.0)
    assert [backoff.next_delay() for _ in range(6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert backoff.failures == 6
    backoff.reset()
    assert (backoff.failures, backoff.next_delay()) == (0, 0.1)


def test_a_long_outage_stays_at_the_cap() -> None:
    backoff = CappedBackoff(0.5, 30.0, multiplier=1e300)
    delays = [backoff.next_delay() for _ in range(10_000)]
    assert delays[0] == 0.5 and set(delays[1:]) == {30.0}
    assert all(math.isfinite(d) for d in delays)


@pytest.mark.parametrize(
    ("initial", "maximum", "multiplier"), [(0, 1, 2), (2, 1, 2), (0.1, 1, 0.5), (-1, 1, 2)]
)
def test_an_unusable_setting_is_refused(initial: float, maximum: float, multiplier: float) -> None:
    with pytest.raises(ValueError, match="initial_s"):
        CappedBackoff(initial, maximum, multiplier)


def test_the_health_probe_waits_by_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        waits.append(delay)
        await real_sleep(0)

    async def main() -> health.ProbeResult:
        failures = iter(range(5))
        serving: list[bool] = []

        async def ping() -> None:
            if next(failures, None) is not None:
                raise StoreUnavailable("database away")

        async def set_serving(value: bool) -> None:
            serving.append(value)

        watch = health.StoreHealthWatch(
            ping, set_serving, health.HealthWatchConfig(initial_interval_s=0.2, max_interval_s=1.0)
        )
        monkeypatch.setattr(health.asyncio, "sleep", sleep)
        result = await watch.run_once()
        assert serving == [False, True]
        return result

    assert asyncio.run(main()).pings == 6
    assert waits == pytest.approx([0.2, 0.4, 0.8, 1.0, 1.0])


def test_the_wake_listener_reconnects_by_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    listener = notify.WakeListener("postgresql://root@127.0.0.1:1/none", lambda due: None)
    waits: list[float] = []

    def refuse(*args: object, **kwargs: object) -> psycopg.Connection:
        raise psycopg.OperationalError("connection refused")

    def wait(delay: float) -> bool:
        waits.append(delay)
        if len(waits) == 8:
            listener._stop.set()
        return listener._stop.is_set()

    monkeypatch.setattr(notify.psycopg, "connect", refuse)
    monkeypatch.setattr(listener._stop, "wait", wait)
    listener._run()
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0])
