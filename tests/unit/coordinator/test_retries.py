"""The backoff computation is total: any stored policy, any attempt number."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.engine.retries import BACKOFF_CEILING_MS, backoff_ms
from coordinator.model import DEFAULT_RETRY_POLICY, RetryPolicy

# Anything json.loads can hand back for a numeric field of a stored policy.
_ANY_NUMBER = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([1e308, -1e308, float("nan"), float("inf"), 2**31 - 1]),
    st.text(max_size=3),
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(
    initial=_ANY_NUMBER,
    multiplier=_ANY_NUMBER,
    cap=_ANY_NUMBER,
    jitter=_ANY_NUMBER,
    attempt=st.one_of(
        st.integers(min_value=-10, max_value=100),
        st.integers(min_value=2**31 - 10, max_value=2**64),
        st.just(10**400),
    ),
    seed=st.integers(0, 2**32),
)
def test_backoff_stays_within_the_cap_whatever_the_policy(
    initial, multiplier, cap, jitter, attempt, seed
) -> None:
    policy = RetryPolicy(
        initial_backoff_ms=initial,
        backoff_multiplier=multiplier,
        max_backoff_ms=cap,
        jitter=jitter,
    )
    delay = backoff_ms(policy, attempt, random.Random(seed))
    assert isinstance(delay, int)
    assert 0 <= delay <= BACKOFF_CEILING_MS
    usable_cap = (
        isinstance(cap, int | float) and not isinstance(cap, bool) and cap == cap and cap >= 0
    )
    limit = min(cap, BACKOFF_CEILING_MS) if usable_cap else DEFAULT_RETRY_POLICY.max_backoff_ms
    assert delay <= limit


def test_poisoned_fields_fall_back_to_the_defaults() -> None:
    nan = float("nan")
    policy = RetryPolicy(
        initial_backoff_ms=nan, backoff_multiplier=nan, max_backoff_ms=nan, jitter=nan
    )
    no_jitter = RetryPolicy(jitter=0.0)
    rng = random.Random(1)
    assert backoff_ms(RetryPolicy(initial_backoff_ms=nan, jitter=0.0), 1, rng) == 1_000
    assert backoff_ms(RetryPolicy(backoff_multiplier=nan, jitter=0.0), 3, rng) == 4_000
    assert backoff_ms(no_jitter, 3, rng) == 4_000
    assert 0 < backoff_ms(policy, 2, rng) <= 300_000


def test_huge_multipliers_and_attempts_reach_the_cap() -> None:
    rng = random.Random(1)
    cap = 60_000
    for multiplier, attempt in ((1e308, 3), (float("inf"), 2), (2.0, 2**31 - 1), (1.5, 10**400)):
        policy = RetryPolicy(
            initial_backoff_ms=1_000,
            backoff_multiplier=multiplier,
            max_backoff_ms=cap,
            jitter=0.0,
        )
        assert backoff_ms(policy, attempt, rng) == cap
