"""Deterministic interleavings for race tests, on both stores.

A ``Gate`` holds, in a connection of its own, what racing writers must wait
for: on PostgreSQL a lock (a job's row lock, or an uncommitted row under a
unique key), on SQLite the database's write lock. Racers started through the
gate run in threads; ``open`` waits until the given number of them is blocked
on what the gate holds, then commits (or rolls back), so they all go at once.
Nothing here sleeps: blocked racers are observed (``pg_stat_activity`` on
PostgreSQL, the racer's ``BEGIN IMMEDIATE`` on SQLite).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa

from coordinator.model import JobStatus, NewJob
from coordinator.store import Store, open_store
from coordinator.store.schema import concurrency_limits, jobs
from coordinator.store.scope_settings import LIMIT_GATE
from wfj_testing import wait_until

WAIT_S = 30


def lock_waiters(store: Store) -> int:
    """Sessions of ``store``'s PostgreSQL database waiting for a lock."""
    with store.engine.connect() as probe:
        return int(
            probe.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ).scalar_one()
        )


class Gate:
    """Blocks racers on a lock held in another connection until ``open``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_postgres = not url.startswith("sqlite")
        self._holder_store = open_store(url)
        self._conn = self._holder_store.engine.connect()
        # SQLite: begin() is BEGIN IMMEDIATE (the store's engine says so), so
        # the gate holds the write lock from here on.
        self._tx = self._conn.begin()
        self._stores: list[Store] = []
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="racer")
        self._arrived = 0
        self._lock = threading.Lock()

    # -- what the gate holds --------------------------------------------------

    def lock_job(self, job_id: str) -> None:
        """Hold the job's row lock (PostgreSQL); SQLite holds the write lock already."""
        if self.is_postgres:
            self._conn.execute(
                sa.text("SELECT id FROM wfj_jobs WHERE id = :id FOR UPDATE"), {"id": job_id}
            )

    def insert(self, job: NewJob) -> None:
        """Store ``job`` PENDING, uncommitted until the gate opens."""
        row = dataclasses.asdict(job)
        row["status"] = int(JobStatus.PENDING)
        self._conn.execute(jobs.insert(), row)

    def change_limit(self, kind: int, value: str, max_running: int, now: int) -> None:
        """Hold a concurrency limit change as ``limit_set`` writes it (the
        limit gate locked for update and rewritten), uncommitted (PostgreSQL)."""
        self._conn.execute(
            sa.text("SELECT value FROM wfj_cluster_flags WHERE name = :gate FOR UPDATE"),
            {"gate": LIMIT_GATE},
        )
        self._conn.execute(
            concurrency_limits.insert().values(kind=kind, value=value, max_running=max_running)
        )
        self._conn.execute(
            sa.text(
                "UPDATE wfj_cluster_flags SET updated_at = :now, value = CAST("
                "(SELECT count(*) FROM wfj_concurrency_limits) AS text) WHERE name = :gate"
            ),
            {"gate": LIMIT_GATE, "now": now},
        )

    def advance_bucket(self, kind: int, value: str, tat: int) -> None:
        """Hold a claim's advance of a rate bucket (``tat`` rewritten as a
        claim's charge writes it), uncommitted."""
        self._holder_store._settings.rate_buckets_write(self._conn, {(kind, value): (tat, 0, 0)})

    def share_limit_gate(self) -> None:
        """Hold the limit gate's share lock, as a claim in flight does (PostgreSQL)."""
        self._conn.execute(
            sa.text("SELECT value FROM wfj_cluster_flags WHERE name = :gate FOR KEY SHARE"),
            {"gate": LIMIT_GATE},
        )

    # -- racers ---------------------------------------------------------------

    def store(self) -> Store:
        """A store of its own for one racer (SQLite stores have one connection)."""
        store = open_store(self.url)
        self.watch(store)
        self._stores.append(store)
        return store

    def watch(self, store: Store) -> None:
        """Count ``store``'s transactions that reach the SQLite write lock."""
        if self.is_postgres:
            return

        @sa.event.listens_for(store.engine, "before_cursor_execute")
        def _arrive(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if statement.startswith("BEGIN IMMEDIATE"):
                with self._lock:
                    self._arrived += 1

    def race(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` in a racer thread."""
        return self._pool.submit(fn, *args)

    def blocked(self) -> int:
        """Racers waiting on what the gate holds (SQLite: that reached it)."""
        if not self.is_postgres:
            with self._lock:
                return self._arrived
        return lock_waiters(self._holder_store)

    def wait_blocked(self, n: int) -> None:
        wait_until(lambda: self.blocked() >= n, WAIT_S, f"{n} racer(s) to block on the gate")

    def open(self, *, waiting: int, commit: bool = True) -> None:
        """Wait until ``waiting`` racers are blocked, then release them all."""
        self.wait_blocked(waiting)
        if commit:
            self._tx.commit()
        else:
            self._tx.rollback()

    def close(self) -> None:
        if self._tx.is_active:
            self._tx.rollback()
        self._conn.close()
        self._pool.shutdown(wait=True)
        for store in [*self._stores, self._holder_store]:
            store.dispose()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class PausedCommit:
    """Holds ``store``'s next transaction at its COMMIT until ``release``.

    The transaction has done all its work and keeps its locks (on SQLite the
    write lock) while paused, which is the moment another writer's reads are
    stale: what it read before the pause no longer holds once it commits.
    ``racer_blocked`` waits until another connection waits for those locks.
    """

    def __init__(self, store: Store, url: str) -> None:
        self.url = url
        self.reached = threading.Event()
        self._go = threading.Event()
        self._armed = True
        self._arrived = 0
        self._lock = threading.Lock()

        @sa.event.listens_for(store.engine, "commit")
        def _hold(_conn: Any) -> None:
            if self._armed:
                self._armed = False
                self.reached.set()
                self._go.wait(WAIT_S)

    def wait_reached(self) -> None:
        assert self.reached.wait(WAIT_S), "the paused transaction never reached its commit"

    def watch(self, racer: Store) -> None:
        """Count ``racer``'s transactions that reach the SQLite write lock."""

        @sa.event.listens_for(racer.engine, "before_cursor_execute")
        def _arrive(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if statement.startswith("BEGIN IMMEDIATE"):
                with self._lock:
                    self._arrived += 1

    def racer_blocked(self) -> None:
        """Wait until a racer waits for the paused transaction's locks."""
        if self.url.startswith("sqlite"):
            wait_until(lambda: self._arrived >= 1, WAIT_S, "a racer to reach the write lock")
            return
        probe = open_store(self.url)
        try:
            wait_until(
                lambda: lock_waiters(probe) >= 1,
                WAIT_S,
                "a racer to wait for the paused transaction's locks",
            )
        finally:
            probe.dispose()

    def release(self) -> None:
        self._go.set()


def outcome_of(future: Future[Any]) -> Any:
    """The racer's result, or the exception it raised (as a value)."""
    try:
        return future.result(timeout=WAIT_S)
    except Exception as e:  # noqa: BLE001 - compared by the test
        return e
