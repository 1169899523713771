"""The engine: acquisition, leases, retries, fairness and pause rules."""

from coordinator.engine.config import EngineConfig
from coordinator.engine.engine import Engine
from coordinator.engine.outcomes import LeaseAnswer, OutcomeResult
from coordinator.engine.reads import ListPage
from coordinator.engine.sessions import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DrainSignal,
    LeaseBatch,
    OutcomesAnswered,
    WorkerSession,
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DrainSignal",
    "Engine",
    "EngineConfig",
    "LeaseAnswer",
    "LeaseBatch",
    "ListPage",
    "OutcomeResult",
    "OutcomesAnswered",
    "WorkerSession",
]
