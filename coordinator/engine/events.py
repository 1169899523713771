"""Watching the job event log: ``WatchJobEvents`` streams.

Design note. The log itself is the store's (``store/events.py``: written in
the transaction of each state change, read in ``(ord, id)`` order up to the
release horizon). A watcher here is a cursor and a filter: it reads pages
after its cursor until the released log is exhausted, then sleeps until the
log may have grown. It is woken, never polled:

* by this coordinator's own commits (the store calls ``on_store_events``
  after each transaction that wrote events);
* by other replicas' commits (PostgreSQL): each replica sends at most one
  ``NOTIFY wfj_events`` per ``notify_interval_s`` after writing events, and
  the wake listener hands it to ``on_remote_events``.

A watcher at the live tail reads at most once per ``min_read_interval_s``
(10 ms): under load every commit wakes it, and one read covers them all.
Two waits are timed, neither per event: while committed events sit above the
release horizon (a transaction older than them is still open) the watcher
reads again after a short backoff; and a safety-net read every
``idle_reread_s`` covers a notification lost while the listener reconnected.

When the coordinator stops serving, every watch ends with UNAVAILABLE at
once (a watch never ends on its own, so it would otherwise hold the whole
drain grace); clients reconnect from their cursor.

Resuming is the client's: it passes the cursor of the last event it
processed, and the watch continues after it with no gap, on any replica and
after any restart. A cursor older than retention is refused (``OutOfRange``)
with the oldest cursor that is still accepted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from coordinator.backoff import CappedBackoff
from coordinator.engine.runner import StoreRunner
from coordinator.errors import InvalidArgument, OutOfRange, ShuttingDown
from coordinator.model import EventCursor, EventFilter, JobEvent
from coordinator.store.events import EventLogBounds, EventsPurged

log = logging.getLogger(__name__)


@dataclass
class EventWatchConfig:
    # Events read per store call.
    page_size: int = 500
    # Safety-net re-read of an idle watcher (a lost notification costs at most this).
    idle_reread_s: float = 15.0
    # First and longest re-read delay while committed events wait above the
    # horizon (doubling in between: CappedBackoff).
    held_back_min_s: float = 0.02
    held_back_max_s: float = 1.0
    # Least time between two cross-replica notifications sent by this coordinator.
    notify_interval_s: float = 0.01
    # Least time between two reads of one watcher at the live tail: under load
    # every commit wakes the watchers, and one read then covers them all.
    min_read_interval_s: float = 0.01


class EventHub:
    """Wakes this coordinator's watchers, and other replicas', when events commit."""

    def __init__(
        self,
        store: Any,
        run_store: StoreRunner,
        config: EventWatchConfig | None = None,
        *,
        notify_replicas: bool = False,
    ) -> None:
        self._store = store
        self._run = run_store
        self.config = config or EventWatchConfig()
        self._notify_replicas = notify_replicas
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._notify_pending = False
        self._notify_task: asyncio.Task[None] | None = None
        # A wake-up from the store threads is queued on the loop: later commits
        # ride on it (one loop callback however many commits land meanwhile).
        self._local_queued = False
        # Set when the coordinator stops serving: every watch ends (UNAVAILABLE).
        self._closed = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    async def stop(self) -> None:
        task, self._notify_task = self._notify_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._loop = None
        self.wake()

    def close_watches(self) -> None:
        """End every watch (the coordinator stops serving); clients resume from their cursor."""
        self._closed = True
        self.wake()

    # -- wake-ups ------------------------------------------------------------------------

    def wake(self) -> None:
        """Every watcher reads again (on the event loop)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def on_store_events(self) -> None:
        """This coordinator committed events (called from a store thread)."""
        loop = self._loop
        if self._local_queued or loop is None or loop.is_closed():
            return
        self._local_queued = True
        loop.call_soon_threadsafe(self._local_events)

    def on_remote_events(self) -> None:
        """Another replica committed events (called from the listener thread)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.wake)

    def _local_events(self) -> None:
        self._local_queued = False
        self.wake()
        if not self._notify_replicas or self._loop is None:
            return
        self._notify_pending = True
        if self._notify_task is None or self._notify_task.done():
            self._notify_task = self._loop.create_task(self._send_notifications())

    async def _send_notifications(self) -> None:
        # One notification covers every commit since the last one was sent.
        while self._notify_pending:
            self._notify_pending = False
            try:
                await self._run(self._store.event_notify)
            except Exception as e:  # noqa: BLE001 - the safety-net re-read covers a lost one
                log.warning("could not notify other replicas of new job events: %s", e)
            await asyncio.sleep(self.config.notify_interval_s)

    # -- watching -------------------------------------------------------------------------

    async def watch(
        self, flt: EventFilter, after: EventCursor | None, *, from_oldest: bool = False
    ) -> AsyncIterator[tuple[list[JobEvent], EventCursor | None]]:
        """Events matching ``flt`` after ``after``, then the live tail, forever.

        Yields ``(events, position)`` a page at a time, after a first
        ``([], start)``: ``position`` is where the watch stands (resuming from
        it misses nothing). ``after`` None starts at the end of the log (only
        events from now), or at the oldest event kept with ``from_oldest``.

        Raises:
            OutOfRange: retention deleted events after ``after``.
        """
        bounds = await self._run(self._store.event_bounds)
        history = bounds.history
        position = after
        if after is not None:
            check_resumable(after, bounds)
            position = after.in_history(history)
        if position is None and not from_oldest:
            position = bounds.tail
        held_back = CappedBackoff(self.config.held_back_min_s, self.config.held_back_max_s)
        loop = asyncio.get_running_loop()
        yield [], position
        while True:
            if self._closed:
                raise ShuttingDown(
                    "this coordinator is shutting down; reconnect and pass the last cursor "
                    "received as 'after' to continue without a gap"
                )
            changed = self._changed  # taken before the read: a wake during it is kept
            try:
                page = await self._run(self._store.event_read, flt, position, self.config.page_size)
            except EventsPurged as e:
                raise OutOfRange(
                    f"events after cursor {position} were deleted by retention; the oldest "
                    f"cursor still accepted is {e.purged_through.in_history(history)} (pass it as 'after' to read "
                    "every event kept, or leave 'after' empty to watch from now)"
                ) from None
            if page.history != history:
                # The database failed over under this watch (or is another one).
                raise OutOfRange(_other_history(position, history, page.history))
            if page.events:
                yield page.events, page.events[-1].cursor
            if page.scanned_to is not None and (position is None or page.scanned_to > position):
                position = page.scanned_to
            if page.more:
                continue
            if page.held_back:
                timeout = held_back.next_delay()
            else:
                timeout = self.config.idle_reread_s
                held_back.reset()
            read_at = loop.time()
            try:
                await asyncio.wait_for(changed.wait(), timeout)
            except TimeoutError:
                pass
            wait = self.config.min_read_interval_s - (loop.time() - read_at)
            if wait > 0:
                await asyncio.sleep(wait)


def check_resumable(after: EventCursor, bounds: EventLogBounds) -> None:
    """Raise ``OutOfRange`` unless ``after`` is a position of this log as it stands.

    A cursor of another history (a failover to a standby, another database)
    or ahead of every cursor this log can have handed out (a database
    recreated under a client that kept its cursor) cannot be resumed from
    without risking a gap.
    """
    if after.history and after.history != bounds.history:
        raise OutOfRange(_other_history(after, after.history, bounds.history))
    if after > bounds.end:
        raise OutOfRange(
            f"cursor {after} is ahead of this event log (it ends at {bounds.end}): it was not "
            "handed out by this database (was it recreated, or restored from a backup?); "
            "pass from_oldest to read every event kept, or leave 'after' empty to watch from now"
        )


def _other_history(position: EventCursor | None, was: str, now: str) -> str:
    here = f"history {now}" if now else "a database without histories (SQLite)"
    return (
        f"cursor {position} belongs to database history {was}, and the coordinator now reads "
        f"{here} (a failover to a standby, or another database): events after that cursor may "
        "have been lost or numbered again; pass from_oldest to read every event kept (some "
        "again), or leave 'after' empty to watch from now"
    )


def check_cursor(text: str) -> EventCursor | None:
    """The cursor a client sent (empty: none)."""
    if not text:
        return None
    try:
        return EventCursor.parse(text)
    except ValueError as e:
        raise InvalidArgument(
            f"after: {e}; pass the cursor of the last event received, unchanged"
        ) from None


__all__ = ["EventHub", "EventWatchConfig", "check_cursor", "check_resumable"]
