"""Retention: purges finished jobs once they are older than their status's keep time.

Each finished status (COMPLETED, FAULTED, CANCELLED) has its own keep time;
the default keeps every finished job for 7 days. A job whose ``finished_at``
is older than its status's keep time is deleted with its attempt history;
a member of a job group that has not completed is kept, and a completed
group is deleted with its completion job (docs/groups.md).
Each run deletes at most ``batch_size`` jobs in one transaction; a full batch
runs again at once, so a large backlog is purged in bounded steps and never
in one long transaction. On PostgreSQL one replica at a time purges (the
store takes an advisory lock per batch).

The setting (``--retention`` / ``WFJOBS_RETENTION``, see ``parse_retention``)
is one duration for every finished status (``7d``), per-status entries
(``completed=7d,cancelled=1d,faulted=30d``; a status left out keeps the 7-day
default), ``forever`` for a status that is never purged, or ``off`` (keep
everything).

The job event log (``store/events.py``) has its own keep time beside it
(``--event-retention`` / ``WFJOBS_EVENT_RETENTION``: a duration, default
``7d``, or ``forever``): each run also deletes up to ``batch_size`` of the
oldest events older than that, a prefix of the log, whatever became of their
jobs. A watcher whose cursor falls in the deleted part is told so
(OUT_OF_RANGE) rather than resumed past a gap.

Pauses no longer in force (lifted, or expired without a lift) are kept for
their own time (``--pause-retention`` / ``WFJOBS_PAUSE_RETENTION``: a duration,
default ``7d``, or ``forever``), counted from the lift or the expiry; each run
deletes up to ``batch_size`` older ones, so the pause history
(``ListPauses`` with lifted pauses) stays bounded.

Each run also deletes up to ``batch_size`` idle rate-limit buckets (due and
not slowed by push-back), which admit exactly as a missing bucket does, so a
``*`` rate limit over many values keeps a bounded table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from coordinator.chores.loop import Chore
from coordinator.clock import US_PER_SECOND
from coordinator.model import FINISHED_STATUSES, JobStatus

if TYPE_CHECKING:
    from coordinator.clock import Clock
    from coordinator.engine.attempts import Attempts
    from coordinator.engine.dispatch import Dispatcher
    from coordinator.engine.runner import StoreRunner
    from coordinator.store import Store

DEFAULT_KEEP_S = 7 * 86_400.0
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_FOREVER = ("forever", "never", "off")


def _default_keep() -> dict[JobStatus, float | None]:
    return dict.fromkeys(FINISHED_STATUSES, DEFAULT_KEEP_S)


@dataclass
class RetentionConfig:
    # Seconds each finished status is kept after finished_at; None keeps it forever.
    keep_s: dict[JobStatus, float | None] = field(default_factory=_default_keep)
    # Sleep between runs once nothing is left to purge.
    interval_s: float = 3600.0
    # Jobs deleted per transaction; a full batch runs again at once.
    batch_size: int = 1000
    # Seconds job events are kept after they were written; None keeps them forever.
    keep_events_s: float | None = DEFAULT_KEEP_S
    # Seconds a pause is kept after it was lifted or expired; None keeps them forever.
    keep_pauses_s: float | None = DEFAULT_KEEP_S


def _duration(text: str, where: str) -> float | None:
    text = text.strip().lower()
    if text in _FOREVER:
        return None
    match = _DURATION.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(
            f"retention {where}: {text!r} is not a duration; use a positive number with a "
            "unit s, m, h or d (e.g. 7d, 12h) or 'forever'"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_retention(text: str) -> dict[JobStatus, float | None]:
    """Keep times per finished status from ``7d``, ``off`` or ``completed=7d,faulted=30d``."""
    text = text.strip()
    if not text:
        return _default_keep()
    if "=" not in text:
        return dict.fromkeys(FINISHED_STATUSES, _duration(text, "for every finished status"))
    keep = _default_keep()
    names = {s.name.lower(): s for s in FINISHED_STATUSES}
    for entry in text.split(","):
        name, sep, value = entry.partition("=")
        name = name.strip().lower()
        if not sep or name not in names:
            raise ValueError(
                f"retention entry {entry.strip()!r}: expected STATUS=DURATION with STATUS one "
                f"of {', '.join(names)} (e.g. completed=7d,faulted=30d)"
            )
        keep[names[name]] = _duration(value, f"of {name}")
    return keep


def parse_event_retention(text: str) -> float | None:
    """The event keep time from ``7d`` or ``forever`` (empty: the 7-day default)."""
    text = text.strip()
    return _duration(text, "of job events") if text else DEFAULT_KEEP_S


def parse_pause_retention(text: str) -> float | None:
    """The keep time of ended pauses from ``7d`` or ``forever`` (empty: the 7-day default)."""
    text = text.strip()
    return _duration(text, "of lifted pauses") if text else DEFAULT_KEEP_S


def describe_retention(keep: Mapping[JobStatus, float | None]) -> str:
    def one(seconds: float | None) -> str:
        if seconds is None:
            return "forever"
        for unit in ("d", "h", "m"):
            if seconds % _UNITS[unit] == 0:
                return f"{int(seconds // _UNITS[unit])}{unit}"
        return f"{seconds:g}s"

    return ", ".join(f"{s.name.lower()} {one(keep.get(s))}" for s in FINISHED_STATUSES)


@dataclass
class RetentionResult:
    # Finished jobs deleted this run.
    purged: int
    # The batch was full: more may wait.
    full_batch: bool = False
    events_purged: int = 0
    # Idle rate-limit buckets deleted this run.
    buckets_purged: int = 0
    # Lifted or expired pauses deleted this run.
    pauses_purged: int = 0


class RetentionCleaner(Chore[RetentionResult]):
    """Start/stop loop around ``run_once``; ``start`` does nothing when every status is kept forever."""

    name = "retention"
    leader_only = True

    def __init__(
        self,
        config: RetentionConfig,
        *,
        clock: Clock,
        store: Store,
        run_store: StoreRunner,
        attempts: Attempts,
        dispatcher: Dispatcher,
    ) -> None:
        super().__init__(clock)
        self.config = config
        self._store = store
        self._run_store = run_store
        # Whether ordering keys are in use (a purged head frees its key).
        self._attempts = attempts
        self._dispatcher = dispatcher

    @property
    def enabled(self) -> bool:
        keeps = self.config.keep_s.values()
        return (
            any(v is not None for v in keeps)
            or self.config.keep_events_s is not None
            or self.config.keep_pauses_s is not None
        )

    def start(self) -> None:
        if self.enabled:
            super().start()

    def cutoffs(self, now: int) -> dict[int, int]:
        """Per status: jobs that finished before this time are purged."""
        return {
            int(status): now - int(seconds * US_PER_SECOND)
            for status, seconds in self.config.keep_s.items()
            if seconds is not None
        }

    async def run_once(self, now: int | None = None) -> RetentionResult:
        """Purge one batch of jobs and one of events as of ``now`` (default: the clock's time)."""
        now = self.clock.now_us() if now is None else now
        cutoffs = self.cutoffs(now)
        limit = self.config.batch_size
        purged = (
            await self._run_store(self._store.job_purge_finished, cutoffs, limit) if cutoffs else 0
        )
        if purged and self._attempts.ordered_work_seen:
            # A purged FAULTED head of an ordering key released the key's next job.
            self._dispatcher.wake()
        events = 0
        if self.config.keep_events_s is not None:
            before = now - int(self.config.keep_events_s * US_PER_SECOND)
            events = await self._run_store(self._store.event_purge, before, limit)
        # Idle rate buckets (one per limited scope value that ever started a
        # job) admit as a missing one does: deleting them bounds the table.
        buckets = await self._run_store(self._store.rate_bucket_purge, now, limit)
        pauses = 0
        if self.config.keep_pauses_s is not None:
            before = now - int(self.config.keep_pauses_s * US_PER_SECOND)
            pauses = await self._run_store(self._store.pause_purge, before, limit)
        return RetentionResult(
            purged,
            full_batch=max(purged, events, buckets, pauses) >= limit,
            events_purged=events,
            buckets_purged=buckets,
            pauses_purged=pauses,
        )

    def delay_after(self, result: RetentionResult | None) -> float:
        if result is not None and result.full_batch:
            return 0
        return self.config.interval_s

    def describe(self, result: RetentionResult) -> str:
        parts = []
        if result.purged:
            parts.append(f"purged {result.purged} finished job(s)")
        if result.events_purged:
            parts.append(f"purged {result.events_purged} job event(s)")
        if result.buckets_purged:
            parts.append(f"purged {result.buckets_purged} idle rate-limit bucket(s)")
        if result.pauses_purged:
            parts.append(f"purged {result.pauses_purged} lifted or expired pause(s)")
        return "; ".join(parts)


__all__ = [
    "DEFAULT_KEEP_S",
    "RetentionCleaner",
    "RetentionConfig",
    "RetentionResult",
    "describe_retention",
    "parse_event_retention",
    "parse_pause_retention",
    "parse_retention",
]
