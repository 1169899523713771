"""Transactional enqueue: a job exists if and only if the caller's transaction commits.

Design note
-----------
The coordinator owns its store, so a caller's database transaction cannot
insert into it. Instead :func:`enqueue_in_transaction` writes the encoded
``JobSpec`` into an outbox table in the *caller's* database, inside the
caller's own transaction (a SQLAlchemy ``Connection`` or ``Session``): a
rollback leaves no trace, a commit leaves a row, whether or not the coordinator
is reachable at that moment. An :class:`OutboxRelay` then forwards committed
rows, oldest first, with ``EnqueueBatch`` and deletes them (or marks them
forwarded).

Exactly one job per row: every row's spec carries an idempotency key, chosen
when the row is written (the caller's own key, or ``outbox:<uuid4>``). A relay
that crashes after the coordinator stored a batch but before the rows were
deleted forwards the same rows again, and the coordinator answers with the
jobs it already has. The key is random rather than the integer row id because
row ids repeat across databases and table re-creations, and a repeated key
would silently merge two different jobs into one.

Row lifecycle::

    (insert, in the caller's transaction) --commit--> pending --forwarded--> deleted
                                                         |          (or marked: forwarded_at, job_id)
                                                         +--rejected (INVALID_ARGUMENT)--> rejected_at, last_error

A row the coordinator rejects as malformed is set aside with its error so it
cannot block the rows behind it; every other failure (coordinator down,
credentials, limits) is retried with capped exponential backoff and full
jitter, and nothing is dropped.

SQLAlchemy is an optional dependency (``pip install workflow-jobs[outbox]``),
imported when these functions are first called. Run the relay in-process
(:meth:`OutboxRelay.start` for a thread, ``await relay.arun()`` as an asyncio
task) or as a process::

    python -m worker_sdk.outbox relay --database-url postgresql+psycopg://app@db/app \\
        --target coordinator:50051
    python -m worker_sdk.outbox create-table --database-url ...
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import grpc

from workflowjobs.v1 import job_pb2

from ._backoff import Backoff, BackoffConfig
from ._convert import JobRequest
from ._errors import WorkflowJobsError
from ._masking import mask_credentials
from ._scheduler import EnqueueResult, SchedulerClient

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy import Table as _Table  # functions below shadow `sa` with the module

__all__ = [
    "DEFAULT_TABLE_NAME",
    "OutboxEntry",
    "OutboxRelay",
    "RelayResult",
    "alembic_create_outbox_table",
    "alembic_drop_outbox_table",
    "create_outbox_table",
    "enqueue_in_transaction",
    "outbox_table",
]

logger = logging.getLogger("worker_sdk.outbox")

DEFAULT_TABLE_NAME = "wfjobs_outbox"

# Errors that say "this row can never be enqueued"; anything else is retried.
_REJECTING_CODES = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE})

_default_table: sa.Table | None = None


def _sqlalchemy() -> Any:
    try:
        import sqlalchemy
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError(
            "the outbox needs SQLAlchemy 2: pip install 'workflow-jobs[outbox]'"
        ) from exc
    return sqlalchemy


def _columns(sa: Any) -> list[Any]:
    big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    return [
        # Forwarding order. (SQLite only auto-increments an INTEGER primary key.)
        sa.Column("id", big_id, primary_key=True, autoincrement=True),
        sa.Column("idempotency_key", sa.String(255), nullable=False),
        sa.Column("tenant_id", sa.String(255), nullable=False),
        sa.Column("job_type", sa.String(255), nullable=False),
        # The encoded workflowjobs.v1.JobSpec, idempotency key included.
        sa.Column("spec", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("forwarded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("job_id", sa.String(64), nullable=True),
        sa.Column("rejected_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
    ]


def _index_name(name: str) -> str:
    return f"ix_{name}_pending"


def outbox_table(
    metadata: sa.MetaData | None = None,
    *,
    name: str = DEFAULT_TABLE_NAME,
    schema: str | None = None,
) -> sa.Table:
    """The outbox table's definition.

    Add it to your own ``MetaData`` (``outbox_table(Base.metadata)``) and
    Alembic's autogenerate picks it up like any of your tables; or create it
    with :func:`create_outbox_table` or :func:`alembic_create_outbox_table`.

    Args:
        metadata: The ``MetaData`` to define it in; a private one when None.
        name: Table name.
        schema: Database schema (PostgreSQL), or None for the default.

    Returns:
        The ``sqlalchemy.Table``.
    """
    sa = _sqlalchemy()
    table = sa.Table(
        name, metadata if metadata is not None else sa.MetaData(), *_columns(sa), schema=schema
    )
    sa.Index(_index_name(name), table.c.forwarded_at, table.c.id)
    return cast("_Table", table)


def _table(table: sa.Table | None) -> sa.Table:
    global _default_table
    if table is not None:
        return table
    if _default_table is None:
        _default_table = outbox_table()
    return _default_table


def create_outbox_table(bind: sa.Engine | sa.Connection, table: sa.Table | None = None) -> None:
    """Create the outbox table (and its index) in your database if it is missing.

    Args:
        bind: An engine or connection to your database.
        table: A table from :func:`outbox_table`; the default ``wfjobs_outbox`` when None.
    """
    _table(table).create(bind, checkfirst=True)


def alembic_create_outbox_table(
    op: Any, *, name: str = DEFAULT_TABLE_NAME, schema: str | None = None
) -> None:
    """Create the outbox table from an Alembic migration of your own::

        from alembic import op
        from worker_sdk.outbox import alembic_create_outbox_table, alembic_drop_outbox_table

        def upgrade() -> None:
            alembic_create_outbox_table(op)

        def downgrade() -> None:
            alembic_drop_outbox_table(op)

    Args:
        op: ``alembic.op`` (or an ``alembic.operations.Operations``).
        name: Table name.
        schema: Database schema, or None.
    """
    sa = _sqlalchemy()
    op.create_table(name, *_columns(sa), schema=schema)
    op.create_index(_index_name(name), name, ["forwarded_at", "id"], schema=schema)


def alembic_drop_outbox_table(
    op: Any, *, name: str = DEFAULT_TABLE_NAME, schema: str | None = None
) -> None:
    """Drop the outbox table from an Alembic migration (see :func:`alembic_create_outbox_table`)."""
    op.drop_index(_index_name(name), table_name=name, schema=schema)
    op.drop_table(name, schema=schema)


@dataclasses.dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A job written to the outbox, to be enqueued once the transaction commits.

    Attributes:
        row_id: The outbox row's id.
        idempotency_key: The job's idempotency key: enqueueing the same key in
            the same tenant returns the job the relay created.
        job_type: Job type.
        tenant_id: Tenant.
    """

    row_id: int
    idempotency_key: str
    job_type: str
    tenant_id: str


def enqueue_in_transaction(
    conn: sa.Connection | sa.orm.Session,
    job_type: str,
    payload: Any = None,
    *,
    table: sa.Table | None = None,
    **options: Any,
) -> OutboxEntry:
    """Enqueue a job as part of the caller's database transaction.

    The job is written to the outbox table through ``conn``; it reaches the
    coordinator (through an :class:`OutboxRelay`) only if that transaction
    commits, and never if it rolls back. The payload is encoded and ``delay``
    is resolved now, at write time.

    With an ``AsyncSession``/``AsyncConnection``, call it through
    ``await session.run_sync(lambda s: enqueue_in_transaction(s, ...))``.

    Args:
        conn: A SQLAlchemy ``Connection`` or ORM ``Session`` in your
            transaction (not an ``Engine``: that would commit on its own).
        job_type: Job type.
        payload: The job's input (see :meth:`SchedulerClient.enqueue`).
        table: A table from :func:`outbox_table`; the default ``wfjobs_outbox`` when None.
        **options: Other :class:`~worker_sdk.JobRequest` fields (``tenant_id``,
            ``workflow``, ``delay``, ``idempotency_key``, …). Without an
            ``idempotency_key`` one is generated, so the relay can never
            enqueue the row twice.

    Returns:
        The outbox entry.

    Raises:
        TypeError: ``conn`` is an ``Engine``.
    """
    sa = _sqlalchemy()
    if isinstance(conn, sa.Engine):
        raise TypeError(
            "enqueue_in_transaction needs the Connection or Session of your transaction, not an Engine"
        )
    spec = JobRequest(job_type=job_type, payload=payload, **options).to_proto()
    if not spec.idempotency_key:
        spec.idempotency_key = f"outbox:{uuid.uuid4()}"
    outbox = _table(table)
    result = conn.execute(
        sa.insert(outbox).values(
            idempotency_key=spec.idempotency_key,
            tenant_id=spec.tenant_id,
            job_type=spec.job_type,
            spec=spec.SerializeToString(),
            created_at=datetime.now(UTC),
        )
    )
    (row_id,) = cast(Any, result).inserted_primary_key
    return OutboxEntry(int(row_id), spec.idempotency_key, spec.job_type, spec.tenant_id)


@dataclasses.dataclass(frozen=True, slots=True)
class RelayResult:
    """What one :meth:`OutboxRelay.run_once` did.

    Attributes:
        forwarded: Rows the coordinator stored (or already had).
        rejected: Rows set aside because the coordinator refused them as malformed.
        failed: True when forwarding stopped on an error worth retrying.
        error: That error's text.
    """

    forwarded: int = 0
    rejected: int = 0
    failed: bool = False
    error: str = ""


@dataclasses.dataclass(eq=False)
class _Row:
    id: int
    spec: job_pb2.JobSpec | None
    error: str = ""


class OutboxRelay:
    """Forwards committed outbox rows to the coordinator, in order, exactly once each.

    ::

        relay = OutboxRelay(engine, "coordinator:50051")
        relay.start()            # a background thread; or: await relay.arun()
        ...
        relay.stop()

    One relay per database is the intended set-up; a second one is safe (the
    idempotency keys keep every row to one job) but does the work twice.

    Args:
        database: Your database: a SQLAlchemy URL or ``Engine``.
        target: ``host:port`` of the coordinator, or a :class:`SchedulerClient`.
        table: A table from :func:`outbox_table`; the default ``wfjobs_outbox`` when None.
        batch_size: Rows forwarded per ``EnqueueBatch``.
        poll_interval: Seconds between looks at an empty outbox (:meth:`wake`
            cuts a wait short).
        initial_backoff: First delay after a failed forward, in seconds.
        max_backoff: Cap on that delay (doubling, with full jitter), in seconds.
        delete_forwarded: Delete forwarded rows; False keeps them with
            ``forwarded_at`` and ``job_id`` set (purge them yourself).
        credentials: TLS/mTLS channel credentials (when ``target`` is an address).
        token: Bearer token (when ``target`` is an address).
        rpc_timeout: Deadline of one ``EnqueueBatch``, in seconds.
    """

    def __init__(
        self,
        database: str | sa.Engine,
        target: str | SchedulerClient = "127.0.0.1:50051",
        *,
        table: sa.Table | None = None,
        batch_size: int = 100,
        poll_interval: float = 1.0,
        initial_backoff: float = 0.1,
        max_backoff: float = 30.0,
        delete_forwarded: bool = True,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        rpc_timeout: float = 10.0,
    ) -> None:
        sa = _sqlalchemy()
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._owns_engine = isinstance(database, str)
        self._engine: Any = sa.create_engine(database) if isinstance(database, str) else database
        self._table = _table(table)
        self._owns_client = isinstance(target, str)
        if isinstance(target, str):
            # Reconnect as eagerly as the relay retries, not on gRPC's 2-minute cap.
            reconnect_ms = str(max(100, int(min(max_backoff, 5.0) * 1000)))
            self._client = SchedulerClient(
                target,
                credentials=credentials,
                token=token,
                timeout=rpc_timeout,
                channel_options=[
                    ("grpc.initial_reconnect_backoff_ms", 100),
                    ("grpc.min_reconnect_backoff_ms", 100),
                    ("grpc.max_reconnect_backoff_ms", int(reconnect_ms)),
                ],
            )
        else:
            self._client = target
        self._batch_size = batch_size
        self._poll_interval = poll_interval
        self._delete_forwarded = delete_forwarded
        # Full jitter: each delay is uniform between 0 and the capped doubling.
        self._backoff = Backoff(
            BackoffConfig(initial=initial_backoff, maximum=max_backoff, jitter=1.0)
        )
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.forwarded_total = 0
        """Rows forwarded since the relay was created."""
        self.failures = 0
        """Forward attempts that failed and will be retried."""
        self.last_error = ""
        """The latest forwarding error, empty once forwarding works again."""

    # -- one pass ------------------------------------------------------------------------------

    def run_once(self) -> RelayResult:
        """Forward up to one batch of pending rows, oldest first.

        Returns:
            What was forwarded, rejected, or why forwarding stopped.
        """
        rows = self._pending_rows()
        if not rows:
            return RelayResult()
        malformed = [row for row in rows if row.spec is None]
        if malformed:
            # Forward what precedes the first unreadable row, then set that one aside.
            cut = rows.index(malformed[0])
            done = self._forward_each(rows[:cut]) if cut else RelayResult()
            if done.failed:
                return done
            self._reject(malformed[0])
            return RelayResult(forwarded=done.forwarded, rejected=done.rejected + 1)
        try:
            results = self._client.enqueue_batch([row.spec for row in rows if row.spec])
        except WorkflowJobsError as exc:
            if exc.code not in _REJECTING_CODES:
                return self._failed(exc)
            # One malformed job sinks its whole batch: find it by forwarding one at a time.
            return self._forward_each(rows)
        self._settle(rows, results)
        return RelayResult(forwarded=len(rows))

    def _forward_each(self, rows: Sequence[_Row]) -> RelayResult:
        forwarded = rejected = 0
        for row in rows:
            assert row.spec is not None
            try:
                results = self._client.enqueue_batch([row.spec])
            except WorkflowJobsError as exc:
                if exc.code not in _REJECTING_CODES:
                    failed = self._failed(exc)
                    return dataclasses.replace(failed, forwarded=forwarded, rejected=rejected)
                row.error = str(exc)
                self._reject(row)
                rejected += 1
                continue
            self._settle([row], results)
            forwarded += 1
        return RelayResult(forwarded=forwarded, rejected=rejected)

    def _failed(self, exc: WorkflowJobsError) -> RelayResult:
        self.failures += 1
        self.last_error = mask_credentials(exc)
        return RelayResult(failed=True, error=self.last_error)

    def _pending_rows(self) -> list[_Row]:
        sa = _sqlalchemy()
        t = self._table
        query = (
            sa.select(t.c.id, t.c.spec)
            .where(t.c.forwarded_at.is_(None), t.c.rejected_at.is_(None))
            .order_by(t.c.id)
            .limit(self._batch_size)
        )
        with self._engine.connect() as conn:
            fetched = conn.execute(query).all()
        rows = []
        for row_id, data in fetched:
            try:
                rows.append(_Row(int(row_id), job_pb2.JobSpec.FromString(bytes(data))))
            except Exception as exc:  # noqa: BLE001 - a corrupt row must not stop the relay
                rows.append(_Row(int(row_id), None, f"unreadable JobSpec: {exc}"))
        return rows

    def _settle(self, rows: Sequence[_Row], results: Sequence[EnqueueResult]) -> None:
        """Delete (or mark) rows the coordinator now has a job for."""
        sa = _sqlalchemy()
        t = self._table
        with self._engine.begin() as conn:
            if self._delete_forwarded:
                conn.execute(sa.delete(t).where(t.c.id.in_([row.id for row in rows])))
            else:
                now = datetime.now(UTC)
                conn.execute(
                    sa.update(t)
                    .where(t.c.id == sa.bindparam("row_id"))
                    .values(forwarded_at=sa.bindparam("at"), job_id=sa.bindparam("new_job_id")),
                    [
                        {"row_id": row.id, "at": now, "new_job_id": result.job_id}
                        for row, result in zip(rows, results, strict=True)
                    ],
                )
        self.forwarded_total += len(rows)
        self.last_error = ""

    def _reject(self, row: _Row) -> None:
        sa = _sqlalchemy()
        t = self._table
        logger.error(
            "outbox row %d rejected and set aside: %s", row.id, mask_credentials(row.error)
        )
        with self._engine.begin() as conn:
            conn.execute(
                sa.update(t)
                .where(t.c.id == row.id)
                .values(rejected_at=datetime.now(UTC), last_error=row.error[:4000])
            )

    # -- the loop ------------------------------------------------------------------------------

    def _delay_after(self, result: RelayResult) -> float:
        if result.failed:
            delay = self._backoff.next_delay()
            logger.warning(
                "outbox relay: forwarding failed (%s); retrying in %.2fs",
                mask_credentials(result.error),
                delay,
            )
            return delay
        self._backoff.reset()
        if result.forwarded or result.rejected:
            logger.info("outbox relay: forwarded %d job(s)", result.forwarded)
            if result.forwarded + result.rejected >= self._batch_size:
                return 0.0
        return self._poll_interval

    def run(self) -> None:
        """Forward rows until :meth:`stop` is called, blocking the caller."""
        while not self._stopping.is_set():
            try:
                result = self.run_once()
            except Exception as exc:  # noqa: BLE001 - e.g. the caller's database is down
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {mask_credentials(exc)}"
                logger.warning("outbox relay: %s", self.last_error)
                result = RelayResult(failed=True, error=self.last_error)
            delay = self._delay_after(result)
            if delay > 0:
                self._wake.wait(delay)
            self._wake.clear()

    def start(self) -> None:
        """Run the relay in a background thread (see :meth:`stop`)."""
        if self._thread is not None:
            raise RuntimeError("the relay is already running")
        self._thread = threading.Thread(target=self.run, name="wfjobs-outbox-relay", daemon=True)
        self._thread.start()

    async def arun(self) -> None:
        """Run the relay from asyncio until this task is cancelled.

        Database and gRPC calls run in a worker thread; cancelling the task
        stops the relay after its current pass.
        """
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, self.run)
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            self._stopping.set()
            self._wake.set()
            await future
            raise
        finally:
            if future.done():
                self.close()

    def wake(self) -> None:
        """Look at the outbox now instead of at the end of the poll interval."""
        self._wake.set()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop the loop after its current pass. Idempotent; safe from a signal handler.

        A relay started with :meth:`start` is also joined (up to ``timeout``
        seconds) and closed; after :meth:`run` returns, call :meth:`close`.
        """
        self._stopping.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            self.close()

    def close(self) -> None:
        """Close the channel and engine the relay created (not those passed in). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self._client.close()
        if self._owns_engine:
            self._engine.dispose()

    def __enter__(self) -> OutboxRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.close()


# -- command line --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m worker_sdk.outbox relay|create-table``."""
    parser = argparse.ArgumentParser(
        prog="python -m worker_sdk.outbox",
        description="Forward jobs written with enqueue_in_transaction to the coordinator.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    relay = commands.add_parser("relay", help="forward outbox rows until SIGTERM/SIGINT")
    create = commands.add_parser("create-table", help="create the outbox table if missing")
    for sub in (relay, create):
        sub.add_argument("--database-url", required=True, help="your database (SQLAlchemy URL)")
        sub.add_argument("--table", default=DEFAULT_TABLE_NAME, help="outbox table name")
        sub.add_argument("--schema", default=None, help="database schema of the table")
    relay.add_argument("--target", default="127.0.0.1:50051", help="coordinator host:port")
    relay.add_argument("--token", default=None, help="bearer token for the coordinator")
    relay.add_argument("--batch-size", type=int, default=100)
    relay.add_argument("--poll-interval", type=float, default=1.0, help="seconds")
    relay.add_argument("--max-backoff", type=float, default=30.0, help="seconds")
    relay.add_argument(
        "--keep-forwarded",
        action="store_true",
        help="mark forwarded rows (forwarded_at, job_id) instead of deleting them",
    )
    relay.add_argument("--create-table", action="store_true", help="create the table first")
    args = parser.parse_args(argv)
    table = outbox_table(name=args.table, schema=args.schema)
    sa = _sqlalchemy()
    engine = sa.create_engine(args.database_url)
    try:
        if args.command == "create-table" or args.create_table:
            create_outbox_table(engine, table)
            logger.info("outbox table %s is ready", args.table)
        if args.command == "create-table":
            return 0
        worker = OutboxRelay(
            engine,
            args.target,
            table=table,
            batch_size=args.batch_size,
            poll_interval=args.poll_interval,
            max_backoff=args.max_backoff,
            delete_forwarded=not args.keep_forwarded,
            token=args.token,
        )
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: worker.stop(timeout=0))
        logger.info(
            "outbox relay: forwarding %s from %s to %s",
            args.table,
            engine.url.render_as_string(hide_password=True),
            args.target,
        )
        worker.run()
        worker.close()
        logger.info("outbox relay stopped")
        return 0
    finally:
        engine.dispose()


if __name__ == "__main__":
    from workflowjobs.times import TimeFormatter

    handler = logging.StreamHandler()
    handler.setFormatter(TimeFormatter("%(asctime)s %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    raise SystemExit(main())
