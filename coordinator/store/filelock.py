"""One coordinator per SQLite file, enforced with an OS file lock.

SQLite has no cross-process ``SKIP LOCKED`` or ``LISTEN/NOTIFY``, so two
coordinators on one file would lease around each other and learn of each
other's work only from their safety-net polls. ``serve`` therefore takes an
exclusive ``flock`` on ``<database>.coordinator.lock`` before opening the
store and keeps it until the process exits (the OS drops it if the process
dies, so a crash never leaves a stale lock). The file holds the owner's pid,
used only to name it in the error. Other processes (``migrate``, the CLI,
tools reading the file) do not take the lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import sqlalchemy as sa

from coordinator.errors import DatabaseInUse


class SqliteFileLock:
    """The held lock; ``release`` (or process exit) frees it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def sqlite_database_path(url: str) -> Path | None:
    """The database file of an SQLite URL; None for other stores and in-memory SQLite."""
    if not url.startswith("sqlite"):
        return None
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        return None  # not a URL at all: opening the store refuses it with a clear error
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file::memory:"):
        return None
    return Path(os.path.realpath(database))


def lock_sqlite_file(url: str) -> SqliteFileLock | None:
    """Take the coordinator lock of ``url``'s SQLite file (None for other stores).

    Raises ``DatabaseInUse`` naming the holder while another process holds it.
    """
    database = sqlite_database_path(url)
    if database is None:
        return None
    path = database.with_name(database.name + ".coordinator.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise DatabaseInUse(
            f"another coordinator (pid {holder}) is serving the SQLite database {database}; "
            "one coordinator per SQLite file: stop that one, or use PostgreSQL to run "
            "several replicas"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return SqliteFileLock(path, fd)


__all__ = ["SqliteFileLock", "lock_sqlite_file", "sqlite_database_path"]
