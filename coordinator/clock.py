"""Time as a parameter.

Engine and store functions take ``now`` in integer microseconds since the Unix
epoch (UTC). A clock object is injected so tests control time without sleeping.

On PostgreSQL the engine's clock is a ``DatabaseClock``: the database server's
time, so that replicas whose host clocks disagree still agree on when a lease
expires and when a job is due (docs/design.md, "Where time comes from").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)


class Clock(Protocol):
    """Source of the current time."""

    def now_us(self) -> int:
        """Current time in microseconds since the epoch."""
        ...


class SystemClock:
    """Wall-clock time."""

    def now_us(self) -> int:
        return time.time_ns() // 1000


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, start_us: int | None = None) -> None:
        self._now = start_us if start_us is not None else time.time_ns() // 1000

    def now_us(self) -> int:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``."""
        self._now += int(seconds * 1_000_000)


class DatabaseClock:
    """The database server's clock, read locally.

    ``sync`` asks the database for its time a few times and keeps the offset
    between it and this host's monotonic clock from the sample with the
    shortest round trip (its error is at most half that round trip);
    ``now_us`` is the monotonic clock plus that offset, so it costs no query
    and does not follow steps of this host's wall clock. The engine syncs at
    start and then every ``ClockSyncConfig.interval_s``. Before the first sync
    it reads like ``SystemClock``.
    """

    def __init__(self, read_database_us: Callable[[], int], samples: int = 3) -> None:
        self._read = read_database_us
        self._samples = samples
        self._offset_us = time.time_ns() // 1000 - time.monotonic_ns() // 1000
        # Half the round trip of the sample the offset came from (None before a sync).
        self.uncertainty_us: int | None = None
        # Database time minus this host's wall clock at the last sync.
        self.host_skew_us: int | None = None

    def now_us(self) -> int:
        return time.monotonic_ns() // 1000 + self._offset_us

    def sync(self) -> int:
        """Re-measure the offset (blocking: one query per sample); returns the new uncertainty."""
        best: tuple[int, int, int] | None = None
        for _ in range(self._samples):
            wall = time.time_ns() // 1000
            sent = time.monotonic_ns() // 1000
            database = self._read()
            received = time.monotonic_ns() // 1000
            round_trip = received - sent
            if best is None or round_trip < best[0]:
                offset = database - (sent + received) // 2
                best = (round_trip, offset, database - (wall + round_trip // 2))
        assert best is not None
        self._offset_us = best[1]
        self.uncertainty_us = best[0] // 2
        self.host_skew_us = best[2]
        return self.uncertainty_us


US_PER_SECOND = 1_000_000
US_PER_MS = 1_000
