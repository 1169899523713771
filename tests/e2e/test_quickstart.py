"""docs/quickstart.md runs as written: PostgreSQL, TLS, tokens, a worker, a job."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from faults.harness import free_port

from wfj_testing import REPO, subprocess_env

pytestmark = pytest.mark.e2e

DOC_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/wfjobs"


def test_quickstart_runs_as_written(pg_database: str, tmp_path: Path) -> None:
    from conftest import new_pg_database

    page = (REPO / "docs" / "quickstart.md").read_text()
    script = "\n".join(re.findall(r"```sh\n(.*?)```", page, re.S))
    url, drop = new_pg_database("wfj_quickstart")
    port = str(free_port())
    # The page's own database, address and home become this test's.
    script = (
        script.replace("createdb wfjobs\n", "")
        .replace(DOC_URL, url)
        .replace("127.0.0.1:50443", f"127.0.0.1:{port}")
    )
    home = tmp_path / "home"
    home.mkdir()
    env = subprocess_env(
        {"HOME": str(home)},
        without=tuple(name for name in os.environ if name.startswith("WFJOBS_")),
    )
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    try:
        result = subprocess.run(
            [
                "bash",
                "-euo",
                "pipefail",
                "-c",
                "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script,
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
    finally:
        drop()  # type: ignore[operator]

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "created the schema of" in result.stderr
    assert re.search(
        r"^\S+ completed\nresult: \{\"greeting\": \"Hello, Ada!\"\}$", result.stdout, re.M
    )
    assert "connected to coordinator" in result.stderr
    assert "greeting Ada" in result.stderr
    # The page keeps its profile in its own folder: the user's config is never written.
    assert not (home / ".config").exists()


def test_what_the_quickstart_and_make_run_leave_behind_is_ignored_by_git() -> None:
    """A CA key and tokens (``quickstart/``) and the store's lock file must not
    end up in a commit."""
    leftovers = ["quickstart/pki/ca.key", "quickstart/tokens.jsonl", "wfjobs.db.coordinator.lock"]
    checked = subprocess.run(
        ["git", "check-ignore", "--no-index", *leftovers],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.stdout.split() == leftovers, checked.stderr
