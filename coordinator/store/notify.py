"""Cross-replica wake-ups: PostgreSQL LISTEN on ``wfj_wake`` (and ``wfj_events``).

A daemon thread holds one dedicated connection and calls ``on_wake(due_at)``
for every notification; it reconnects with backoff when the connection drops.
SQLite has a single coordinator per file, so nothing listens there.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg

from coordinator.backoff import CappedBackoff
from coordinator.store.urls import libpq_conninfo

log = logging.getLogger(__name__)


class WakeListener:
    """Listens for ``wfj_wake`` notifications on its own connection."""

    def __init__(
        self,
        url: str,
        on_wake: Callable[[int], None],
        on_events: Callable[[], None] | None = None,
    ) -> None:
        # Every host of a multi-host URL, and target_session_attrs, carry over:
        # after a failover the listener follows the primary like the pool does.
        self._dsn = libpq_conninfo(url)
        self._on_wake = on_wake
        # Called for every ``wfj_events`` notification (job events committed).
        self._on_events = on_events
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="wfj-listen", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        conn = self._conn
        if conn is not None:
            try:
                conn.cancel_safe()
            except Exception:  # noqa: BLE001 - closing anyway
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        # Reconnect waits: 0.1 s, doubling to 5 s while the database is away.
        backoff = CappedBackoff(0.1, 5.0)
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True) as conn:
                    self._conn = conn
                    conn.execute("LISTEN wfj_wake")
                    if self._on_events is not None:
                        conn.execute("LISTEN wfj_events")
                    backoff.reset()
                    # Something may have happened while we were not listening:
                    # limits or flags changed, work became eligible, events committed.
                    for due_at in (-1, -2, 0):
                        self._on_wake(due_at)
                    if self._on_events is not None:
                        self._on_events()
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            if note.channel == "wfj_events":
                                if self._on_events is not None:
                                    self._on_events()
                                continue
                            for due_at in _parse_due(note.payload):
                                self._on_wake(due_at)
            except psycopg.Error as e:
                if self._stop.is_set():
                    return
                delay = backoff.next_delay()
                log.warning("wake listener lost its connection (%s); retrying in %.1fs", e, delay)
                self._stop.wait(delay)
            finally:
                self._conn = None


def _parse_due(payload: str) -> list[int]:
    """Due times (comma-separated), [-1] when the concurrency limits changed,
    [-2] when cluster flags did."""
    if payload == "limits":
        return [-1]
    if payload == "flags":
        return [-2]
    out = []
    for part in payload.split(","):
        try:
            out.append(int(part))
        except ValueError:
            out.append(0)
    return out or [0]


__all__ = ["WakeListener"]
