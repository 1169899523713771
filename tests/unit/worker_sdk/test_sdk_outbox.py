"""The outbox against SQLite and a fake JobSchedulerService on a real loopback server.

The end-to-end tests run it against a real coordinator on both stores and a
caller database on both dialects; these pin the relay's rules: order, one job
per row, retries, rows set aside, marking.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy.orm import Session

from worker_sdk import WorkflowRef
from worker_sdk.outbox import (
    OutboxRelay,
    RelayResult,
    alembic_create_outbox_table,
    alembic_drop_outbox_table,
    create_outbox_table,
    enqueue_in_transaction,
    main,
    outbox_table,
)
from workflowjobs.v1 import job_pb2, scheduler_service_pb2, scheduler_service_pb2_grpc

WAIT = 10.0
SECRET = "hunter2"
LEAKY_URL = f"postgresql://app:{SECRET}@db.internal:5432/app"


class FakeScheduler(scheduler_service_pb2_grpc.JobSchedulerServiceServicer):
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.jobs: dict[tuple[str, str], str] = {}
        self.specs: list[job_pb2.JobSpec] = []
        self.batches: list[int] = []
        self.unavailable = 0

    def EnqueueBatch(self, request, context):  # noqa: N802
        with self.lock:
            self.batches.append(len(request.jobs))
            if self.unavailable > 0:
                self.unavailable -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "connection refused")
            if any(spec.job_type == "bad" for spec in request.jobs):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "job_type 'bad' is not allowed")
            if any(spec.job_type == "leaky" for spec in request.jobs):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"cannot reach {LEAKY_URL}")
            results = []
            for spec in request.jobs:
                key = (spec.tenant_id, spec.idempotency_key)
                dedup = key in self.jobs
                if not dedup:
                    self.jobs[key] = str(uuid.uuid4())
                    self.specs.append(spec)
                results.append(
                    scheduler_service_pb2.EnqueueResult(
                        job_id=self.jobs[key], deduplicated=dedup, status=job_pb2.JOB_STATUS_PENDING
                    )
                )
            self.lock.notify_all()
            return scheduler_service_pb2.EnqueueBatchResponse(results=results)


@pytest.fixture
def scheduler() -> Iterator[tuple[FakeScheduler, str]]:
    fake = FakeScheduler()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    scheduler_service_pb2_grpc.add_JobSchedulerServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield fake, f"127.0.0.1:{port}"
    finally:
        server.stop(None)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[sa.Engine]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    create_outbox_table(engine)
    create_outbox_table(engine)  # idempotent
    try:
        yield engine
    finally:
        engine.dispose()


def outbox_rows(engine: sa.Engine) -> list[Any]:
    table = outbox_table()
    with engine.connect() as conn:
        return conn.execute(sa.select(table).order_by(table.c.id)).all()


def test_a_job_is_written_only_when_the_transaction_commits(scheduler, engine) -> None:
    fake, target = scheduler
    with engine.begin() as conn:
        first = enqueue_in_transaction(
            conn, "invoice.send", {"n": 1}, tenant_id="acme", workflow=WorkflowRef(instance_id="i")
        )
        enqueue_in_transaction(conn, "invoice.send", {"n": 2}, idempotency_key="invoice-2")
    with pytest.raises(RuntimeError), engine.begin() as conn:
        enqueue_in_transaction(conn, "invoice.send", {"n": 3})
        raise RuntimeError("the request failed: roll back")
    with Session(engine) as session, session.begin():
        enqueue_in_transaction(session, "invoice.send", {"n": 4})

    assert first.idempotency_key.startswith("outbox:") and first.tenant_id == "acme"
    assert len(outbox_rows(engine)) == 3
    with OutboxRelay(engine, target) as relay:
        assert relay.run_once() == RelayResult(forwarded=3)
        assert relay.run_once() == RelayResult()
    assert [spec.payload.data for spec in fake.specs] == [b'{"n":1}', b'{"n":2}', b'{"n":4}']
    assert fake.specs[0].workflow.instance_id == "i"
    assert [spec.idempotency_key for spec in fake.specs][:2] == [first.idempotency_key, "invoice-2"]
    assert outbox_rows(engine) == []


def test_an_engine_is_refused_because_it_is_not_the_callers_transaction(engine) -> None:
    with pytest.raises(TypeError, match="not an Engine"):
        enqueue_in_transaction(engine, "x")


def test_a_crash_between_forwarding_and_deleting_never_duplicates_a_job(scheduler, engine) -> None:
    fake, target = scheduler
    with engine.begin() as conn:
        for n in range(3):
            enqueue_in_transaction(conn, "invoice.send", {"n": n})

    class CrashesBeforeDelete(OutboxRelay):
        def _settle(self, rows: Any, results: Any) -> None:
            raise SystemExit("killed after the coordinator stored the batch")

    crashing = CrashesBeforeDelete(engine, target)
    with pytest.raises(SystemExit):
        crashing.run_once()
    crashing.close()
    assert len(fake.jobs) == 3 and len(outbox_rows(engine)) == 3
    with OutboxRelay(engine, target) as relay:
        assert relay.run_once() == RelayResult(forwarded=3)
    assert len(fake.jobs) == 3, "the second forward got the same jobs back"
    assert outbox_rows(engine) == []


def test_the_relay_retries_with_backoff_while_the_coordinator_is_unavailable(
    scheduler, engine
) -> None:
    fake, target = scheduler
    fake.unavailable = 3
    with engine.begin() as conn:
        enqueue_in_transaction(conn, "invoice.send", {"n": 1})
    relay = OutboxRelay(engine, target, poll_interval=0.05, initial_backoff=0.01, max_backoff=0.05)
    relay.start()
    try:
        with fake.lock:
            assert fake.lock.wait_for(lambda: fake.specs, WAIT)
    finally:
        relay.stop()
    assert relay.failures == 3 and relay.last_error == ""
    assert fake.batches == [1, 1, 1, 1]


def test_a_malformed_row_is_set_aside_and_the_rest_go_through_in_order(scheduler, engine) -> None:
    fake, target = scheduler
    with engine.begin() as conn:
        enqueue_in_transaction(conn, "ok", {"n": 1})
        enqueue_in_transaction(conn, "bad", {"n": 2})
        enqueue_in_transaction(conn, "ok", {"n": 3})
    with OutboxRelay(engine, target) as relay:
        assert relay.run_once() == RelayResult(forwarded=2, rejected=1)
        assert relay.run_once() == RelayResult()
    assert [spec.payload.data for spec in fake.specs] == [b'{"n":1}', b'{"n":3}']
    (rejected,) = outbox_rows(engine)
    assert rejected.job_type == "bad" and rejected.rejected_at is not None
    assert "job_type 'bad' is not allowed" in rejected.last_error


def test_forwarded_rows_can_be_kept_and_marked(scheduler, engine) -> None:
    fake, target = scheduler
    with engine.begin() as conn:
        entries = [enqueue_in_transaction(conn, "ok", {"n": n}) for n in range(5)]
    with OutboxRelay(engine, target, delete_forwarded=False, batch_size=2) as relay:
        results = [relay.run_once() for _ in range(4)]
    assert [r.forwarded for r in results] == [2, 2, 1, 0]
    rows = outbox_rows(engine)
    assert [r.id for r in rows] == [e.row_id for e in entries]
    assert all(r.forwarded_at is not None for r in rows)
    assert [r.job_id for r in rows] == [fake.jobs[("default", e.idempotency_key)] for e in entries]


def test_the_table_comes_from_an_alembic_migration_or_the_command_line(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
    with engine.begin() as conn:
        alembic_create_outbox_table(Operations(MigrationContext.configure(conn)))
    with engine.begin() as conn:
        assert enqueue_in_transaction(conn, "ok").row_id == 1
    with engine.begin() as conn:
        alembic_drop_outbox_table(Operations(MigrationContext.configure(conn)))
    assert "wfjobs_outbox" not in sa.inspect(engine).get_table_names()
    engine.dispose()

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["create-table", "--database-url", url, "--table", "jobs_outbox"]) == 0
    engine = sa.create_engine(url)
    assert sa.inspect(engine).get_table_names() == ["jobs_outbox"]
    engine.dispose()


def test_no_line_the_relay_logs_shows_a_database_password(scheduler, engine, caplog) -> None:
    fake, target = scheduler
    with engine.begin() as conn:
        enqueue_in_transaction(conn, "leaky", {"n": 1})
        enqueue_in_transaction(conn, "ok", {"n": 2})

    class DatabaseGoesAway(OutboxRelay):
        def _pending_rows(self) -> Any:
            if fake.specs:
                self.stop(timeout=0)
                raise RuntimeError(f"lost {LEAKY_URL} (host=db password={SECRET} port=5432)")
            return super()._pending_rows()

    caplog.set_level(logging.INFO, logger="worker_sdk")
    relay = DatabaseGoesAway(engine, target, poll_interval=0.01)
    relay.run()  # forwards, sets the leaky row aside, then loses the database and stops
    relay.close()
    assert [spec.payload.data for spec in fake.specs] == [b'{"n":2}']
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("worker_sdk")]
    assert any("rejected and set aside: " in line for line in lines), lines
    assert any("RuntimeError: lost postgresql://app:***@db.internal" in line for line in lines)
    assert all(SECRET not in line for line in lines), lines
    assert SECRET not in relay.last_error and "password=***" in relay.last_error
