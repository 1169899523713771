"""The engine: acquisition, leases, retries, fairness and pause rules."""

from coordinator.engine.engine import Engine, EngineConfig, LeaseAnswer, ListPage, OutcomeResult
from coordinator.engine.sessions import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DrainSignal,
    LeaseBatch,
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
    "WorkerSession",
]
