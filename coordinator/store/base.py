"""Connection handling shared by every query module: the store's one core
(``StoreCore``) and what every table family takes from it (``Family``).

The store is synchronous SQLAlchemy Core; the engine calls it from a thread
pool so the gRPC event loop never blocks on the database. Database errors are
turned into ``coordinator.errors`` exceptions here, at the edge.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg_pool
import sqlalchemy as sa
from psycopg.types.array import ListBinaryDumper
from sqlalchemy import event, exc
from sqlalchemy.dialects import postgresql, sqlite

from coordinator.errors import (
    Aborted,
    AlreadyExists,
    DeadlineExceeded,
    InvalidArgument,
    SchemaMismatch,
    StoreUnavailable,
)
from coordinator.masking import display_url, mask_credentials
from coordinator.store.liveness import (
    DEFAULT_BOUNDS,
    ConnectionBounds,
    server_options,
    tcp_connect_args,
)
from coordinator.store.schema import SCHEMA_REVISION
from coordinator.store.urls import query_options, sqlalchemy_url

log = logging.getLogger(__name__)

# Errors a row's own values cause when written (out of range, refused by a
# constraint, not bindable), as opposed to a database that went away.
ROW_WRITE_ERRORS = (exc.DataError, exc.IntegrityError, OverflowError, ValueError, TypeError)

# Wake-up times travel rounded up to this many microseconds, so a batch with
# many due times close together sends few of them.
WAKE_GRAIN_US = 10_000
# Most due times in one notification (its payload must stay under 8000 bytes).
WAKE_MAX_TIMES = 400


def wake_payload(due_at: int | Iterable[int]) -> str:
    """The ``wfj_wake`` payload for one due time or several: comma-separated.

    Times are rounded up to ``WAKE_GRAIN_US`` and deduplicated. When more than
    ``WAKE_MAX_TIMES`` distinct times remain, an evenly spaced selection that
    keeps the earliest and the latest is sent (jobs between two sent times
    are leased at the later one).
    """
    if isinstance(due_at, int):
        return str(due_at)
    times = sorted({-(-t // WAKE_GRAIN_US) * WAKE_GRAIN_US for t in due_at})
    if not times:
        return "0"
    if len(times) > WAKE_MAX_TIMES:
        step = (len(times) - 1) / (WAKE_MAX_TIMES - 1)
        times = [times[round(i * step)] for i in range(WAKE_MAX_TIMES)]
    return ",".join(str(t) for t in times)


# ``Connection.info`` key marking a transaction that writes job events.
_EVENTS_WRITTEN = "wfj_events_written"

_PARAM = re.compile(r"(?<![:\w]):([a-z_]+)")
# A parameter cast to an array type: ``CAST(:ids AS text[])``.
_ARRAY_PARAM = re.compile(r"CAST\(:([a-z_]+) AS ([a-z0-9_ ]+)\[\]\)")
_DRIVER_SQL: dict[str, str] = {}


def driver_sql(sql: str) -> str:
    """``sql`` with ``:name`` parameters rewritten for psycopg (``%(name)s``).

    The hot-path statements run through ``exec_driver_sql``, which skips
    SQLAlchemy's per-call statement processing (about 150 µs a call); the
    rewrite happens once per distinct statement.

    A parameter cast to an array type (``CAST(:ids AS text[])``, how the
    batched statements pass one value per job) is sent in binary
    (``%(ids)b``): psycopg builds a text-format array literal element by
    element in Python (escaping and quoting each), about five times the cost
    of the binary form, and that was paid per job.
    """
    out = _DRIVER_SQL.get(sql)
    if out is None:
        binary = _ARRAY_PARAM.sub(r"CAST(%(\1)b AS \2[])", sql)
        out = _DRIVER_SQL[sql] = _PARAM.sub(r"%(\1)s", binary)
    return out


# psycopg's placeholders in ``driver_sql`` text: ``%(name)s``, ``%(name)b``, ``%%``.
_DRIVER_PARAM = re.compile(r"%(?:\((\w+)\)([sb])|%)")


@dataclass(frozen=True)
class Positional:
    """A ``driver_sql`` statement as PostgreSQL's own text, ``$n`` placeholders.

    Attributes:
        text: The statement with ``$1``, ``$2``, … (a name used twice is one number).
        names: The parameter of each number, in order.
        binary: The numbers (0-based) psycopg sends in binary (``%(name)b``).
    """

    text: str
    names: tuple[str, ...]
    binary: frozenset[int]

    def values(self, params: dict[str, Any]) -> list[Any]:
        """The values of ``params`` in ``$n`` order; arrays sent in binary are marked so."""
        return [
            BinaryList(params[name]) if i in self.binary else params[name]
            for i, name in enumerate(self.names)
        ]


class BinaryList(list[Any]):
    """A list psycopg sends as a binary array (the event loop's connection
    dumps it with ``ListBinaryDumper``): what ``%(name)b`` asks for."""


_POSITIONAL: dict[str, Positional] = {}


def positional(sql: str) -> Positional:
    """``sql`` (``driver_sql`` text) with ``$n`` placeholders, converted once per text.

    Sent through a raw cursor, the text goes to the server as it is: psycopg
    does not parse it again on each execution (it does so for any statement
    longer than its 4,096-byte cache, the group-commit insert among them).
    """
    found = _POSITIONAL.get(sql)
    if found is not None:
        return found
    names: list[str] = []
    binary: set[int] = set()

    def number(match: re.Match[str]) -> str:
        name, kind = match.group(1), match.group(2)
        if name is None:
            return "%"
        if name not in names:
            names.append(name)
        index = names.index(name)
        if kind == "b":
            binary.add(index)
        return f"${index + 1}"

    found = _POSITIONAL[sql] = Positional(
        _DRIVER_PARAM.sub(number, sql), tuple(names), frozenset(binary)
    )
    return found


PLAN_CACHE_MODES = ("force_generic_plan", "auto", "force_custom_plan")
# psycopg prepares a statement once it has run this many times in a session.
PREPARE_THRESHOLD = 1


def plan_cache_mode_setting() -> str:
    """The ``plan_cache_mode`` of the coordinator's sessions: ``force_generic_plan``
    unless ``WFJOBS_PLAN_CACHE_MODE`` names another of ``PLAN_CACHE_MODES``."""
    mode = os.environ.get("WFJOBS_PLAN_CACHE_MODE", "") or PLAN_CACHE_MODES[0]
    if mode not in PLAN_CACHE_MODES:
        raise ValueError(
            f"WFJOBS_PLAN_CACHE_MODE={mode!r} is not one of {', '.join(PLAN_CACHE_MODES)}"
        )
    return mode


def create_sa_engine(
    url: str,
    *,
    pool_size: int = 8,
    prepare: bool = True,
    bounds: ConnectionBounds = DEFAULT_BOUNDS,
) -> sa.Engine:
    """An SQLAlchemy engine configured for the dialect in ``url``.

    ``prepare=False`` turns psycopg's server-side prepared statements off, for
    statements sent through a pooler in transaction mode (``store/pooler.py``).
    PostgreSQL connections get ``bounds`` (``store/liveness.py``): keepalives,
    ``tcp_user_timeout`` and ``connect_timeout`` always; JIT off, generic
    plans (``plan_cache_mode_setting``) and the statement and
    idle-transaction limits as startup options, except through such a
    pooler (``prepare=False``), which refuses them.

    Raises:
        ValueError: ``url`` is not an SQLite or PostgreSQL URL (the message
            shows the URL with its password masked).
    """
    url = sqlalchemy_url(url)
    try:
        scheme = sa.engine.make_url(url).get_backend_name()
    except sa.exc.ArgumentError:
        scheme = ""
    if scheme not in ("sqlite", "postgresql", "postgres"):
        raise ValueError(
            f"database URL {display_url(url)!r} is not one this coordinator can open; use "
            "sqlite:///path/to/file.db or postgresql://user:password@host:5432/database"
        )
    if url.startswith("sqlite"):
        engine = sa.create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=1,
            max_overflow=0,
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Let SQLAlchemy's begin() emit BEGIN IMMEDIATE itself: a writer
            # takes the write lock up front instead of failing to upgrade.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: sa.Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    engine = sa.create_engine(
        url,
        connect_args=postgres_connect_args(url, prepare=prepare, bounds=bounds),
        pool_size=pool_size,
        max_overflow=pool_size,
        # No pre-ping: it costs a round trip per checkout. A dropped connection
        # fails its statement, is invalidated by the pool and reported as
        # StoreUnavailable; callers retry.
        pool_recycle=1800,
        # Every transaction of the store begins READ COMMITTED (psycopg sends
        # BEGIN ISOLATION LEVEL READ COMMITTED, so it holds through a
        # transaction pooler too), whatever the database's default: a rule
        # that locks a row and then, in a new statement, reads what the
        # lock's previous holders committed (a group's completion,
        # store/groups.py; an ordering key's next job, store/ordering.py)
        # needs each statement's own snapshot. Under REPEATABLE READ the
        # second of two replicas ending a group's last two members would not
        # see the first's end, and the group would never complete.
        isolation_level="READ COMMITTED",
    )
    if prepare:
        _without_options_if_refused(engine)
    return engine


def postgres_connect_args(
    url: str, *, prepare: bool, bounds: ConnectionBounds = DEFAULT_BOUNDS
) -> dict[str, Any]:
    """The psycopg connection parameters the coordinator adds to a PostgreSQL URL
    (the URL's own options as libpq reads them, ``query_options``, then its own)."""
    given = query_options(url)
    connect_args: dict[str, Any] = {**given, **tcp_connect_args(bounds)}
    if prepare:
        # Generic plans: with the server's default (auto) the hot statements,
        # whose parameters are arrays, were planned again on every call, and
        # planning cost 2-20 times their execution. psycopg prepares a
        # statement on its second use (its default is the fifth): each pooled
        # session plans the fair claim (about 10 ms of planning on a loaded
        # server) twice instead of five times. A statement run once is not
        # prepared. Through a transaction pooler nothing is prepared: the
        # server's default stays.
        connect_args["prepare_threshold"] = PREPARE_THRESHOLD
        connect_args["options"] = (
            server_options(bounds, given.get("options"))
            + f" -c plan_cache_mode={plan_cache_mode_setting()}"
        )
    else:
        connect_args["prepare_threshold"] = None
    return connect_args


LOOP_STATEMENTS_ENV = "WFJOBS_STORE_ON_LOOP"
# Connections the event loop's statements hold at most at once; one is kept
# open. The group-commit insert and the events notification each run one at
# a time; completions take at most the rest (``LOOP_COMPLETIONS``) and go
# through the store's threads beyond that, so a completion waiting on a row
# lock, or a burst of slow ones under a long-held snapshot, never leaves an
# enqueue waiting for a connection.
LOOP_POOL_SIZE = 4
LOOP_COMPLETIONS = LOOP_POOL_SIZE - 2


def loop_statements_setting() -> bool:
    """Whether the hot statements that can run on the event loop do (``WFJOBS_STORE_ON_LOOP``:
    ``1``, the default, or ``0``: every statement through the store's threads)."""
    value = os.environ.get(LOOP_STATEMENTS_ENV, "") or "1"
    if value not in ("0", "1"):
        raise ValueError(f"{LOOP_STATEMENTS_ENV}={value!r} is neither 1 (the default) nor 0")
    return value == "1"


def _without_options_if_refused(engine: sa.Engine) -> None:
    """Connect without the startup ``options`` once a server refuses them.

    A pooler in transaction mode (PgBouncer) refuses startup options it does
    not track, and a URL given without a session URL may still go through
    one: ``migrate`` runs on it, and ``serve`` connects before its pooler
    check refuses such a URL. Those connections go on without the options
    (the role's settings apply, docs/deployment.md); nothing is ever sent as
    a session ``SET`` instead.
    """
    refused = False

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        nonlocal refused
        if not refused:
            try:
                return dialect.connect(*cargs, **cparams)
            except dialect.loaded_dbapi.OperationalError as e:
                if not refuses_options(str(e)):
                    raise
                refused = True
                log.warning(
                    "the database refused the connection's startup options (a pooler such as "
                    "PgBouncer in between?): connecting without them, so JIT and the statement "
                    "limits are the role's settings (%s)",
                    _first_line(str(e)),
                )
        cparams.pop("options", None)
        return dialect.connect(*cargs, **cparams)


def refuses_options(message: str) -> bool:
    """Whether a connection error says the server refused the startup ``options``."""
    message = message.lower()
    return "unsupported" in message and "options" in message


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return mask_credentials(lines[0] if lines else text)


def _driver_message(e: exc.DBAPIError) -> str:
    """The driver's own first line, credentials masked (SQL and parameters left out)."""
    lines = str(e.orig or e).strip().splitlines()
    return mask_credentials(lines[0] if lines else type(e).__name__)


@contextlib.contextmanager
def domain_errors() -> Iterator[None]:
    """Database errors as domain errors.

    A value the database refuses (out of range, NUL in text, a constraint) came
    from a caller: it is ``InvalidArgument`` (``AlreadyExists`` for a unique
    key), never an unexpected error. A database that cannot be reached is
    ``StoreUnavailable`` (and only that turns health NOT_SERVING); a
    transaction the database gave up is ``Aborted`` or ``DeadlineExceeded``
    (``_operational_failure``), both retryable.
    """
    try:
        yield
    except exc.IntegrityError as e:
        message = _driver_message(e)
        if getattr(e.orig, "sqlstate", None) == "23505" or "UNIQUE constraint" in message:
            raise AlreadyExists(f"the request conflicts with a stored row: {message}") from e
        raise InvalidArgument(f"the database refused a value of this request: {message}") from e
    except exc.DataError as e:
        raise InvalidArgument(
            f"the database refused a value of this request: {_driver_message(e)} "
            "(strings may not contain NUL; numbers must stay within their documented bounds)"
        ) from e
    except exc.OperationalError as e:
        failure = _operational_failure(e)
        if failure is None:
            raise  # neither the database's state nor the call's: a bug (INTERNAL, logged)
        raise failure from e
    except exc.InterfaceError as e:
        raise StoreUnavailable(
            f"database connection lost: {mask_credentials(str(e.orig or e))}"
        ) from e
    except exc.TimeoutError as e:
        # The pool had no connection to give within its timeout: every one is
        # held by a call the database has not answered.
        raise StoreUnavailable(f"no database connection free: {e}") from e


# PostgreSQL SQLSTATEs of a transaction the server gave up while it is up:
# serialization failure, deadlock, a lock not available (lock_timeout), and an
# idle transaction ended by idle_in_transaction_session_timeout.
_ABORTED_STATES = frozenset({"40001", "40P01", "55P03", "25P03"})
_STATEMENT_TIMEOUT = "57014"
# SQLSTATE classes and codes of a server that cannot serve: connection
# exceptions, insufficient resources (too many connections, disk full),
# authorization, a database that does not exist, shutdown, crash recovery.
_UNAVAILABLE_CLASSES = ("08", "53", "28", "3D", "57P", "58")
# SQLite result codes of a database that is busy (another writer held the
# lock past the busy timeout): the call may be sent again.
_SQLITE_BUSY = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED"})


def _operational_failure(e: exc.OperationalError) -> Exception | None:
    """What an ``OperationalError`` means for the call: the database cannot
    be reached (``StoreUnavailable``), it gave the transaction up
    (``Aborted``) or timed a statement out (``DeadlineExceeded``); None when it
    is neither (a statement the coordinator should not have sent), which the
    caller re-raises as the bug it is.

    A PostgreSQL error without an SQLSTATE comes from the connection itself
    (it could not be opened, broke, or went silent past its deadline), but for
    the driver refusing a statement before sending it (more parameters than
    the protocol carries).
    """
    orig = e.orig
    text = mask_credentials(str(orig or e))
    if e.connection_invalidated:
        return StoreUnavailable(f"database unavailable: {text}")
    name = getattr(orig, "sqlite_errorname", None)
    if name is not None:
        if name in _SQLITE_BUSY:
            return Aborted(f"the database was busy; retry the call: {text}")
        if name == "SQLITE_ERROR":
            return None
        return StoreUnavailable(f"database unavailable: {text}")
    state = getattr(orig, "sqlstate", None)
    if state in _ABORTED_STATES:
        return Aborted(f"the database aborted this call's transaction ({state}); retry it: {text}")
    if state == _STATEMENT_TIMEOUT:
        return DeadlineExceeded(
            f"a statement ran past the database's statement timeout; retry the call: {text}"
        )
    if state is None:
        return (
            None
            if "number of parameters must be between" in text
            else (StoreUnavailable(f"database unavailable: {text}"))
        )
    if state.startswith(_UNAVAILABLE_CLASSES):
        return StoreUnavailable(f"database unavailable: {text}")
    return None


async def _configure_loop_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """A new loop connection sends ``BinaryList`` parameters as binary arrays."""
    conn.adapters.register_dumper(BinaryList, ListBinaryDumper)


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """What the store's dialect can do, so the engine never asks which dialect it is."""

    # Replicas share one store and keep the database server's clock, not
    # their hosts' (``DatabaseClock``); false when one coordinator owns the store.
    database_clock: bool
    # ``job_claim_fair`` acquires a fair batch in one statement; false sends
    # every acquisition through the counting path.
    one_statement_claim: bool
    # ``job_insert_many`` can lease due jobs to waiting workers as it inserts
    # them (direct dispatch).
    lease_at_insert: bool
    # Writes notify every replica (LISTEN/NOTIFY on ``wfj_wake``); false when the
    # engine wakes itself after its own writes.
    listen_notify: bool
    # Chores that one replica at a time may run take a transaction-scoped
    # advisory lock; false when one coordinator owns the store anyway.
    advisory_lock_leadership: bool
    # Most threads that may run store calls at once; None leaves it to the
    # engine's configuration (SQLite has one writer: 1).
    max_store_threads: int | None


POSTGRES_CAPABILITIES = StoreCapabilities(
    database_clock=True,
    one_statement_claim=True,
    lease_at_insert=True,
    listen_notify=True,
    advisory_lock_leadership=True,
    max_store_threads=None,
)
SQLITE_CAPABILITIES = StoreCapabilities(
    database_clock=False,
    one_statement_claim=False,
    lease_at_insert=False,
    listen_notify=False,
    advisory_lock_leadership=False,
    max_store_threads=1,
)


def _take_events_mark(conn: sa.Connection) -> bool:
    """Whether the work on ``conn`` wrote job events (the mark is cleared).

    A connection the database dropped mid-statement is invalidated: its
    ``info`` can no longer be read (SQLAlchemy raises PendingRollbackError,
    which would hide the driver's error from ``domain_errors``), and the
    statement that lost it is raising anyway.
    """
    if conn.invalidated:
        return False
    return bool(conn.info.pop(_EVENTS_WRITTEN, False))


class StoreCore:
    """The one core every table family shares: the SQLAlchemy engine, the
    transaction helpers, the dialect and the connection bounds."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 8,
        session_url: str | None = None,
        bounds: ConnectionBounds = DEFAULT_BOUNDS,
    ) -> None:
        self.url = url
        self.bounds = bounds
        # The URL of the connection that must keep one server session (LISTEN):
        # ``url`` itself unless statements go through a transaction pooler.
        self.session_url = session_url or url
        # A separate session URL means statements are pooled per transaction:
        # a statement prepared in one server session is unknown in the next.
        self.engine = create_sa_engine(
            url, pool_size=pool_size, prepare=session_url is None, bounds=bounds
        )
        self.is_postgres = self.engine.dialect.name == "postgresql"
        if session_url is not None and not self.is_postgres:
            raise ValueError("a session database URL is only for PostgreSQL; SQLite needs none")
        self._autocommit = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self.capabilities = POSTGRES_CAPABILITIES if self.is_postgres else SQLITE_CAPABILITIES
        self._event_listeners: list[Callable[[], None]] = []
        # The event loop's own connection (psycopg's async driver, autocommit)
        # for the hot statements that run without a thread hop; PostgreSQL only.
        self._loop_statements = self.is_postgres and loop_statements_setting()
        self._loop_params: dict[str, Any] | None = None
        if self._loop_statements:
            _, params = self.engine.dialect.create_connect_args(self.engine.url)
            self._loop_params = {
                **params,
                **postgres_connect_args(
                    sqlalchemy_url(url), prepare=session_url is None, bounds=bounds
                ),
            }
        self._loop_pool: psycopg_pool.AsyncConnectionPool[Any] | None = None
        self._loop_opening: asyncio.Lock | None = None

    def add_event_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from the store's thread) after every commit that wrote job events."""
        self._event_listeners.append(listener)

    def _events_written(self, conn: sa.Connection) -> None:
        """Mark the transaction of ``conn``: it writes job events (listeners run on commit)."""
        conn.info[_EVENTS_WRITTEN] = True

    def _after_commit(self, wrote_events: bool) -> None:
        if wrote_events:
            for listener in self._event_listeners:
                listener()

    @contextlib.contextmanager
    def tx(self) -> Iterator[sa.Connection]:
        """One transaction; database errors become domain errors."""
        wrote = False
        with domain_errors(), self.engine.begin() as conn:
            try:
                yield conn
            finally:
                wrote = _take_events_mark(conn)
        self._after_commit(wrote)

    @contextlib.contextmanager
    def statement(self) -> Iterator[sa.Connection]:
        """A connection for one self-contained statement.

        On PostgreSQL it runs in autocommit mode, which saves the BEGIN and
        COMMIT round trips of the hot path (a single statement is atomic on
        its own). On SQLite it is an ordinary transaction.
        """
        if not self.is_postgres:
            with self.tx() as conn:
                yield conn
            return
        wrote = False
        with domain_errors(), self._autocommit.connect() as conn:
            try:
                yield conn
            finally:
                wrote = _take_events_mark(conn)
        self._after_commit(wrote)

    async def _loop_connections(self) -> psycopg_pool.AsyncConnectionPool[Any]:
        """The event loop's connections (psycopg's async pool), opened on first use.

        The first connection is opened here, so a server that refuses the
        startup options (a pooler in between, see ``_without_options_if_refused``)
        is found before the pool connects without them. The pool drops a
        connection that broke, or that a cancelled statement left busy, and
        opens another in its place.
        """
        pool = self._loop_pool
        if pool is not None:
            return pool
        if self._loop_opening is None:
            self._loop_opening = asyncio.Lock()
        async with self._loop_opening:
            if self._loop_pool is not None:
                return self._loop_pool
            assert self._loop_params is not None
            params = self._loop_params
            try:
                first = await psycopg.AsyncConnection.connect(autocommit=True, **params)
            except psycopg.OperationalError as e:
                if "options" not in params or not refuses_options(str(e)):
                    raise
                self._loop_params = params = {k: v for k, v in params.items() if k != "options"}
                first = await psycopg.AsyncConnection.connect(autocommit=True, **params)
            await first.close()
            pool = psycopg_pool.AsyncConnectionPool(
                kwargs={**params, "autocommit": True},
                min_size=1,
                max_size=LOOP_POOL_SIZE,
                open=False,
                configure=_configure_loop_connection,
                name="wfj-loop",
                # A caller waits this long for a connection while the database
                # cannot be reached, then hears UNAVAILABLE.
                timeout=float(self.bounds.connect_timeout_s),
            )
            await pool.open()
            self._loop_pool = pool
            return pool

    async def _run_on_loop(self, sql: str, params: dict[str, Any]) -> list[Any]:
        """One self-contained statement (``driver_sql`` text) on one of the event
        loop's own autocommit connections; its rows.

        No thread hop, no SQLAlchemy and no parsing of the text on the way:
        the statement goes as PostgreSQL's own text (``positional``) through a
        raw cursor, prepared once per session like every statement of the
        store, and the loop is free until the answer comes. Database errors become
        domain errors exactly as on the store's threads (``domain_errors``);
        a connection that broke is dropped, and the next statement takes another.
        """
        conn: psycopg.AsyncConnection[Any] | None = None
        try:
            pool = await self._loop_connections()
            async with pool.connection() as conn:
                statement = positional(sql)
                values = statement.values(params)
                cursor = psycopg.AsyncRawCursor(conn)
                try:
                    await cursor.execute(statement.text, values)
                except (OverflowError, ValueError, TypeError) as e:
                    # A parameter the driver cannot send (a lone surrogate, a number
                    # out of range): nothing was sent, as a value the database refuses.
                    raise InvalidArgument(
                        f"the database refused a value of this request: {e}"
                    ) from e
                return await cursor.fetchall() if cursor.description is not None else []
        except psycopg_pool.PoolTimeout as e:
            raise StoreUnavailable(f"database unavailable: {e}") from e
        except psycopg.Error as e:
            broken = conn is None or conn.broken
            if conn is not None and conn.broken and self._loop_pool is not None:
                # The server may have dropped them all (a restart): the idle
                # ones are checked now, so the next statement does not fail too.
                with contextlib.suppress(Exception):
                    await self._loop_pool.check()
            with domain_errors():
                raise exc.DBAPIError.instance(
                    sql,
                    params,
                    e,
                    psycopg.Error,
                    hide_parameters=True,
                    connection_invalidated=broken,
                ) from e
            raise

    async def loop_close(self) -> None:
        """Close the event loop's connections (the engine stops). Idempotent."""
        pool, self._loop_pool = self._loop_pool, None
        if pool is not None:
            with contextlib.suppress(Exception):
                await pool.close()

    def _insert(self, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
        """An INSERT of ``table`` in the dialect's own flavour (it has ON CONFLICT)."""
        if self.is_postgres:
            return postgresql.insert(table)
        return sqlite.insert(table)

    def _notify_wake(self, conn: sa.Connection, due_at: int | Iterable[int]) -> None:
        """Tell every replica (LISTEN/NOTIFY) that work becomes eligible at
        ``due_at`` (one time, or every time of a batch).

        Sent inside the writing transaction, so it is delivered only on commit.
        SQLite has one coordinator per file; the engine wakes itself.
        """
        if self.is_postgres:
            conn.execute(
                sa.text("SELECT pg_notify('wfj_wake', :due)"), {"due": wake_payload(due_at)}
            )

    def dispose(self) -> None:
        self.engine.dispose()

    def schema_revision(self) -> str | None:
        """The applied migration revision, or None on an empty database."""
        with self.tx() as conn:
            if not sa.inspect(conn).has_table("wfj_alembic_version"):
                return None
            return conn.execute(sa.text("SELECT version_num FROM wfj_alembic_version")).scalar()

    def check_schema(self) -> None:
        """Refuse to run on a schema this build does not know."""
        revision = self.schema_revision()
        if revision == SCHEMA_REVISION:
            return
        hint = f"run: python -m coordinator migrate --database-url '{display_url(self.url)}'"
        if revision is None:
            raise SchemaMismatch(f"the database has no workflow-jobs schema; {hint}")
        raise SchemaMismatch(
            f"the database schema is at revision {revision}, this coordinator needs "
            f"{SCHEMA_REVISION}; {hint} (or upgrade the coordinator if the database is newer)"
        )

    def database_time_us(self) -> int:
        """The database server's current time (``clock_timestamp()``), in µs since the epoch."""
        with self.statement() as conn:
            return int(
                conn.exec_driver_sql(
                    "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
                ).scalar_one()
            )

    def ping(self) -> None:
        with self.statement() as conn:
            conn.exec_driver_sql("SELECT 1")


class Family:
    """A table family's queries, over the store's one core.

    Each family (jobs, leases, groups, events, ...) is an object of its own
    module, built over the ``StoreCore`` and handed the other families' parts
    it uses when the store is composed (``store/__init__.py``). This class
    only gives every family the same names for what it takes from the core
    (bound once here, so a statement costs no extra lookup); it holds no
    state of its own and no family inherits another's class.
    """

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self.is_postgres = core.is_postgres
        self.tx = core.tx
        self.statement = core.statement
        self._insert = core._insert
        self._notify_wake = core._notify_wake
        self._events_written = core._events_written
        self._after_commit = core._after_commit
        self._run_on_loop = core._run_on_loop
        self._loop_statements = core._loop_statements
