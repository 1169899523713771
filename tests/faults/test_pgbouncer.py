"""Coordinators behind PgBouncer in transaction pooling mode.

Working set-up: statements go through the pooler (``--database-url``), the
LISTEN connection goes straight to PostgreSQL (``--session-database-url``).
Two replicas and three workers run through it; mid-run the pooler is
SIGKILLed and started again. Every job completes once; both replicas listen
on direct connections (seen in ``pg_stat_activity``), and no statement fails
for a prepared statement the next server session does not know.

Detection: given only the pooled URL, or a pooled URL as the session URL, the
coordinator refuses to start (exit code 5) with a message naming the setting.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import sqlalchemy as sa
from conftest import PG_ADMIN_URL
from faults.harness import (
    NOT_SERVING,
    SERVING,
    CoordinatorProcess,
    PgBouncer,
    PgCluster,
    WorkerPool,
    check_run,
    count_starts,
    enqueue_work,
    listening_sessions,
    scaled,
    wait_all_completed,
    wait_health,
)

from coordinator.store.pooler import shares_server_sessions
from wfj_testing import coordinator_args, subprocess_env, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def pooler(pg_url):
    PgBouncer.skip_unless_available()
    root = PgCluster.workspace()
    upstream_port = sa.engine.make_url(PG_ADMIN_URL).port or 5432
    bouncer = PgBouncer(root, upstream_port)
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_behind_pgbouncer_with_a_session_url(tmp_path, pg_url, pooler) -> None:
    pooled = pooler.url(pg_url)
    assert shares_server_sessions(pooled), "the pooler is not in transaction mode"
    assert not shares_server_sessions(pg_url)
    database = pg_url.rsplit("/", 1)[1]
    args = ["--session-database-url", pg_url]
    first = CoordinatorProcess(pooled, tmp_path, name="first", args=args)
    second = CoordinatorProcess(pooled, tmp_path, name="second", args=args)
    targets = [first.target, second.target]
    pool = WorkerPool(
        f"ipv4:{first.target},{second.target}", tmp_path, 3, "--concurrency", "20", "--round-robin"
    )
    total = scaled(2000)
    try:
        wait_until(
            lambda: listening_sessions(database) == 2, 30, "both replicas to LISTEN directly"
        )
        ids = enqueue_work(first.target, total, ms=10)
        goal = count_starts(pool.records) + scaled(500)
        wait_until(lambda: count_starts(pool.records) >= goal, 60, "progress")
        pooler.kill()
        wait_health(targets, NOT_SERVING, 30, "both replicas NOT_SERVING without the pooler")
        pooler.start()
        wait_health(targets, SERVING, 60, "both replicas SERVING through the pooler again")
        # Jobs enqueued after the pooler came back run as well.
        ids += enqueue_work(second.target, scaled(200), ms=10)
        wait_all_completed(pg_url, len(ids), 120)
        assert listening_sessions(database) == 2
    finally:
        pool.stop()
        first.stop()
        second.stop()
    for coordinator in (first, second):
        log = coordinator.log_text()
        assert "unexpected error" not in log, "a database error became INTERNAL"
        assert "prepared statement" not in log, log[-3000:]
        assert "session connection (LISTEN)" in log
    check_run(pg_url, ids, pool.records, 1, "pgbouncer transaction mode")


def _serve_exit(tmp_path, database_url: str, *extra: str) -> tuple[int, str]:
    """Run ``serve`` and return its exit code and output (it must not start)."""
    command = coordinator_args(database_url, "127.0.0.1:0", *extra)
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=subprocess_env()
    )
    return result.returncode, result.stdout + result.stderr


def test_a_transaction_pooler_without_a_session_url_is_refused(tmp_path, pg_url, pooler) -> None:
    code, output = _serve_exit(tmp_path, pooler.url(pg_url))
    assert code == 5, output
    assert "transaction or statement mode" in output
    assert "--session-database-url (WFJOBS_SESSION_DATABASE_URL)" in output
    assert "listening on" not in output


def test_a_pooled_session_url_is_refused(tmp_path, pg_url, pooler) -> None:
    pooled = pooler.url(pg_url)
    code, output = _serve_exit(tmp_path, pooled, "--session-database-url", pooled)
    assert code == 5, output
    assert "the session database URL" in output and "session mode" in output
    assert "listening on" not in output
