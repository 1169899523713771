"""Autoscaling signals for pull-based workers (docs/autoscaling.md).

KEDA's external scaler asks, for one ScaledObject, whether its workers are
needed at all (IsActive) and how much work there is (GetMetrics). The answer
is the ready backlog of the ScaledObject's job types plus the jobs in flight:
counting RUNNING jobs keeps a Deployment from scaling to zero (and killing
its pods) while they run, and leaving paused jobs out keeps a paused
definition from scaling workers up. The ScaledObject's ``metadata`` names the
job types (``jobTypes``, comma-separated, required), optionally a ``tenant``
and a ``category``, and the ready-plus-running jobs one replica should take
(``targetPerReplica``, default 10).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator.errors import InvalidArgument
from coordinator.model import ScalingFigures, parse_category, shown

if TYPE_CHECKING:
    from coordinator.engine.engine import Engine

DEFAULT_TARGET_PER_REPLICA = 10.0
# The scaler answers without a token, so its metadata is bounded like every string
# of the API (docs/limits.md), and a target must fit KEDA's int64 target size.
MAX_METADATA_VALUE = 512
MAX_TARGET_PER_REPLICA = 1e9
METRIC_NAME = "wfjobs_backlog"


@dataclass(frozen=True, slots=True)
class ScalerQuery:
    """What one ScaledObject scales by, read from its scaler metadata."""

    job_types: tuple[str, ...]
    tenant_id: str = ""
    category: int = 0
    target_per_replica: float = DEFAULT_TARGET_PER_REPLICA

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, str]) -> ScalerQuery:
        """Raises ``InvalidArgument`` naming the key a person must fix."""
        for key, value in metadata.items():
            if len(key) > MAX_METADATA_VALUE or len(value) > MAX_METADATA_VALUE:
                raise InvalidArgument(
                    f"scalerMetadata {shown(key)} is {max(len(key), len(value)):,} characters long; "
                    f"the limit is {MAX_METADATA_VALUE} (docs/limits.md)"
                )
        types = tuple(t.strip() for t in metadata.get("jobTypes", "").split(",") if t.strip())
        if not types:
            raise InvalidArgument(
                "scalerMetadata.jobTypes is required: the job types the workers serve, "
                "comma-separated (e.g. 'send-email,render-pdf')"
            )
        category = 0
        if metadata.get("category", "").strip():
            parsed = parse_category(metadata["category"])
            if parsed is None:
                raise InvalidArgument(
                    f"scalerMetadata.category {shown(metadata['category'])} is not a job category "
                    "(continuation, activity_work, integration, maintenance, custom)"
                )
            category = int(parsed)
        target = DEFAULT_TARGET_PER_REPLICA
        if metadata.get("targetPerReplica", "").strip():
            try:
                target = float(metadata["targetPerReplica"])
            except ValueError:
                target = 0.0
            if not 0 < target <= MAX_TARGET_PER_REPLICA:
                raise InvalidArgument(
                    f"scalerMetadata.targetPerReplica must be a number above 0 and at most "
                    f"{MAX_TARGET_PER_REPLICA:.0e}, got {shown(metadata['targetPerReplica'])}"
                )
        return cls(types, metadata.get("tenant", "").strip(), category, target)


async def figures(engine: Engine, query: ScalerQuery) -> list[ScalingFigures]:
    """The scaling figures of the query's job types."""
    return await engine.run_store(
        engine.store.job_scaling_figures,
        engine.clock.now_us(),
        query.job_types,
        query.tenant_id,
        query.category,
    )


def demand(rows: list[ScalingFigures]) -> int:
    """Ready jobs plus jobs in flight: what the workers are needed for."""
    return sum(r.ready + r.running for r in rows)


__all__ = ["METRIC_NAME", "ScalerQuery", "demand", "figures"]
