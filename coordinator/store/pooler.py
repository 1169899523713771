"""Connection poolers in front of PostgreSQL (PgBouncer and the like).

A pooler in **transaction** (or statement) mode gives each transaction
whichever server connection is free. Statements are fine with that, and so
are the coordinator's advisory locks (all transaction-scoped), but two things
are not:

* ``LISTEN`` belongs to a server session: through such a pooler the wake-up
  listener would listen on a connection that is soon handed to someone else,
  and cross-replica wake-ups would silently stop;
* psycopg's server-side prepared statements (prepared after a statement has
  run five times on a connection) live in one server session too, and fail
  with "prepared statement … does not exist" on the next one.

So the coordinator takes a second URL for its session connection (the
listener), ``--session-database-url`` / ``WFJOBS_SESSION_DATABASE_URL``, that
reaches PostgreSQL directly (or through a pooler in session mode); when it is
given, statements are sent without server-side preparation. At start the
coordinator checks both URLs and refuses a transaction pooler where a session
is needed (``check_session_urls``).

Detection: two client connections each ask for ``pg_backend_pid()`` a few
times, one statement at a time. Connected directly, each connection always
gets its own server process and the two differ; through a transaction pooler
a connection's pid changes between statements, or the two connections share
one.
"""

from __future__ import annotations

import psycopg
from psycopg.conninfo import make_conninfo

from coordinator.errors import StoreUnavailable
from coordinator.masking import display_url, mask_credentials
from coordinator.store.liveness import DEFAULT_BOUNDS, tcp_connect_args
from coordinator.store.urls import libpq_conninfo

PROBE_ROUNDS = 3


def shares_server_sessions(url: str) -> bool:
    """True when connections to ``url`` do not keep one server session each
    (a pooler in transaction or statement mode is in between).

    Raises:
        StoreUnavailable: the database cannot be reached.
    """
    # Bounded like every other connection: a silent database fails the check.
    conninfo = make_conninfo(libpq_conninfo(url), **tcp_connect_args(DEFAULT_BOUNDS))
    try:
        with (
            psycopg.connect(conninfo, autocommit=True, prepare_threshold=None) as a,
            psycopg.connect(conninfo, autocommit=True, prepare_threshold=None) as b,
        ):
            seen_a: set[int] = set()
            seen_b: set[int] = set()
            for _ in range(PROBE_ROUNDS):
                for conn, seen in ((a, seen_a), (b, seen_b)):
                    row = conn.execute("SELECT pg_backend_pid()").fetchone()
                    assert row is not None
                    seen.add(int(row[0]))
    except psycopg.Error as e:
        raise StoreUnavailable(f"database unavailable: {mask_credentials(str(e))}") from e
    return len(seen_a) > 1 or len(seen_b) > 1 or bool(seen_a & seen_b)


def check_session_urls(url: str, session_url: str | None) -> None:
    """Refuse a transaction pooler where the coordinator needs a session.

    Raises:
        ValueError: ``url`` is behind a transaction pooler and no
            ``session_url`` is given, or ``session_url`` is behind one too.
        StoreUnavailable: the database cannot be reached.
    """
    if session_url is None:
        if shares_server_sessions(url):
            raise ValueError(
                f"the database URL {display_url(url)!r} goes through a connection pooler in "
                "transaction or statement mode (such as PgBouncer with pool_mode=transaction): "
                "its statements run in changing server sessions, so LISTEN wake-ups and "
                "prepared statements cannot work through it. Also give a direct connection to "
                "PostgreSQL (or one through a pooler in session mode) as "
                "--session-database-url (WFJOBS_SESSION_DATABASE_URL), or point "
                "--database-url past the pooler"
            )
        return
    if shares_server_sessions(session_url):
        raise ValueError(
            f"the session database URL {display_url(session_url)!r} goes through a connection "
            "pooler in transaction or statement mode; it must reach PostgreSQL directly or "
            "through a pooler in session mode (LISTEN needs a session of its own)"
        )


__all__ = ["check_session_urls", "shares_server_sessions"]
