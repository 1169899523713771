"""Time limits of the PostgreSQL connections (``store/liveness.py``).

The pool's connections carry keepalives, ``tcp_user_timeout`` and their server
settings as startup options (never a session ``SET``, which a transaction
pooler would hand on to other clients); the LISTEN connection notices a
database that stops answering and LISTENs again once it answers.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from faults.harness import StalledPath

from coordinator.errors import DeadlineExceeded, StoreUnavailable
from coordinator.store import open_store
from coordinator.store.liveness import ConnectionBounds
from coordinator.store.migrate import upgrade
from coordinator.store.notify import WakeListener
from wfj_races import lock_waiters
from wfj_testing import wait_until

_SETTINGS = ("jit", "statement_timeout", "idle_in_transaction_session_timeout")


def _settings(store) -> dict[str, tuple[str, str]]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT name, setting, source FROM pg_settings WHERE name = ANY(:names)"),
            {"names": list(_SETTINGS)},
        )
        return {name: (setting, source) for name, setting, source in rows}


def _session_settings(store) -> list[str]:
    """Settings the server session carries beyond its startup (the transaction's
    own characteristics, which ``BEGIN ISOLATION LEVEL`` sets for the
    transaction alone, left out)."""
    store.ping()  # a statement in autocommit, as the hot path runs them
    with store.engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "SELECT name FROM pg_settings WHERE source = 'session' "
                    "AND name NOT LIKE 'transaction\\_%'"
                )
            ).scalars()
        )


def test_pool_connections_get_their_settings_as_startup_options(pg_database: str) -> None:
    store = open_store(pg_database, bounds=ConnectionBounds(statement_timeout_s=12.5))
    try:
        assert _settings(store) == {
            "jit": ("off", "client"),
            "statement_timeout": ("12500", "client"),
            "idle_in_transaction_session_timeout": ("60000", "client"),
        }
        # Nothing is left set on the server session itself.
        assert _session_settings(store) == []
        with store.engine.connect() as conn:
            params = conn.connection.driver_connection.info.get_parameters()
        assert params["tcp_user_timeout"] == "10000"
        assert (params["keepalives"], params["keepalives_idle"]) == ("1", "3")
        assert params["connect_timeout"] == "5"
    finally:
        store.dispose()


def test_the_urls_own_options_are_kept(pg_database: str) -> None:
    store = open_store(f"{pg_database}?options=-c%20work_mem%3D8MB")
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW work_mem").scalar() == "8MB"
            assert conn.exec_driver_sql("SHOW jit").scalar() == "off"
    finally:
        store.dispose()


def test_a_url_giving_options_twice_keeps_the_last_as_libpq_does(pg_database: str) -> None:
    # SQLAlchemy hands a repeated query parameter on as a tuple; libpq (psql,
    # the LISTEN connection's conninfo) takes the last one given.
    store = open_store(f"{pg_database}?options=-c%20work_mem%3D8MB&options=-c%20lock_timeout%3D5s")
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW lock_timeout").scalar() == "5s"
            assert conn.exec_driver_sql("SHOW work_mem").scalar() != "8MB"
            assert conn.exec_driver_sql("SHOW jit").scalar() == "off"
    finally:
        store.dispose()


def test_behind_a_transaction_pooler_nothing_is_set_on_the_session(pg_database: str) -> None:
    # A separate session URL says statements go through a pooler in
    # transaction mode: a session SET would stay on a server connection other
    # clients get next, and the pooler refuses startup options.
    store = open_store(pg_database, session_url=pg_database)
    try:
        store.ping()
        assert _session_settings(store) == []
        assert {source for _, source in _settings(store).values()} != {"client"}
    finally:
        store.dispose()


def test_a_statement_past_the_limit_is_cancelled_as_a_deadline_not_an_outage(
    pg_database: str,
) -> None:
    store = open_store(pg_database, bounds=ConnectionBounds(statement_timeout_s=0.2))
    try:
        with pytest.raises(DeadlineExceeded, match="statement timeout"):
            with store.statement() as conn:
                conn.exec_driver_sql("SELECT pg_sleep(5)")
        store.ping()  # the pool goes on with a working connection
    finally:
        store.dispose()


def test_migrations_are_exempt_from_the_statement_limit(pg_database: str) -> None:
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_bounds")
    setup = open_store(url)
    upgrade(setup, "0014")
    # A migration that waits longer than the limit: its revision update
    # waits for this lock.
    holder = setup.engine.connect()
    tx = holder.begin()
    holder.exec_driver_sql("SELECT version_num FROM wfj_alembic_version FOR UPDATE")
    store = open_store(url, bounds=ConnectionBounds(statement_timeout_s=0.2))
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            migrating = pool.submit(upgrade, store)

            wait_until(lambda: lock_waiters(setup) >= 1, 30, "the migration to wait for the lock")
            time.sleep(0.6)  # three times the statement limit
            tx.commit()
            result = migrating.result(60)
        assert (result.before, result.after) == ("0014", store.schema_revision())
        # Outside migrations the limit holds.
        with pytest.raises(DeadlineExceeded, match="statement timeout"):
            with store.statement() as conn:
                conn.exec_driver_sql("SELECT pg_sleep(5)")
    finally:
        holder.close()
        store.dispose()
        setup.dispose()
        drop()


def test_bounds_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="liveness_timeout_s"):
        ConnectionBounds(liveness_timeout_s=0)
    with pytest.raises(ValueError, match="statement_timeout_s"):
        ConnectionBounds(statement_timeout_s=float("nan"))
    assert ConnectionBounds().not_serving_within_s <= 10


def test_the_listener_reconnects_when_its_database_stops_answering(pg_database: str) -> None:
    port = sa.engine.make_url(pg_database).port or 5432
    path = StalledPath(port)
    woken: list[int] = []
    events = threading.Event()
    bounds = ConnectionBounds(liveness_interval_s=0.2, liveness_timeout_s=0.5)
    listener = WakeListener(path.url(pg_database), woken.append, events.set, bounds=bounds)
    try:
        listener.start()
        wait_until(lambda: listener.connections == 1 and 0 in woken, 30, "the listener to listen")
        woken.clear()
        path.stall()
        # The pings go unanswered: the listener drops the connection and
        # keeps trying (each new connection is held by the stalled path).
        wait_until(lambda: listener._conn is None, 30, "the listener to give its connection up")
        assert listener.connections == 1
        path.resume()
        wait_until(lambda: listener.connections >= 2, 30, "the listener to listen again")
        # What it missed meanwhile: it wakes everything once.
        wait_until(lambda: {-1, -2, 0} <= set(woken), 30, "the catch-up wake-ups")
        # And notifications reach it again.
        woken.clear()
        store = open_store(pg_database)
        try:
            with store.statement() as conn:
                conn.exec_driver_sql("SELECT pg_notify('wfj_wake', '12345')")
        finally:
            store.dispose()
        wait_until(lambda: 12345 in woken, 30, "a notification after the stall")
    finally:
        listener.stop()
        path.close()


def test_the_listener_stops_promptly_while_its_database_is_silent(pg_database: str) -> None:
    """Stopping sends a cancel request, which a silent database never answers:
    its wait is bounded, so a coordinator shutting down is not held for it."""
    port = sa.engine.make_url(pg_database).port or 5432
    path = StalledPath(port)
    listener = WakeListener(path.url(pg_database), lambda _: None)
    try:
        listener.start()
        wait_until(lambda: listener.connections == 1, 30, "the listener to listen")
        thread = listener._thread
        assert thread is not None
        path.stall()
        started = time.monotonic()
        listener.stop()
        # Unbounded, the cancel request waited psycopg's default 30 s; bounded
        # it waits 1 s and the thread sees the stop within its 1 s poll. The
        # margin holds on a machine with both cores busy.
        assert time.monotonic() - started < 15
        assert not thread.is_alive()
    finally:
        listener.stop()
        path.close()


def test_the_health_ping_does_not_wait_behind_busy_store_threads(pg_database: str) -> None:
    import asyncio

    from coordinator.engine import Engine, EngineConfig

    async def scenario() -> None:
        store = open_store(pg_database, pool_size=2)
        engine = Engine(store, EngineConfig(store_threads=1))
        release = threading.Event()
        try:
            # The one store thread is busy (a slow call, not a silent database).
            busy = asyncio.ensure_future(engine.run_store(release.wait, 30))
            await asyncio.wait_for(engine.ping_store(), 10)
            assert not busy.done()
        finally:
            release.set()
            await busy
            engine.run_store.shutdown()
            store.dispose()

    asyncio.run(scenario())


def test_a_pool_with_no_free_connection_is_unavailable(pg_database: str) -> None:
    from coordinator.store.base import domain_errors

    with pytest.raises(StoreUnavailable, match="no database connection free"):
        with domain_errors():
            raise sa.exc.TimeoutError("QueuePool limit of size 1 overflow 1 reached")
