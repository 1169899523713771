"""One coordinator per SQLite file: a second one refuses to start (two real processes)."""

from __future__ import annotations

import subprocess

import pytest
from faults.harness import CoordinatorProcess

from wfj_testing import REPO, coordinator_args, subprocess_env

pytestmark = pytest.mark.e2e


def _second_coordinator(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        coordinator_args(url, "127.0.0.1:0"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=subprocess_env(),
    )


def test_second_coordinator_on_the_same_sqlite_file_refuses_to_start(tmp_path) -> None:
    database = tmp_path / "one.db"
    first = CoordinatorProcess(f"sqlite:///{database}", tmp_path, name="first")
    try:
        # The same file under another spelling of its path is the same database.
        (tmp_path / "alias").symlink_to(tmp_path)
        for url in (f"sqlite:///{database}", f"sqlite:///{tmp_path / 'alias' / 'one.db'}"):
            out = _second_coordinator(url)
            assert out.returncode == 6, out.stderr[-2000:]
            assert (
                f"another coordinator (pid {first.proc.pid}) is serving the SQLite database "
                f"{database}" in out.stderr
            )
            assert "listening on" not in out.stderr
        assert first.alive()
    finally:
        first.kill()
    # The OS drops the lock with the process, even after SIGKILL: a new one starts.
    second = CoordinatorProcess(f"sqlite:///{database}", tmp_path, name="second")
    second.stop()
    assert "listening on" in second.log()
