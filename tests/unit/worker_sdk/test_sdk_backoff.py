"""The one backoff formula (job.proto's RetryPolicy comment), in the SDK and the engine."""

from __future__ import annotations

import math
import random
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.engine.retries import backoff_ms
from coordinator.model import RetryPolicy as EngineRetryPolicy
from worker_sdk import RetryPolicy
from worker_sdk._backoff import CEILING, Backoff, BackoffConfig, backoff_delay


class FixedDraw(random.Random):
    """A random source whose every draw is ``u``."""

    def __init__(self, u: float) -> None:
        super().__init__(0)
        self.u = u

    def random(self) -> float:
        return self.u


def test_delay_doubles_from_initial_up_to_the_cap() -> None:
    delays = [backoff_delay(n, initial=0.1, maximum=1.0, u=0.0) for n in range(1, 7)]

    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


@pytest.mark.parametrize("u", [0.0, 0.25, 0.5, 0.999])
def test_jitter_only_shortens_the_delay(u: float) -> None:
    delay = backoff_delay(3, initial=1.0, maximum=3.0, jitter=0.5, u=u)

    assert delay == pytest.approx(3.0 * (1 - 0.5 * u))
    assert 1.5 <= delay <= 3.0


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"initial": math.nan}, 0.0),
        ({"initial": -5.0}, 0.0),
        ({"initial": 1.0, "multiplier": math.nan}, 1.0),
        ({"initial": 1.0, "multiplier": 0.5}, 1.0),
        ({"initial": 1.0, "multiplier": math.inf}, CEILING),
        ({"initial": 1.0, "multiplier": 1e308, "maximum": math.nan}, CEILING),
        ({"initial": math.inf}, CEILING),
        ({"initial": 1.0, "jitter": math.nan}, 1.0),
        ({"initial": 1.0, "jitter": 7.0}, 0.5),
    ],
)
def test_bad_inputs_are_clamped_instead_of_raising(kwargs: dict, expected: float) -> None:
    assert backoff_delay(3000 if "multiplier" in kwargs else 1, u=0.5, **kwargs) == expected


def test_backoff_counts_consecutive_failures_and_resets_on_success() -> None:
    backoff = Backoff(BackoffConfig(initial=1.0, maximum=10.0, jitter=0.0))

    assert [backoff.next_delay() for _ in range(3)] == [1.0, 2.0, 4.0]
    backoff.reset()
    assert backoff.next_delay() == 1.0


def test_worker_retry_policy_uses_the_formula() -> None:
    policy = RetryPolicy(
        initial_backoff=timedelta(seconds=2), max_backoff=timedelta(seconds=5), jitter=0.2
    )

    assert policy.delay_seconds(1, u=0.5) == pytest.approx(2 * 0.9)
    assert policy.delay_seconds(3, u=0.5) == pytest.approx(5 * 0.9)
    assert policy.backoff(2) == timedelta(seconds=4)
    assert RetryPolicy().delay_seconds(1) is None


@given(
    initial_ms=st.integers(1, 600_000),
    multiplier=st.floats(1.0, 10.0),
    max_ms=st.integers(1, 3_600_000),
    jitter=st.floats(0.0, 1.0),
    attempt=st.integers(1, 40),
    u=st.floats(0.0, 1.0, exclude_max=True),
)
def test_engine_and_sdk_compute_the_same_retry_delay(
    initial_ms: int, multiplier: float, max_ms: int, jitter: float, attempt: int, u: float
) -> None:
    engine = EngineRetryPolicy(
        initial_backoff_ms=initial_ms,
        backoff_multiplier=multiplier,
        max_backoff_ms=max_ms,
        jitter=jitter,
    )
    sdk = RetryPolicy(
        initial_backoff=timedelta(milliseconds=initial_ms),
        backoff_multiplier=multiplier,
        max_backoff=timedelta(milliseconds=max_ms),
        jitter=jitter,
    )

    sdk_ms = sdk.delay_seconds(attempt, u=u)
    assert sdk_ms is not None
    assert backoff_ms(engine, attempt, FixedDraw(u)) == pytest.approx(sdk_ms * 1000, abs=1.0)
    assert backoff_ms(engine, attempt, FixedDraw(u)) <= max_ms
