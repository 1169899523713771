"""Primary failover: the primary dies hard mid-run and its synchronous standby
is promoted.

A primary and a streaming standby made from it with ``pg_basebackup``,
``synchronous_standby_names`` naming the standby (a commit returns only once
the standby has flushed it). Two coordinator replicas use one multi-host URL,
``postgresql://root@primary,standby/wfjobs?target_session_attrs=read-write``;
three workers run and jobs keep being enqueued throughout. Mid-run the primary
is stopped with ``-m immediate`` and the standby promoted. Both replicas report
NOT_SERVING while no read-write server is reachable, then reconnect to the new
primary by themselves (their pools and their LISTEN connections). Afterwards a
worker hangs (SIGSTOP: its streams stay open, its heartbeats stop) and is then
SIGKILLed: its leases can only come back through the lease reaper, the chore
one replica at a time runs: each run takes a transaction-scoped advisory lock,
which now lives on the new primary. While the test holds that lock there,
neither replica takes back the hung worker's expired leases; once it lets go,
one reaper run (on one replica) takes them all back. Nothing acknowledged is
lost, no job is recorded twice, and every extra execution is explained by a
lease the reaper took back.
"""

from __future__ import annotations

import os
import shutil
import signal
import time

import psycopg
import pytest
from faults.harness import (
    NOT_SERVING,
    SERVING,
    CoordinatorProcess,
    PgCluster,
    SteadyEnqueuer,
    WorkerPool,
    check_run,
    count_starts,
    enqueue_work,
    query_rows,
    scaled,
    wait_all_completed,
    wait_health,
)

from coordinator.model import AttemptOutcome, JobStatus
from wfj_testing import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def primary_and_standby():
    PgCluster.skip_unless_available()
    root = PgCluster.workspace()
    primary = PgCluster(root, "primary")
    clusters = [primary]
    try:
        primary.init(synchronous_standby_names="'standby'", synchronous_commit="on")
        primary.start()
        standby = primary.standby("standby")
        clusters.append(standby)
        standby.start()
        wait_until(lambda: _sync_state(primary) == "sync", 30, "the standby to be synchronous")
        yield primary, standby
    finally:
        for cluster in clusters:
            cluster.destroy()
        shutil.rmtree(root, ignore_errors=True)


def _sync_state(primary: PgCluster) -> str | None:
    with psycopg.connect(primary.admin_url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'"
        ).fetchone()
    return row[0] if row else None


def _listeners(cluster: PgCluster) -> int:
    with psycopg.connect(cluster.admin_url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            # The listening session's last statement: LISTEN wfj_events follows
            # LISTEN wfj_wake when the coordinator serves event watchers.
            "WHERE datname = 'wfjobs' AND query IN ('LISTEN wfj_wake', 'LISTEN wfj_events')"
        ).fetchone()
    return int(row[0]) if row else 0


def _is_primary(cluster: PgCluster) -> bool:
    with psycopg.connect(cluster.admin_url(), autocommit=True) as conn:
        return not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]


def test_primary_dies_standby_promoted(tmp_path, primary_and_standby) -> None:
    primary, standby = primary_and_standby
    primary.create_database()
    url = (
        f"postgresql://root@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/wfjobs"
        "?target_session_attrs=read-write&connect_timeout=5"
    )
    new_primary_url = standby.url()
    total = scaled(1500)
    first = CoordinatorProcess(url, tmp_path, name="first")
    second = CoordinatorProcess(url, tmp_path, name="second")
    targets = [first.target, second.target]
    pool = WorkerPool(
        f"ipv4:{first.target},{second.target}", tmp_path, 3, "--concurrency", "20", "--round-robin"
    )
    steady: SteadyEnqueuer | None = None
    try:
        ids = enqueue_work(first.target, total, ms=20)
        steady = SteadyEnqueuer(second.target)
        goal = count_starts(pool.records) + scaled(400)
        wait_until(lambda: count_starts(pool.records) >= goal, 60, "progress")
        primary.stop("immediate")
        wait_health(targets, NOT_SERVING, 30, "both replicas NOT_SERVING without a primary")
        acknowledged = len(steady.acknowledged)
        standby.promote()
        promoted = time.monotonic()
        assert _is_primary(standby)
        wait_health(targets, SERVING, 60, "both replicas SERVING on the new primary")
        recovery = time.monotonic() - promoted
        wait_until(lambda: len(steady.acknowledged) > acknowledged, 30, "enqueues to resume")
        wait_until(
            lambda: _listeners(standby) == 2, 30, "both replicas to LISTEN on the new primary"
        )
        # Leases of a hung worker come back only through the reaper.
        goal = count_starts(pool.records) + scaled(200)
        wait_until(lambda: count_starts(pool.records) >= goal, 60, "progress on the new primary")
        victim = pool.workers[0]
        victim_id = f"{pool.name}-1"
        wait_until(lambda: _leases_of(new_primary_url, victim_id), 30, "a worker's leases")
        # The reaper's lock, taken here on the new primary the way the reaper
        # takes it (same key, same database): no replica's run gets it now.
        with psycopg.connect(standby.admin_url("wfjobs"), autocommit=True) as lock:
            lock.execute(f"SELECT pg_advisory_lock(hashtext('{REAPER_LOCK}'))")
            hung_at_us = time.time_ns() // 1000
            os.kill(victim.proc.pid, signal.SIGSTOP)

            def past_due_or_reaped() -> tuple[set[str], dict[str, int]] | None:
                past_due = _expired_leases_of(new_primary_url, victim_id, past_due_us=1_000_000)
                reaped = _lease_expired_ends(new_primary_url, victim_id, hung_at_us)
                return (past_due, reaped) if past_due or reaped else None

            # Showing that nothing happens takes a span of time: once a lease
            # is past due each replica's reaper tries again every 10 ms; the
            # leases must have been past due for a second.
            expired, reaped_while_held = wait_until(
                past_due_or_reaped, 30, "the hung worker's leases to be past due for a second"
            )
            lock.execute(f"SELECT pg_advisory_unlock(hashtext('{REAPER_LOCK}'))")
        wait_until(
            lambda: expired <= _lease_expired_ends(new_primary_url, victim_id, hung_at_us).keys(),
            30,
            "the reaper to take back the hung worker's leases",
        )
        reaped = _lease_expired_ends(new_primary_url, victim_id, hung_at_us)
        victim.kill()
        pool.kills += 1
        ids += steady.stop()
        steady = None
        wait_all_completed(new_primary_url, len(ids), 120)
    finally:
        if steady is not None:
            steady.stop()
        pool.stop()
        first.stop()
        second.stop()
    for coordinator in (first, second):
        assert coordinator.starts == 1, "a coordinator was restarted"
        log = coordinator.log_text()
        assert "unexpected error" not in log, "a database error became INTERNAL"
    check_run(new_primary_url, ids, pool.records, 2, "primary failover", recovery_s=recovery)
    # While the test held the reaper's lock on the new primary, the leases were
    # past due for a second and no replica took them back without the lock.
    assert reaped_while_held == {}, "a replica reaped without the reaper's lock"
    assert expired
    # Once it was free, one run took them all back: they share that run's time.
    assert len({reaped[job_id] for job_id in expired}) == 1, reaped
    # The hung worker's leases were taken back by the reaper on the new primary
    # (LEASE_EXPIRED); jobs handed back when its streams closed are RELEASED.
    ended = _ended_attempts(new_primary_url, victim_id, hung_at_us)
    taken_back = {AttemptOutcome.LEASE_EXPIRED, AttemptOutcome.UNLOCKED, AttemptOutcome.RELEASED}
    assert set(ended.values()) <= {int(o) for o in taken_back}, ended


# The key of the advisory lock each lease reaper run takes (coordinator/store/leases.py).
REAPER_LOCK = "wfj_lease_reaper"


def _expired_leases_of(url: str, worker_id: str, past_due_us: int) -> set[str]:
    """The jobs ``worker_id`` holds leases on when every one of those leases
    has been past due (by the database's clock) for ``past_due_us``, else none."""
    rows = query_rows(
        url,
        "SELECT id, lease_expires_at "
        "< CAST(extract(epoch FROM clock_timestamp()) * 1000000 AS bigint) - :past_due "
        "FROM wfj_jobs WHERE status = :s AND lease_owner = :w",
        s=int(JobStatus.RUNNING),
        w=worker_id,
        past_due=past_due_us,
    )
    if rows and all(past_due for _, past_due in rows):
        return {job_id for job_id, _ in rows}
    return set()


def _lease_expired_ends(url: str, worker_id: str, since_us: int) -> dict[str, int]:
    """job -> when (µs) the reaper first ended an attempt of ``worker_id``
    (ended at or after ``since_us``) as LEASE_EXPIRED."""
    rows = query_rows(
        url,
        "SELECT job_id, min(ended_at) FROM wfj_job_attempts "
        "WHERE worker_id = :w AND outcome = :expired AND ended_at >= :since GROUP BY job_id",
        w=worker_id,
        expired=int(AttemptOutcome.LEASE_EXPIRED),
        since=since_us,
    )
    return {job_id: ended_at for job_id, ended_at in rows}


def _leases_of(url: str, worker_id: str) -> list[str]:
    rows = query_rows(
        url,
        "SELECT id FROM wfj_jobs WHERE status = :s AND lease_owner = :w",
        s=int(JobStatus.RUNNING),
        w=worker_id,
    )
    return [job_id for (job_id,) in rows]


def _ended_attempts(url: str, worker_id: str, since_us: int) -> dict[tuple[str, int], int]:
    """(job, attempt) -> outcome for the attempts of ``worker_id`` ended at or
    after ``since_us`` other than COMPLETED."""
    rows = query_rows(
        url,
        "SELECT job_id, number, outcome FROM wfj_job_attempts "
        "WHERE worker_id = :w AND outcome <> :done AND ended_at >= :since",
        w=worker_id,
        done=int(AttemptOutcome.COMPLETED),
        since=since_us,
    )
    return {(job_id, number): outcome for job_id, number, outcome in rows}
