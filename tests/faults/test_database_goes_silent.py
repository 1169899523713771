"""PostgreSQL goes silent under one replica: its path to the database stops
forwarding without closing anything.

Replica ``silent`` reaches PostgreSQL through a TCP proxy in the test
(``StalledPath``); replica ``direct`` reaches it directly. Mid-run the proxy
stops forwarding: connections stay open, bytes are accepted and never
delivered, nothing fails (what a partition without a reset, or a hung
middlebox, looks like). Then:

* ``silent``'s health turns ``NOT_SERVING`` within the documented bound
  (liveness ping every 2 s, unanswered after 5 s: at most 7 s; asserted with
  a wide margin), while ``direct`` stays ``SERVING``;
* ``silent``'s ``LISTEN`` connection gives up on its unanswered ping;
* after the proxy forwards again, ``silent`` turns ``SERVING`` by itself and
  ``LISTEN``s again on a new connection (both replicas listening), and every
  acknowledged job completes exactly once.
"""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from faults.harness import (
    NOT_SERVING,
    SERVING,
    CoordinatorProcess,
    StalledPath,
    SteadyEnqueuer,
    WorkerPool,
    check_run,
    count_starts,
    enqueue_work,
    health_status,
    listening_sessions,
    scaled,
    wait_all_completed,
    wait_health,
)

from wfj_testing import wait_until

pytestmark = pytest.mark.e2e

# docs/deployment.md "A database that goes silent": 2 s + 5 s by default.
DOCUMENTED_BOUND_S = 7.0
# A busy machine's allowance on top of it.
MARGIN_S = 13.0


def test_a_database_that_goes_silent(tmp_path, pg_url) -> None:
    database = sa.engine.make_url(pg_url).database
    assert database is not None
    path = StalledPath(sa.engine.make_url(pg_url).port or 5432)
    silent = CoordinatorProcess(path.url(pg_url), tmp_path, name="silent")
    direct = CoordinatorProcess(pg_url, tmp_path, name="direct")
    pool = WorkerPool(
        f"ipv4:{silent.target},{direct.target}", tmp_path, 2, "--concurrency", "20", "--round-robin"
    )
    steady: SteadyEnqueuer | None = None
    try:
        ids = enqueue_work(direct.target, scaled(600), ms=20)
        steady = SteadyEnqueuer(direct.target)
        wait_until(lambda: listening_sessions(database) == 2, 30, "both replicas to listen")
        goal = count_starts(pool.records) + scaled(200)
        wait_until(lambda: count_starts(pool.records) >= goal, 60, "progress")

        path.stall()
        stalled = time.monotonic()
        wait_health([silent.target], NOT_SERVING, DOCUMENTED_BOUND_S + MARGIN_S, "NOT_SERVING")
        not_serving_after = time.monotonic() - stalled
        assert health_status(direct.target) == SERVING, "the direct replica stopped serving"
        wait_until(
            lambda: "wake listener lost its connection" in silent.log_text(),
            30,
            "the silent replica's listener to give up its connection",
        )
        acknowledged = len(steady.acknowledged)

        path.resume()
        resumed = time.monotonic()
        wait_health([silent.target], SERVING, 60, "the silent replica SERVING again")
        recovery = time.monotonic() - resumed
        wait_until(
            lambda: "wake listener reconnected; listening again" in silent.log_text(),
            60,
            "the silent replica to LISTEN again",
        )
        wait_until(lambda: listening_sessions(database) == 2, 60, "both replicas listening again")
        wait_until(lambda: len(steady.acknowledged) > acknowledged, 30, "enqueues to go on")
        ids += steady.stop()
        steady = None
        wait_all_completed(pg_url, len(ids), 120)
    finally:
        if steady is not None:
            steady.stop()
        pool.stop()
        silent.stop()
        direct.stop()
        path.close()
    print(f"\n[database goes silent] not-serving-after={not_serving_after:.2f}s")
    for coordinator in (silent, direct):
        assert coordinator.starts == 1, "a coordinator was restarted"
        assert "unexpected error" not in coordinator.log_text(), "a database error became INTERNAL"
    check_run(pg_url, ids, pool.records, 1, "database goes silent", recovery_s=recovery)
