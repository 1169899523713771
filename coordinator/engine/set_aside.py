"""Rows set aside: what the chores and outcome reports could not process.

Design note. The reaper, the execution-timeout chore, orphan releases, the
cluster sync and outcome reports each handle many rows per store call. A row
whose own data makes processing fail (a stored retry policy that does not
parse, a value the database refuses to write back) must not stop the rest of
its batch, nor the chore: the store leaves such a row untouched and names it,
the others are written. This book records each such row:

- logged at ERROR (``<chore>: job <id> set aside: <error>``) with what an
  operator can do (cancel, unlock or fix the job);
- counted in the ``wfjobs.rows.set_aside`` metric, labelled by chore;
- skipped by the chore's later runs for ``recheck_s``, so a set-aside row
  neither crowds out healthy ones nor makes the chore spin; then tried again
  (a job fixed, cancelled or unlocked meanwhile is then processed normally).

The book is per coordinator and in memory: after a restart a poisoned row is
found, logged and set aside again on the first run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from coordinator.errors import FailedPrecondition

log = logging.getLogger(__name__)

# How long a set-aside row is skipped before a chore tries it again.
DEFAULT_RECHECK_S = 300.0

Collected = list[tuple[str, BaseException]]


class OutcomeNotRecorded(FailedPrecondition):
    """The job's stored data made recording this outcome fail; nothing changed."""

    def __init__(self, job_id: str, error: BaseException) -> None:
        detail = f"{type(error).__name__}: {error}"[:300]
        super().__init__(
            f"the outcome of job {job_id} could not be recorded: its stored data is unusable "
            f"({detail}); the job was set aside for an operator (cancel, unlock or fix it)"
        )
        self.job_id = job_id


class SetAsideBook:
    """Rows set aside per chore, with the time until which they are skipped."""

    def __init__(
        self, counter: Callable[[str, int], None], recheck_s: float = DEFAULT_RECHECK_S
    ) -> None:
        self._count = counter
        self.recheck_s = recheck_s
        self._until: dict[str, dict[str, int]] = {}

    @staticmethod
    def collector() -> tuple[Collected, Callable[[str, BaseException], None]]:
        """A list and the callback that fills it (safe to call from a store thread)."""
        collected: Collected = []
        return collected, lambda row_id, error: collected.append((row_id, error))

    def record(self, chore: str, collected: Collected, now: int, what: str = "job") -> None:
        """Log, count and remember rows a chore just set aside."""
        if not collected:
            return
        until = self._until.setdefault(chore, {})
        for row_id, error in collected:
            until[row_id] = now + int(self.recheck_s * 1_000_000)
            log.error(
                "%s: %s %s set aside: %s: %s (the rest of its batch went ahead; "
                "tried again in %.0f s)",
                chore,
                what,
                row_id,
                type(error).__name__,
                error,
                self.recheck_s,
            )
        self._count(chore, len(collected))

    def skipped(self, chore: str, now: int) -> list[str]:
        """Rows ``chore`` skips at ``now``; forgets those due for another try."""
        until = self._until.get(chore)
        if not until:
            return []
        for row_id in [r for r, t in until.items() if t <= now]:
            del until[row_id]
        return sorted(until)

    def count(self, chore: str | None = None) -> int:
        """Rows currently set aside (by one chore, or by all)."""
        if chore is not None:
            return len(self._until.get(chore, {}))
        return sum(len(rows) for rows in self._until.values())


__all__ = ["DEFAULT_RECHECK_S", "OutcomeNotRecorded", "SetAsideBook"]
