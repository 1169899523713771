"""PostgreSQL administration for the bench: its own databases, counters, version.

The bench never touches a database it did not create: every figure works in
one of `BENCH_DATABASES`, dropped and re-created when the figure starts.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg

# The second workflow-jobs database holds the large table of the ratio figures, so
# that their two cases can alternate run by run.
# The rate-limit figure has two of its own (no limit, a limit), the ordering
# figure three (long keys, short keys, unkeyed).
BENCH_DATABASES = (
    "wfjobs_bench",
    "wfjobs_bench_large",
    "pgqueuer_bench",
    "procrastinate_bench",
    "wfjobs_bench_rate_none",
    "wfjobs_bench_rate",
    "wfjobs_bench_ordering",
    "wfjobs_bench_ordering_short",
    "wfjobs_bench_unordered",
)
# The bench's own measuring sessions (counters, samplers, the snapshot holder)
# connect under this name, so that per-backend CPU leaves them out.
PROBE_APPLICATION_NAME = "wfjobs-bench-probe"
# The session advisory lock a bench run holds on its server for as long as it
# runs: two runs on one server would drop each other's databases.
BENCH_LOCK = 0x7766_6A62  # "wfjb"


class ServerBusy(Exception):
    """Another bench run holds the server (`PostgresServer.exclusive`)."""


@dataclass(frozen=True)
class PostgresServer:
    """Where the bench's PostgreSQL listens (loopback only).

    Attributes:
        host: Loopback address of the server.
        port: Its port.
        user: Role used for everything (trust authentication on the bench machine).
    """

    host: str = "127.0.0.1"
    port: int = 5432
    user: str = "root"
    lock: int = BENCH_LOCK

    @classmethod
    def from_environment(cls) -> PostgresServer:
        return cls(
            host=os.environ.get("BENCH_PGHOST", "127.0.0.1"),
            port=int(os.environ.get("BENCH_PGPORT", "5432")),
            user=os.environ.get("BENCH_PGUSER", "root"),
        )

    def dsn(self, database: str) -> str:
        """A libpq URL (psycopg, asyncpg)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    def sqlalchemy_url(self, database: str) -> str:
        """The URL form the coordinator takes (`--database-url`)."""
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"

    def connect(self, database: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(self.dsn(database), autocommit=True)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the server's bench lock while the block runs.

        Raises `ServerBusy`, naming the holder's backend, when another bench
        run holds it: every run re-creates the same databases, so two at once
        would drop each other's tables mid-figure.
        """
        with psycopg.connect(
            self.dsn("postgres"), autocommit=True, application_name=PROBE_APPLICATION_NAME
        ) as conn:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.lock,)).fetchone()
            if not (row and row[0]):
                holder = conn.execute(
                    "SELECT a.pid, a.client_addr, to_char(a.backend_start, 'HH24:MI:SS') "
                    "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 "
                    "AND l.objid = %s AND l.objsubid = 1",
                    (self.lock,),
                ).fetchone()
                who = (
                    f"backend pid {holder[0]} from {holder[1] or 'a local socket'}, "
                    f"connected at {holder[2]}"
                    if holder
                    else "a session that just ended"
                )
                raise ServerBusy(
                    f"another bench run is using the bench databases on {self.host}:{self.port} "
                    f"({who}); wait for it to finish, or point this run at another server "
                    "with BENCH_PGHOST / BENCH_PGPORT"
                )
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (self.lock,))

    def recreate_database(self, name: str) -> None:
        """Drop `name` (ending its sessions) and create it empty."""
        if name not in BENCH_DATABASES:
            raise ValueError(f"{name!r} is not a bench database")
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')

    def drop_database(self, name: str) -> None:
        if name not in BENCH_DATABASES:
            raise ValueError(f"{name!r} is not a bench database")
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def version(self) -> str:
        with self.connect() as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return f"PostgreSQL {row[0].split()[0]}" if row else "PostgreSQL (unknown version)"

    def transaction_count(self, database: str) -> int:
        """Committed + rolled-back transactions of `database` so far.

        Read from the `postgres` database so that reading does not count.
        PostgreSQL 15 flushes these counters about once a second (idle
        backends within ~10 s), so callers measure over long windows.
        """
        with self.connect() as conn:
            row = conn.execute(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
                (database,),
            ).fetchone()
        return int(row[0]) if row else 0

    def scalar(self, database: str, sql: str, params: tuple = ()) -> object:
        with self.connect(database) as conn:
            row = conn.execute(sql, params).fetchone()
        return row[0] if row else None
