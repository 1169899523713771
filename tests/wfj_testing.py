"""Test helpers: factories with all-optional arguments, and time constants."""

from __future__ import annotations

import itertools
from typing import Any

from coordinator.ids import new_id
from coordinator.model import NewJob

T0 = 1_800_000_000_000_000  # a fixed "now" in microseconds
SECOND = 1_000_000

_seq = itertools.count()


def make_job(**overrides: Any) -> NewJob:
    """A valid pending job; override any field."""
    n = next(_seq)
    fields: dict[str, Any] = {
        "id": new_id(),
        "job_type": "noop",
        "tenant_id": "tenant-a",
        "definition_id": "def-1",
        "instance_id": f"inst-{n}",
        "payload": b"{}",
        "content_type": "application/json",
        "created_at": T0,
        "due_at": T0,
        "max_attempts": 3,
    }
    fields.update(overrides)
    return NewJob(**fields)


# -- processes -----------------------------------------------------------------

import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
_LISTEN_RE = re.compile(r"listening on [^:]+:(\d+)")


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05
) -> Any:
    """Poll ``predicate`` until truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


class Coordinator:
    """A real coordinator subprocess on a free loopback port."""

    def __init__(self, database_url: str, log_path: Path, *, migrate: bool = True) -> None:
        self.database_url = database_url
        self.log_path = log_path
        args = [
            sys.executable,
            "-m",
            "coordinator",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            database_url,
            "--drain-timeout",
            "5",
        ]
        if migrate:
            args.append("--migrate")
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=_env())
        port = wait_until(self._port, 30, f"coordinator to listen (log: {log_path})")
        self.target = f"127.0.0.1:{port}"

    def _port(self) -> int | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"coordinator exited: {self.log_path.read_text()[-3000:]}")
        match = _LISTEN_RE.search(self.log_path.read_text(errors="replace"))
        return int(match.group(1)) if match else None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


class WorkerProcess:
    """A worker app (``tests/e2e/worker_app.py`` unless ``app`` says otherwise)
    in a subprocess; every execution goes to ``record``."""

    app = REPO / "tests" / "e2e" / "worker_app.py"

    def __init__(self, target: str, record: Path, log_path: Path, *args: str) -> None:
        self.record = record
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.log_path = log_path
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(self.app),
                "--target",
                target,
                "--record",
                str(record),
                *args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=_env(),
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if not self._log.closed:
            self._log.close()


def read_records(*paths: Path) -> list[list[str]]:
    """Lines ``event job_id worker time`` from worker record files."""
    rows = []
    for path in paths:
        if path.exists():
            rows.extend(line.split() for line in path.read_text().splitlines() if line.strip())
    return rows
