"""The scaler answers without a token: metadata at the edges is refused with
INVALID_ARGUMENT naming the key, never an overflow (INTERNAL) or a 10 MB echo."""

from __future__ import annotations

import pytest

from coordinator.engine.scaling import ScalerQuery
from coordinator.errors import InvalidArgument


@pytest.mark.parametrize("target", ["inf", "-inf", "nan", "1e308", "0", "-1", "x"])
def test_a_target_outside_what_keda_takes_is_refused(target: str) -> None:
    with pytest.raises(InvalidArgument, match="targetPerReplica"):
        ScalerQuery.from_metadata({"jobTypes": "noop", "targetPerReplica": target})


def test_a_target_in_range_is_kept() -> None:
    query = ScalerQuery.from_metadata({"jobTypes": "noop", "targetPerReplica": "1e9"})
    assert query.target_per_replica == 1e9


@pytest.mark.parametrize("key", ["jobTypes", "tenant", "category", "unknown"])
def test_a_value_over_the_string_limit_is_refused_with_a_short_message(key: str) -> None:
    metadata = {"jobTypes": "noop", key: "x" * 10_000_000}
    with pytest.raises(InvalidArgument) as refused:
        ScalerQuery.from_metadata(metadata)
    assert "the limit is 512" in str(refused.value)
    assert len(str(refused.value)) < 300
