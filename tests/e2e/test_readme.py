"""The README's worker example and grpcurl commands work as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from wfj_testing import REPO, Coordinator, wait_until


@pytest.fixture
def coordinator(tmp_path: Path):
    c = Coordinator(f"sqlite:///{tmp_path / 'readme.db'}", tmp_path / "coordinator.log")
    yield c
    c.stop()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env


def test_example_worker_runs_the_enqueued_job(coordinator: Coordinator) -> None:
    worker = subprocess.Popen(
        [sys.executable, str(REPO / "examples" / "worker.py"), "--target", coordinator.target],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        out = subprocess.run(
            [
                sys.executable,
                str(REPO / "examples" / "enqueue.py"),
                "--target",
                coordinator.target,
                "Ada",
            ],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        worker.terminate()
        worker.wait(20)
    assert out.returncode == 0, out.stderr
    assert "COMPLETED {'greeting': 'Hello, Ada!'}" in out.stdout


def test_readme_example_is_the_file() -> None:
    readme = (REPO / "README.md").read_text()
    example = (REPO / "examples" / "worker.py").read_text()
    body = example.split('"""', 2)[2].strip()
    assert body in readme


def test_readme_grpcurl_commands(coordinator: Coordinator, tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Operating with grpcurl", 1)[1]
    script = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    script = script.replace("127.0.0.1:50051", coordinator.target)
    # As the README has it: the example worker from the step before is running.
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        worker = subprocess.Popen(
            [sys.executable, str(REPO / "examples" / "worker.py"), "--target", coordinator.target],
            env=_env(),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "connected to coordinator" in log.read_text(), 30, "the worker")
        out = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        worker.terminate()
        worker.wait(20)
    assert out.returncode == 0, out.stderr
    assert '"status": "JOB_STATUS_CANCELLED"' in out.stdout
    assert "workflowjobs.v1.AdminService" in out.stdout
    assert '"job_type": "hello"' in out.stdout
    assert '"definition_id": "greeter"' in out.stdout
    assert '"status": "SERVING"' in out.stdout
