"""The README's worker example and grpcurl commands work as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wfj_testing import REPO, Coordinator, missing_tool, wait_until


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


def _sh_block(readme: str, heading: str) -> str:
    section = readme.split(heading, 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, heading
    return match.group(1)


def test_readme_followed_in_order(coordinator: Coordinator, tmp_path: Path) -> None:
    """The README as a newcomer follows it, top to bottom, in one session: the
    example worker keeps running from "A worker" on, so by the time of the CLI
    walkthrough it has already run the jobs enqueued before."""
    readme = (REPO / "README.md").read_text()
    grpcurl_script = _sh_block(readme, "## Operating with grpcurl")
    cli_script = _sh_block(readme, "## Operating with the CLI")
    env = _env()
    # `make run`'s address, and no profile of this machine's user.
    env["WFJOBS_TARGET"] = coordinator.target
    env["WFJOBS_CONFIG"] = str(tmp_path / "no-profiles.toml")
    for name in ("WFJOBS_TOKEN", "WFJOBS_TOKEN_FILE", "WFJOBS_CA", "WFJOBS_PROFILE"):
        env.pop(name, None)
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        worker = subprocess.Popen(
            [sys.executable, str(REPO / "examples" / "worker.py")],  # terminal 2, as written
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: "connected to coordinator" in log.read_text(), 30, "the worker")
        enqueued = subprocess.run(  # terminal 3, as written
            [sys.executable, str(REPO / "examples" / "enqueue.py"), "Ada"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert enqueued.returncode == 0, enqueued.stderr
        assert "COMPLETED {'greeting': 'Hello, Ada!'}" in enqueued.stdout
        grpcurl = _bash(grpcurl_script.replace("127.0.0.1:50051", coordinator.target), env)
        assert grpcurl.returncode == 0, grpcurl.stderr
        cli = _bash(cli_script, env)
        assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    finally:
        worker.terminate()
        worker.wait(20)

    assert '"status": "JOB_STATUS_CANCELLED"' in grpcurl.stdout
    assert "workflowjobs.v1.AdminService" in grpcurl.stdout
    assert '"job_type": "hello"' in grpcurl.stdout
    assert '"definition_id": "greeter"' in grpcurl.stdout
    assert '"status": "SERVING"' in grpcurl.stdout
    out = cli.stdout
    # The worker ran the first job; the second waits its hour, and is listed as pending.
    assert re.search(r"^\S+ completed\nresult: \{\"greeting\": \"Hello, Ada!\"\}$", out, re.M), out
    assert "not_due: not due until" in out
    # What the README's comments say these commands print.
    assert "would retry 0 job(s) (dry run; nothing changed)" in out
    assert re.search(r"^retried \S+: now pending, due now$", out, re.M), out
    assert re.search(r"^line 2: \S+ pending$", out, re.M), out
    assert "enqueued 2 of 2 line(s) of standard input" in out
    assert "drained coordinator" in out and "undrained" in out
    assert "definition greeter" in out


def _bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        # About 40 commands, each a new process: generous, so a machine with both
        # cores busy still gets through; the bound only stops a hung command.
        timeout=600,
    )


def test_readme_says_how_to_get_the_commands_on_path_before_using_them() -> None:
    """wfjobs and grpcurl live in .venv/bin: the README says to activate it
    before the first bare command, and ``make run`` prints it."""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    first_bare = min(
        readme.index(block) for block in blocks if re.search(r"^(wfjobs|grpcurl) ", block, re.M)
    )
    assert ". .venv/bin/activate" in readme[:first_bare]
    dry_run = subprocess.run(
        ["make", "-n", "run"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert dry_run.returncode == 0, dry_run.stderr
    assert "'. .venv/bin/activate' in each new terminal" in dry_run.stdout


def test_typescript_example_worker_runs_the_hello_job(coordinator: Coordinator) -> None:
    dist = REPO / "examples" / "typescript" / "dist"
    node = shutil.which("node")
    if node is None or not (dist / "hello.js").exists():
        missing_tool("Node.js and the built TypeScript examples (make install)")
    worker = subprocess.Popen(
        [str(node), str(dist / "hello.js"), coordinator.target],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = subprocess.run(
            [str(node), str(dist / "enqueue.js"), "Ada", coordinator.target],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        worker.terminate()
        _, log = worker.communicate(timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == 'COMPLETED {"greeting":"Hello, Ada!"}'
    assert worker.returncode == 0, log
    assert "INFO worker_sdk.job hello, Ada (attempt 1)" in log
    assert "SIGTERM received: draining" in log


def test_readme_typescript_example_is_the_file() -> None:
    readme = (REPO / "README.md").read_text()
    example = (REPO / "examples" / "typescript" / "hello.ts").read_text()
    body = example.split("\n", 1)[1].strip()
    assert body in readme
