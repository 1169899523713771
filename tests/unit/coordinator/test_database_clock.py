"""The engine's clock on PostgreSQL: the database's time, read through an offset."""

from __future__ import annotations

import types

import pytest

import coordinator.clock as clock_module
from coordinator.clock import DatabaseClock

OFFSET_US = 30_000_000  # the database is 30 s ahead of this host's wall clock


class FakeTime:
    """A monotonic clock tests move, and a wall clock ``wall_minus_mono`` apart from it."""

    def __init__(self) -> None:
        self.mono_us = 1_000_000
        self.wall_minus_mono_us = 1_700_000_000_000_000
        # The database's clock: OFFSET_US ahead of the host's wall clock at the start.
        self.database_minus_mono_us = self.wall_minus_mono_us + OFFSET_US

    def monotonic_ns(self) -> int:
        return self.mono_us * 1000

    def time_ns(self) -> int:
        return (self.mono_us + self.wall_minus_mono_us) * 1000

    def database_us(self) -> int:
        return self.mono_us + self.database_minus_mono_us


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(
        clock_module,
        "time",
        types.SimpleNamespace(monotonic_ns=fake.monotonic_ns, time_ns=fake.time_ns),
    )
    return fake


def test_before_a_sync_it_reads_the_host_wall_clock(fake: FakeTime) -> None:
    clock = DatabaseClock(fake.database_us)
    assert clock.now_us() == fake.time_ns() // 1000
    assert clock.uncertainty_us is None


def test_after_a_sync_it_reads_the_database_and_ignores_wall_clock_steps(fake: FakeTime) -> None:
    clock = DatabaseClock(fake.database_us)
    clock.sync()
    assert clock.now_us() == fake.database_us()
    assert clock.host_skew_us == OFFSET_US
    fake.wall_minus_mono_us -= 3_600_000_000  # the host's clock is stepped back an hour
    fake.mono_us += 5_000_000
    assert clock.now_us() == fake.database_us()


def test_the_sample_with_the_shortest_round_trip_sets_the_offset(fake: FakeTime) -> None:
    # (round trip, error of the database's answer) per sample, in µs.
    samples = iter([(10_000, 4_000), (1_000, 300), (5_000, -2_000)])

    def read() -> int:
        round_trip, error = next(samples)
        fake.mono_us += round_trip // 2
        value = fake.database_us() + error
        fake.mono_us += round_trip // 2
        return value

    clock = DatabaseClock(read, samples=3)
    assert clock.sync() == 500
    assert clock.now_us() == fake.database_us() + 300
