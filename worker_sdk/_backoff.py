"""Capped exponential backoff: the one delay formula of the SDK.

Design note
-----------
Every wait-and-retry in the SDK (reconnecting the job stream, re-sending
outcomes, inline calls, the outbox relay, the ingress adapters) and the
worker-side retry time of a failed job use the formula written in the
``RetryPolicy`` comment of ``protos/workflowjobs/v1/job.proto``, which the
coordinator's engine applies to job retries too::

    base  = min(initial * multiplier ** (n - 1), maximum)      # n = failures so far, 1-based
    delay = base * (1 - jitter * u)                            # u uniform in [0, 1)

Jitter only shortens a delay: ``maximum`` is a real cap, and ``base`` is the
longest anyone waits after ``n`` failures. Inputs are clamped so that a
misconfigured value never raises or waits forever: ``jitter`` to [0, 1],
``multiplier`` to at least 1, a negative or NaN ``initial`` to 0, and every
delay to at most :data:`CEILING` (a year), which is also the cap when
``maximum`` is infinite. Delays are in seconds.
"""

from __future__ import annotations

import dataclasses
import math
import random

import grpc

from workflowjobs.contract import LONGEST_BACKOFF_S

__all__ = ["CEILING", "RETRYABLE_CODES", "Backoff", "BackoffConfig", "backoff_delay"]

RETRYABLE_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
    }
)
"""Status codes a retry loop waits out: the call may succeed when sent again."""

CEILING = float(LONGEST_BACKOFF_S)
"""The longest delay the helper returns, in seconds: far beyond any sane cap,
short enough for timers and datetimes."""


def backoff_delay(
    failures: int,
    *,
    initial: float,
    multiplier: float = 2.0,
    maximum: float = math.inf,
    jitter: float = 0.0,
    u: float | None = None,
) -> float:
    """The delay after ``failures`` consecutive failures (1-based), in seconds.

    Args:
        failures: Failures so far; 1 gives ``initial`` (before jitter).
        initial: Delay after the first failure.
        multiplier: Growth per further failure (clamped to at least 1).
        maximum: Cap on the delay before jitter (``inf``: only :data:`CEILING`).
        jitter: Fraction (0..1) of the delay that is randomised away.
        u: The uniform draw in [0, 1); ``random.random()`` when None.

    Returns:
        A delay between 0 and :data:`CEILING`.
    """
    initial = _clamp(initial, 0.0, CEILING, nan=0.0)
    maximum = _clamp(maximum, 0.0, CEILING, nan=CEILING)
    multiplier = _clamp(multiplier, 1.0, math.inf, nan=1.0)
    jitter = _clamp(jitter, 0.0, 1.0, nan=0.0)
    try:
        base = initial * multiplier ** max(failures - 1, 0)
    except OverflowError:
        base = math.inf
    base = min(base, maximum) if initial > 0 else 0.0
    draw = random.random() if u is None else _clamp(u, 0.0, 1.0, nan=0.0)
    return base * (1 - jitter * draw)


def _clamp(value: float, low: float, high: float, *, nan: float) -> float:
    return nan if math.isnan(value) else min(max(value, low), high)


@dataclasses.dataclass(frozen=True, slots=True)
class BackoffConfig:
    """Delays between retries (seconds), shared by every failure of one loop.

    Attributes:
        initial: First delay.
        maximum: Cap on the delay.
        multiplier: Growth per consecutive failure.
        jitter: Fraction (0..1) of each delay that is randomised.
    """

    initial: float = 0.5
    maximum: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.2


class Backoff:
    """Consecutive failures of one retry loop and the delay they call for.

    :meth:`next_delay` records a failure and returns how long to wait;
    :meth:`reset` records a success (the next failure waits ``initial`` again).
    """

    def __init__(self, config: BackoffConfig, rng: random.Random | None = None) -> None:
        self._config = config
        self._failures = 0
        self._rng = rng or random.Random()

    @property
    def failures(self) -> int:
        """Consecutive failures recorded since the last success."""
        return self._failures

    def next_delay(self) -> float:
        """Record a failure; return how long to wait before retrying."""
        c = self._config
        self._failures += 1
        return backoff_delay(
            self._failures,
            initial=c.initial,
            multiplier=c.multiplier,
            maximum=c.maximum,
            jitter=c.jitter,
            u=self._rng.random(),
        )

    def reset(self) -> None:
        """Record a success."""
        self._failures = 0
