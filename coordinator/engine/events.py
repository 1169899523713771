"""Watching the job event log: ``WatchJobEvents`` streams.

Design note. The log itself is the store's (``store/events.py``: written in
the transaction of each state change, read in ``(ord, id)`` order up to the
release horizon). A watcher here is a cursor and a filter.

The live tail is read once per coordinator, not once per watcher: one reader
(``LiveTail``) reads every new event without a filter and hands each
subscribed watcher the events its filter matches, in memory, into a buffer of
its own. A watcher that starts behind the tail (a resumed cursor,
``from_oldest``) reads pages on its own until it reaches what the reader
holds (the reader keeps its last ``recent_events`` events for that), then
subscribes. A watcher whose client does not keep up (more than
``watcher_buffer_events`` waiting) is dropped from the reader at its
position and reads on its own again: it still misses nothing, and the
others are not slowed. The reader runs while some watcher is subscribed.

Readers sleep until the log may have grown. They are woken, never polled:

* by this coordinator's own commits (the store calls ``on_store_events``
  after each transaction that wrote events);
* by other replicas' commits (PostgreSQL): each replica sends at most one
  ``NOTIFY wfj_events`` per ``notify_interval_s`` after writing events, and
  the wake listener hands it to ``on_remote_events``.

The live tail is read at most once per ``min_read_interval_s`` (10 ms):
under load every commit wakes the reader, and one read covers them all.
Two waits are timed, neither per event: while committed events sit above the
release horizon (a transaction older than them is still open) the reader
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
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from coordinator.backoff import CappedBackoff
from coordinator.engine.runner import StoreRunner
from coordinator.errors import InvalidArgument, OutOfRange, ShuttingDown
from coordinator.model import EventCursor, EventFilter, JobEvent
from coordinator.store import Store
from coordinator.store.events import EventLogBounds, EventPage, EventsPurged

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
    # Least time between two reads of the live tail: under load every commit
    # wakes the reader, and one read then covers them all.
    min_read_interval_s: float = 0.01
    # Events a watcher at the live tail may have waiting for its client; one
    # that falls further behind leaves the shared reader and reads on its own.
    watcher_buffer_events: int = 10_000
    # Recent events the shared reader keeps, so that a watcher catching up
    # joins it without a gap.
    recent_events: int = 20_000


class EventHub:
    """Wakes this coordinator's watchers, and other replicas', when events commit."""

    def __init__(
        self,
        store: Store,
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
        # The one reader of the live tail, shared by every watcher.
        self._tail = LiveTail(self)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    async def stop(self) -> None:
        task, self._notify_task = self._notify_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._loop = None
        self._tail.stop()
        self.wake()

    def close_watches(self) -> None:
        """End every watch (the coordinator stops serving); clients resume from their cursor."""
        self._closed = True
        self._tail.stop()
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
                if not await self._store.event_notify_on_loop():
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

        A watcher behind the live tail reads the log on its own until it
        reaches what the shared reader holds, then takes its events from it.

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
        yield [], position
        # After leaving the shared reader, read once alone before joining again:
        # a read error then reaches this watcher's client.
        alone = False
        while True:
            self._check_open()
            subscriber = None if alone else self._tail.join(flt, position, history)
            if subscriber is not None:
                try:
                    while not (subscriber.dropped and not subscriber.pages):
                        pages = await subscriber.take()
                        self._check_open()
                        for events in pages:
                            yield events, events[-1].cursor
                finally:
                    self._tail.leave(subscriber)
                # Dropped (it fell behind, or the shared read failed): on its own from here.
                position = subscriber.position
                alone = True
                continue
            # Behind what the shared reader holds: read on its own.
            changed = self._changed  # taken before the read: a wake during it is kept
            page = await self._read(flt, position, history)
            alone = False
            if page.events:
                yield page.events, page.events[-1].cursor
            if page.scanned_to is not None and (position is None or page.scanned_to > position):
                position = page.scanned_to
            if page.more or self._tail.can_join(position):
                continue
            await self.wait_for_growth(changed, page, held_back)

    async def wait_for_growth(
        self, changed: asyncio.Event, page: EventPage, held_back: CappedBackoff
    ) -> None:
        """After a read that reached the released end: sleep until ``changed`` is
        set (a commit), the held-back re-read delay or the safety net passes,
        and at least ``min_read_interval_s`` since the read."""
        loop = asyncio.get_running_loop()
        if page.held_back:
            timeout = held_back.next_delay()
        else:
            timeout = self.config.idle_reread_s
            held_back.reset()
        read_at = loop.time()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await changed.wait()
        wait = self.config.min_read_interval_s - (loop.time() - read_at)
        if wait > 0:
            await asyncio.sleep(wait)

    def _check_open(self) -> None:
        if self._closed:
            raise ShuttingDown(
                "this coordinator is shutting down; reconnect and pass the last cursor "
                "received as 'after' to continue without a gap"
            )

    async def _read(
        self, flt: EventFilter, position: EventCursor | None, history: str
    ) -> EventPage:
        """A page for one watcher of ``history``, read alone."""
        try:
            page = await self._run(self._store.event_read, flt, position, self.config.page_size)
        except EventsPurged as e:
            raise OutOfRange(
                f"events after cursor {position} were deleted by retention; the oldest "
                f"cursor still accepted is {e.purged_through.in_history(history)} (pass it as "
                "'after' to read every event kept, or leave 'after' empty to watch from now)"
            ) from None
        if page.history != history:
            # The database failed over under this watch (or is another one).
            raise OutOfRange(_other_history(position, history, page.history))
        return page


_EVERY_EVENT = EventFilter()


def event_matches(flt: EventFilter, event: JobEvent) -> bool:
    """Whether ``event`` passes ``flt`` (the store's filter, applied in memory)."""
    return (
        (not flt.tenant_id or event.tenant_id == flt.tenant_id)
        and (not flt.job_type or event.job_type == flt.job_type)
        and (not flt.job_id or event.job_id == flt.job_id)
        and (not flt.group_id or event.group_id == flt.group_id)
        and (not flt.definition_id or event.definition_id == flt.definition_id)
        and (not flt.instance_id or event.instance_id == flt.instance_id)
        and (not flt.correlation_id or event.correlation_id == flt.correlation_id)
        and (not flt.kinds or event.kind in flt.kinds)
    )


class _Subscriber:
    """One watcher fed by the shared reader: its filter, position and pages waiting."""

    __slots__ = ("dropped", "flt", "pages", "position", "queued", "ready", "skip_through")

    def __init__(self, flt: EventFilter, position: EventCursor) -> None:
        self.flt = flt
        # Where this watcher stands once it has taken every page waiting.
        self.position = position
        # Events at or before this cursor were read by the watcher itself.
        self.skip_through: EventCursor | None = None
        self.pages: list[list[JobEvent]] = []
        self.queued = 0
        self.dropped = False
        self.ready = asyncio.Event()

    def offer(self, events: list[JobEvent], position: EventCursor, limit: int) -> None:
        skip = self.skip_through
        if skip is not None:
            events = [e for e in events if e.cursor > skip]
            if position >= skip:
                self.skip_through = None
        if self.flt != _EVERY_EVENT:
            flt = self.flt
            events = [e for e in events if event_matches(flt, e)]
        if events:
            if self.queued + len(events) > limit:
                # Too far behind: it leaves the shared reader at its position
                # and reads on its own (nothing is lost or repeated).
                self.drop()
                return
            self.pages.append(events)
            self.queued += len(events)
            self.ready.set()
        if position > self.position:
            self.position = position

    def drop(self) -> None:
        self.dropped = True
        self.ready.set()

    async def take(self) -> list[list[JobEvent]]:
        """The pages waiting (at least one, unless dropped or woken to stop)."""
        if not self.pages and not self.dropped:
            await self.ready.wait()
        pages, self.pages, self.queued = self.pages, [], 0
        self.ready.clear()
        return pages


class LiveTail:
    """One reader of the log's live tail for every watcher of this coordinator.

    It reads every event once (no filter) and hands each watcher the events
    its filter matches, in memory. It runs while a watcher is subscribed, from
    where the first one stood, and keeps the last ``recent_events`` events so
    that a watcher that caught up on its own joins without a gap.
    """

    def __init__(self, hub: EventHub) -> None:
        self._hub = hub
        self._subscribers: list[_Subscriber] = []
        self._task: asyncio.Task[None] | None = None
        self._position: EventCursor | None = None
        # Every event after ``_recent_from`` up to ``_position`` is in ``_recent``.
        self._recent: deque[JobEvent] = deque()
        self._recent_from: EventCursor | None = None
        # The database history the reader reads (``EventCursor.history``).
        self._history = ""

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def can_join(self, position: EventCursor | None) -> bool:
        if position is None:
            return False
        if not self.running:
            return True
        assert self._recent_from is not None
        return position >= self._recent_from

    def join(
        self, flt: EventFilter, position: EventCursor | None, history: str
    ) -> _Subscriber | None:
        """Subscribe a watcher of ``history`` standing at ``position``, or None
        when the events after it are older than what the reader holds, or of
        another history (it reads on its own)."""
        if not self.can_join(position) or (self.running and history != self._history):
            return None
        assert position is not None
        subscriber = _Subscriber(flt, position)
        if not self.running:
            self._position = self._recent_from = position
            self._history = history
            self._recent.clear()
            self._subscribers.append(subscriber)
            self._task = asyncio.get_running_loop().create_task(self._read_tail())
            return subscriber
        assert self._position is not None
        if position > self._position:
            subscriber.skip_through = position
        else:
            # The events it lacks are held in memory (more than its buffer: it
            # is dropped at once, at its own position, and reads alone).
            held = [e for e in self._recent if e.cursor > position]
            subscriber.offer(held, self._position, self._hub.config.watcher_buffer_events)
            if subscriber.dropped:
                return subscriber
        self._subscribers.append(subscriber)
        return subscriber

    def leave(self, subscriber: _Subscriber) -> None:
        if subscriber in self._subscribers:
            self._subscribers.remove(subscriber)
        if not self._subscribers and self._task is not None:
            self._task.cancel()
            self._task = None

    def stop(self) -> None:
        for subscriber in self._subscribers:
            subscriber.drop()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _read_tail(self) -> None:
        hub = self._hub
        config = hub.config
        held_back = CappedBackoff(config.held_back_min_s, config.held_back_max_s)
        while self._subscribers:
            changed = hub._changed  # taken before the read: a wake during it is kept
            try:
                page = await hub._run(
                    hub._store.event_read, _EVERY_EVENT, self._position, config.page_size
                )
            except Exception as e:  # noqa: BLE001 - each watcher reads on its own and hears it
                log.debug("the shared event reader stopped: %s", e)
                self._drop_all()
                return
            if page.history != self._history:
                # A failover under the reader: each watcher's own read says so.
                self._drop_all()
                return
            assert self._position is not None
            position = self._position
            if page.scanned_to is not None and page.scanned_to > position:
                position = page.scanned_to
            if page.events:
                position = max(position, page.events[-1].cursor)
                self._remember(page.events)
            self._position = position
            limit = config.watcher_buffer_events
            for subscriber in list(self._subscribers):
                subscriber.offer(page.events, position, limit)
                if subscriber.dropped:
                    self._subscribers.remove(subscriber)
            if not page.more:
                await hub.wait_for_growth(changed, page, held_back)

    def _drop_all(self) -> None:
        for subscriber in self._subscribers:
            subscriber.drop()
        self._subscribers.clear()

    def _remember(self, events: list[JobEvent]) -> None:
        recent = self._recent
        recent.extend(events)
        excess = len(recent) - self._hub.config.recent_events
        for _ in range(max(0, excess)):
            self._recent_from = recent.popleft().cursor


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


__all__ = [
    "EventHub",
    "EventWatchConfig",
    "LiveTail",
    "check_cursor",
    "check_resumable",
    "event_matches",
]
