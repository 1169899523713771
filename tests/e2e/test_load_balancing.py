"""Workers given two coordinators behind one target spread over both with
``round_robin``, set the way the Kubernetes manifest sets it
(``WFJOBS_LOAD_BALANCING``), through the example worker with no ``--target``
(``WFJOBS_TARGET``): the SDK reads the settings ``wfjobs`` reads.

The target is a static ``ipv4:`` list, which gRPC resolves to both addresses as
DNS resolves a headless Service to every replica."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wfj_testing import REPO, ManagedProcess, wait_until
from worker_sdk import AdminClient

pytestmark = pytest.mark.e2e

# round_robin starts each channel at a random address: the chance that this
# many workers all land on one of two coordinators anyway is 2 / 2**12.
MOST_WORKERS = 12


class ExampleWorker(ManagedProcess):
    def __init__(self, log_path: Path, env: dict[str, str]) -> None:
        self._spawn(
            [sys.executable, str(REPO / "examples" / "worker.py")],
            log_path,
            env=env,
            without=("WFJOBS_TOKEN", "WFJOBS_TOKEN_FILE", "WFJOBS_CA", "WFJOBS_PROFILE"),
        )


@pytest.fixture
def pg_url(pg_database):
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_balance")
    yield url
    drop()


def test_round_robin_workers_spread_over_both_coordinators(
    pg_url: str, processes, tmp_path: Path
) -> None:
    first = processes["coordinator"](pg_url)
    second = processes["coordinator"](pg_url)
    env = {
        "WFJOBS_TARGET": f"ipv4:{first.target},{second.target}",
        "WFJOBS_LOAD_BALANCING": "round_robin",
        "WFJOBS_CONFIG": str(tmp_path / "no-profiles.toml"),
    }
    workers: list[ExampleWorker] = []
    holders: dict[str, str] = {}
    try:
        with AdminClient(first.target) as admin:
            # One worker at a time until both coordinators hold a stream.
            while len(set(holders.values())) < 2 and len(workers) < MOST_WORKERS:
                workers.append(ExampleWorker(tmp_path / f"example-{len(workers)}.log", env))
                wait_until(
                    lambda: len(admin.list_workers()) == len(workers),
                    60,
                    f"worker {len(workers)} to connect",
                )
                holders = {w.worker_id: w.coordinator_id for w in admin.list_workers()}
            # Every worker got the policy: none is stuck on pick_first's choice.
            assert len(set(holders.values())) == 2, holders
            ids = {w.coordinator_id for w in admin.list_workers()}
        with AdminClient(second.target) as other:
            # The registry is shared: the second coordinator sees the same spread.
            assert {w.coordinator_id for w in other.list_workers()} == ids
    finally:
        for w in workers:
            w.stop()
