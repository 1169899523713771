"""Bounds on every PostgreSQL connection, so a database that goes silent ends
calls and is noticed, instead of holding threads for the kernel's
retransmission time (about 15 minutes without them).

Design note. Three things can go quiet, and each has its own bound:

* **The network path** (a partition, a host failover that sends no RST).
  libpq's TCP keepalives find a dead idle connection, and ``tcp_user_timeout``
  ends one whose sent bytes stay unacknowledged: a statement on a dead path
  fails within ``tcp_timeout_s`` and the pool replaces the connection.
  ``connect_timeout`` bounds each new connection the same way.
* **The server** (a statement stuck behind a lock, a server that is
  overloaded): ``statement_timeout`` ends any statement of the coordinator's
  after ``statement_timeout_s`` (migrations lift it for their own transaction);
  ``idle_in_transaction_session_timeout`` ends a session whose transaction a
  stalled client left open, so its locks and the event log's horizon do not
  stay held.
* **A peer that keeps the connection open and never answers** (a proxy or
  pooler that stopped forwarding): no kernel timer fires, because the peer
  acknowledges every byte. The health watch (``api/health.py``) pings the
  database on a schedule and turns health NOT_SERVING when a ping is not
  answered within ``liveness_timeout_s``; the wake-up listener pings its own
  connection the same way and, when the answer does not come, shuts the
  socket down (``socket_deadline``) and reconnects, LISTENing again.

Server settings travel as the connection's startup ``options`` (``-c
name=value``), which belong to that connection alone. None of them is ever a
session ``SET``: behind a pooler in transaction mode a session setting lands
on whichever server connection is free and stays there for other clients.
Such a pooler refuses unknown startup options, so through it (a separate
session URL is given) the coordinator sends none, and the role's settings
apply (``ALTER ROLE ... SET``; docs/deployment.md).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg


@dataclass(frozen=True, slots=True)
class ConnectionBounds:
    """Time limits on the coordinator's PostgreSQL connections (seconds)."""

    # Most time to open a connection (libpq ``connect_timeout``, whole seconds, at least 2).
    connect_timeout_s: int = 5
    # Most time sent bytes may stay unacknowledged (``tcp_user_timeout``); the
    # keepalives probe an idle connection so a dead one is found within it too.
    tcp_timeout_s: float = 10.0
    # Server-side limit on one statement; 0 turns it off.
    statement_timeout_s: float = 30.0
    # Server-side limit on a transaction left idle by its client; 0 turns it off.
    idle_in_transaction_timeout_s: float = 60.0
    # How long a liveness ping (health watch, listener) may go unanswered
    # before the database is treated as gone.
    liveness_timeout_s: float = 5.0
    # Time between liveness pings.
    liveness_interval_s: float = 2.0

    def __post_init__(self) -> None:
        for name in (
            "connect_timeout_s",
            "tcp_timeout_s",
            "statement_timeout_s",
            "idle_in_transaction_timeout_s",
            "liveness_timeout_s",
            "liveness_interval_s",
        ):
            value = getattr(self, name)
            if not 0 <= value < 86_400 or value != value:
                raise ValueError(f"{name} must be between 0 and 86400 seconds, got {value}")
        for name in ("tcp_timeout_s", "liveness_timeout_s", "liveness_interval_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def not_serving_within_s(self) -> float:
        """The longest a silent database goes unnoticed by the health watch."""
        return self.liveness_interval_s + self.liveness_timeout_s


DEFAULT_BOUNDS = ConnectionBounds()


def tcp_connect_args(bounds: ConnectionBounds) -> dict[str, Any]:
    """libpq keepalive, ``tcp_user_timeout`` and ``connect_timeout`` parameters."""
    tcp = bounds.tcp_timeout_s
    # A dead idle connection is found after idle + interval * count <= tcp.
    idle = max(1, int(tcp / 3))
    interval = max(1, int(tcp / 5))
    return {
        "connect_timeout": max(2, int(bounds.connect_timeout_s)),
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": interval,
        "keepalives_count": 3,
        "tcp_user_timeout": int(tcp * 1000),
    }


def server_options(bounds: ConnectionBounds, existing: str | None = None) -> str:
    """The startup ``options`` of a pool connection: JIT off (every statement
    here is short; compiling one costs more than running it), READ COMMITTED,
    and the statement and idle-transaction limits. ``existing`` (the URL's own
    ``options``) comes first; ours are appended."""
    parts = [existing.strip()] if existing and existing.strip() else []
    parts.append("-c jit=off")
    # The isolation the store's rules rely on (store/base.py), for the
    # statements run outside a transaction too (the event loop's autocommit
    # connection), whatever the database's or role's default.
    parts.append(r"-c default_transaction_isolation=read\ committed")
    parts.append(f"-c statement_timeout={int(bounds.statement_timeout_s * 1000)}")
    parts.append(
        f"-c idle_in_transaction_session_timeout={int(bounds.idle_in_transaction_timeout_s * 1000)}"
    )
    return " ".join(parts)


@contextlib.contextmanager
def socket_deadline(conn: psycopg.Connection[Any], timeout_s: float) -> Iterator[None]:
    """Shut ``conn``'s socket down if the block has not finished within
    ``timeout_s``: a call blocked on a peer that never answers then fails
    (psycopg raises ``OperationalError``) instead of waiting forever.

    ``shutdown`` acts on the socket, not on a file descriptor, so it is safe
    from another thread while the call waits on it; the connection is
    unusable afterwards and the caller reconnects.
    """
    fired = threading.Event()
    fd = conn.fileno()

    def cut() -> None:
        fired.set()
        with contextlib.suppress(OSError):
            sock = socket.socket(fileno=os.dup(fd))
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()

    timer = threading.Timer(timeout_s, cut)
    timer.daemon = True
    timer.start()
    try:
        yield
    except psycopg.Error as e:
        if fired.is_set():
            raise psycopg.OperationalError(
                f"no answer from the database within {timeout_s:g}s"
            ) from e
        raise
    finally:
        timer.cancel()
    if fired.is_set():
        raise psycopg.OperationalError(f"no answer from the database within {timeout_s:g}s")


__all__ = [
    "DEFAULT_BOUNDS",
    "ConnectionBounds",
    "server_options",
    "socket_deadline",
    "tcp_connect_args",
]
