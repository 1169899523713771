"""Cross-replica wake-ups: PostgreSQL LISTEN on ``wfj_wake`` (and ``wfj_events``).

A daemon thread holds one dedicated connection and calls ``on_wake(due_at)``
for every notification; it reconnects with backoff when the connection drops.
SQLite has a single coordinator per file, so nothing listens there.

A connection that only listens sends nothing, so nothing would notice the
database going silent under it. The connection carries TCP keepalives and
``tcp_user_timeout`` (``store/liveness.py``), and every
``liveness_interval_s`` the listener repeats its ``LISTEN`` on it (a no-op
that still needs an answer): an answer that
does not come within ``liveness_timeout_s`` (a peer that keeps the connection
open and never answers) ends the connection, and the listener reconnects,
LISTENs again and wakes everything once, since notifications sent meanwhile
were lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import psycopg
from psycopg.conninfo import make_conninfo

from coordinator.backoff import CappedBackoff
from coordinator.store.liveness import (
    DEFAULT_BOUNDS,
    ConnectionBounds,
    socket_deadline,
    tcp_connect_args,
)
from coordinator.store.urls import libpq_conninfo

log = logging.getLogger(__name__)

# How long stopping waits for the server to answer the cancel of the listener's wait.
_CANCEL_TIMEOUT_S = 1.0


class WakeListener:
    """Listens for ``wfj_wake`` notifications on its own connection."""

    def __init__(
        self,
        url: str,
        on_wake: Callable[[int], None],
        on_events: Callable[[], None] | None = None,
        bounds: ConnectionBounds = DEFAULT_BOUNDS,
    ) -> None:
        # Every host of a multi-host URL, and target_session_attrs, carry over:
        # after a failover the listener follows the primary like the pool does.
        self._dsn = make_conninfo(libpq_conninfo(url), **tcp_connect_args(bounds))
        self._bounds = bounds
        # Connections made (LISTEN issued), the first one included.
        self.connections = 0
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
            # The cancel only hurries the thread out of a wait (it polls the
            # stop every second anyway); a silent database never answers it,
            # so its wait is short instead of psycopg's 30 s.
            try:
                conn.cancel_safe(timeout=_CANCEL_TIMEOUT_S)
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
                    with socket_deadline(conn, self._bounds.liveness_timeout_s):
                        conn.execute("LISTEN wfj_wake")
                        if self._on_events is not None:
                            conn.execute("LISTEN wfj_events")
                    backoff.reset()
                    self.connections += 1
                    if self.connections > 1:
                        log.info("wake listener reconnected; listening again")
                    # Something may have happened while we were not listening:
                    # limits or flags changed, work became eligible, events committed.
                    for due_at in (-1, -2, 0):
                        self._on_wake(due_at)
                    if self._on_events is not None:
                        self._on_events()
                    # The liveness ping repeats the last LISTEN: a no-op that
                    # needs an answer, and the session still shows it as its
                    # statement (pg_stat_activity), as operators look for it.
                    ping = "LISTEN wfj_events" if self._on_events is not None else "LISTEN wfj_wake"
                    pinged = time.monotonic()
                    while not self._stop.is_set():
                        if time.monotonic() - pinged >= self._bounds.liveness_interval_s:
                            with socket_deadline(conn, self._bounds.liveness_timeout_s):
                                conn.execute(ping)
                            pinged = time.monotonic()
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
