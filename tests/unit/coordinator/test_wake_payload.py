"""Cross-replica wake-up payloads carry every due time of a batch."""

from __future__ import annotations

from coordinator.store.base import WAKE_GRAIN_US, WAKE_MAX_TIMES, wake_payload
from coordinator.store.notify import _parse_due


def test_every_due_time_travels_rounded_up_and_deduplicated() -> None:
    times = [5 * WAKE_GRAIN_US + 1, 5 * WAKE_GRAIN_US + 2, 9 * WAKE_GRAIN_US]
    assert _parse_due(wake_payload(times)) == [6 * WAKE_GRAIN_US, 9 * WAKE_GRAIN_US]


def test_a_huge_batch_keeps_its_earliest_and_latest_and_fits_a_notification() -> None:
    times = [i * WAKE_GRAIN_US for i in range(1, 10_000)]
    payload = wake_payload(times)
    parsed = _parse_due(payload)
    assert len(payload) < 8000
    assert len(parsed) == WAKE_MAX_TIMES
    assert (parsed[0], parsed[-1]) == (times[0], times[-1])


def test_special_payloads() -> None:
    assert _parse_due("limits") == [-1]
    assert _parse_due("flags") == [-2]
    assert _parse_due(wake_payload(1234)) == [1234]
