"""The engine: acquisition, leases, retries, fairness and pause rules."""

from coordinator.engine.engine import Engine, EngineConfig, LeaseAnswer, ListPage, OutcomeResult
from coordinator.engine.sessions import DrainSignal, LeaseBatch, WorkerSession

__all__ = [
    "DrainSignal",
    "Engine",
    "EngineConfig",
    "LeaseAnswer",
    "LeaseBatch",
    "ListPage",
    "OutcomeResult",
    "WorkerSession",
]
