"""Capped exponential backoff for the coordinator's own wait-and-retry loops:
the store health probe (``api/health.py``), the PostgreSQL wake listener's
reconnect (``store/notify.py``) and an event watcher's re-read while
committed events wait above the release horizon (``engine/events.py``).

The first wait is ``initial_s``; each further consecutive failure (for a
watcher: each further read that found events held back) multiplies it by
``multiplier``, up to ``maximum_s``; a success starts over. There is no
jitter: the probe and the listener are one per coordinator process, and one
coordinator's watchers are woken together by its commits anyway, so there is
no crowd of clients to spread. (Job retries use the formula of the
``RetryPolicy`` comment in ``job.proto``, in ``engine/retries.py``; the SDK's
loops use ``worker_sdk/_backoff.py``, which carries gRPC status codes the
store must not import.)
"""

from __future__ import annotations

__all__ = ["CappedBackoff"]


class CappedBackoff:
    """Consecutive failures of one retry loop and the wait they call for."""

    def __init__(self, initial_s: float, maximum_s: float, multiplier: float = 2.0) -> None:
        if not 0 < initial_s <= maximum_s or multiplier < 1:
            raise ValueError(
                f"backoff needs 0 < initial_s <= maximum_s and multiplier >= 1, got "
                f"initial_s={initial_s}, maximum_s={maximum_s}, multiplier={multiplier}"
            )
        self.initial_s = initial_s
        self.maximum_s = maximum_s
        self.multiplier = multiplier
        self.failures = 0
        self._next = initial_s

    def next_delay(self) -> float:
        """Record a failure; return how long to wait before trying again (seconds)."""
        self.failures += 1
        delay = self._next
        # Capped at every step, so a long outage never overflows.
        self._next = min(delay * self.multiplier, self.maximum_s)
        return delay

    def reset(self) -> None:
        """Record a success: the next failure waits ``initial_s`` again."""
        self.failures = 0
        self._next = self.initial_s
