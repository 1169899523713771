"""Fixtures for end-to-end tests: a fresh database per test on each dialect,
coordinator and worker subprocesses that are always stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from wfj_testing import Coordinator, WorkerProcess


@pytest.fixture(params=["sqlite", "postgres"])
def e2e_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'e2e.db'}"
        return
    request.getfixturevalue("pg_database")  # skips or fails when PostgreSQL is absent
    from conftest import new_pg_database

    url, drop = new_pg_database()
    try:
        yield url
    finally:
        drop()  # type: ignore[operator]


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[dict[str, Callable[..., object]]]:
    """Factories for coordinator and worker processes, stopped at teardown."""
    started: list[Coordinator | WorkerProcess] = []
    counter = {"n": 0}

    def coordinator(database_url: str) -> Coordinator:
        counter["n"] += 1
        c = Coordinator(database_url, tmp_path / f"coordinator-{counter['n']}.log")
        started.append(c)
        return c

    def worker(target: str, *args: str) -> WorkerProcess:
        counter["n"] += 1
        n = counter["n"]
        w = WorkerProcess(
            target,
            tmp_path / f"record-{n}.txt",
            tmp_path / f"worker-{n}.log",
            "--worker-id",
            f"worker-{n}",
            *args,
        )
        started.append(w)
        return w

    yield {"coordinator": coordinator, "worker": worker}
    for proc in reversed(started):
        proc.stop()
