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


@pytest.mark.parametrize("key", ["jobTypes", "tenant", "unknown"])
def test_a_long_value_is_refused_naming_its_key(key: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        ScalerQuery.from_metadata({"jobTypes": "noop", key: "x" * 513})
    assert str(refused.value).startswith(
        f"scalerMetadata key {key!r}: value is 513 characters long; the limit is 512"
    )


def test_a_long_key_is_refused_as_a_key() -> None:
    with pytest.raises(InvalidArgument) as refused:
        ScalerQuery.from_metadata({"jobTypes": "noop", "k" * 513: "1"})
    assert "scalerMetadata key 'kkk" in str(refused.value)
    assert "key 'kkk" in str(refused.value) and "is 513 characters long" in str(refused.value)
