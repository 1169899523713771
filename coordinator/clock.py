"""Time as a parameter.

Engine and store functions take ``now`` in integer microseconds since the Unix
epoch (UTC). A clock object is injected so tests control time without sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol


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


US_PER_SECOND = 1_000_000
US_PER_MS = 1_000
