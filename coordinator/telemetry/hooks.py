"""The hooks the engine calls to report what it did; this base does nothing.

The engine holds one ``EngineTelemetry`` (``Engine.telemetry``); its concepts
(enqueue, the dispatcher, acquisition, ``Attempts``) and the chores (the lease
reaper; every chore's set-aside rows through the engine's ``SetAsideBook``)
call it through the engine, once per batch (never per job), so with telemetry
off the cost is one empty method call per enqueue, acquisition, report or
reaper run. ``coordinator.telemetry``
replaces it with an OpenTelemetry-backed one when traces or metrics are on.
This module imports nothing beyond the engine's vocabulary.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from coordinator.model import AttemptEnd, JobRow, NewJob


class EngineTelemetry:
    """Telemetry off: every hook returns at once."""

    enabled = False

    def enqueued(self, jobs: Sequence[NewJob], results: Sequence[tuple[str, bool, int]]) -> None:
        """Jobs were stored; ``results`` are ``(id, deduplicated, status)`` per job."""

    def leased(self, rows: Sequence[JobRow], now: int) -> None:
        """Attempts started: the rows were leased at ``now``."""

    def outcomes(self, completed: Collection[str], ends: Mapping[str, AttemptEnd]) -> None:
        """Workers reported: ``completed`` job ids, and the other attempts' ends."""

    def reaped(self, ends: Sequence[AttemptEnd]) -> None:
        """The reaper ended attempts whose lease expired."""

    def acquired(self, job_types: Collection[str], result: Any, started_ns: int) -> None:
        """An acquisition (candidates + claim) that began at ``started_ns`` finished."""

    def reaper_ran(self, reclaimed: int, started_ns: int) -> None:
        """A reaper run that began at ``started_ns`` ended ``reclaimed`` attempts."""

    def rows_set_aside(self, chore: str, count: int) -> None:
        """``chore`` set ``count`` rows aside: processing them failed, the rest went ahead."""

    def rate_throttled(
        self, throttled: Mapping[tuple[int, str], tuple[Any, int]], now: int
    ) -> None:
        """Rate limits hold scopes back: by scope (kind, value), the ``RateLimit``
        in force and the time (µs) it next admits a start; seen at ``now``."""


NO_TELEMETRY = EngineTelemetry()

__all__ = ["NO_TELEMETRY", "EngineTelemetry"]
