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
# How long a process may take to start listening. Generous: on a machine whose two
# cores are busy with other work, importing grpc and migrating a schema can take tens
# of seconds; a start that never comes still fails, with the process's log.
STARTUP_TIMEOUT = 120.0


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05
) -> Any:
    """Poll ``predicate`` until truthy; fail with ``what`` after ``timeout`` seconds.

    Between polls it sleeps ``interval``, or as long as the poll took when that is
    longer: a predicate that starts a process (a ``wfjobs`` command) then polls at
    most half the time instead of keeping a core busy on a loaded machine.
    """
    deadline = time.monotonic() + timeout
    while True:
        started = time.monotonic()
        value = predicate()
        if value:
            return value
        now = time.monotonic()
        if now > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(min(max(interval, now - started), max(0.0, deadline - now) + 0.01))


def subprocess_env(
    extra: dict[str, str] | None = None, without: tuple[str, ...] = ()
) -> dict[str, str]:
    """This environment, with the repository importable, plus ``extra``, less ``without``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.update(extra or {})
    for name in without:
        env.pop(name, None)
    return env


class ManagedProcess:
    """A subprocess writing to ``log_path``; ``stop`` is SIGTERM, then SIGKILL."""

    proc: subprocess.Popen[bytes]
    log_path: Path

    def _spawn(
        self,
        args: list[str],
        log_path: Path,
        env: dict[str, str] | None = None,
        without: tuple[str, ...] = (),
    ) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in kill()/stop()
        self.proc = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, env=subprocess_env(env, without)
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_started(self, predicate: Callable[[], Any], what: str) -> Any:
        """Wait up to ``STARTUP_TIMEOUT`` for ``predicate``; a process that does not
        start is killed (and its log closed) before the failure is raised, so it
        cannot outlive its test and fail the next one."""
        try:
            return wait_until(predicate, STARTUP_TIMEOUT, what)
        except BaseException:
            self.kill()
            raise

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        if not self._log.closed:
            self._log.close()

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if not self._log.closed:
            self._log.close()


def coordinator_args(database_url: str, listen: str, *extra: str) -> list[str]:
    """``python -m coordinator serve`` with the test suite's usual flags."""
    return [
        sys.executable,
        "-m",
        "coordinator",
        "serve",
        "--listen",
        listen,
        "--database-url",
        database_url,
        "--migrate",
        *extra,
    ]


class Coordinator(ManagedProcess):
    """A real coordinator subprocess on loopback (a free port unless ``listen`` names one)."""

    def __init__(
        self,
        database_url: str,
        log_path: Path,
        *,
        listen: str = "127.0.0.1:0",
        args: tuple[str, ...] = ("--drain-timeout", "5"),
    ) -> None:
        self.database_url = database_url
        self._spawn(coordinator_args(database_url, listen, *args), log_path)
        port = self.wait_started(self._port, f"coordinator to listen (log: {log_path})")
        self.target = f"127.0.0.1:{port}"

    def _port(self) -> int | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"coordinator exited: {self.log_path.read_text()[-3000:]}")
        match = _LISTEN_RE.search(self.log_path.read_text(errors="replace"))
        return int(match.group(1)) if match else None


class WorkerProcess(ManagedProcess):
    """A worker app (``tests/e2e/worker_app.py`` unless ``app`` says otherwise)
    in a subprocess; every execution goes to ``record``."""

    app = REPO / "tests" / "e2e" / "worker_app.py"

    def __init__(self, target: str, record: Path, log_path: Path, *args: str) -> None:
        self.record = record
        command = [sys.executable, str(self.app), "--target", target, "--record", str(record)]
        self._spawn([*command, *args], log_path)


def read_records(*paths: Path) -> list[list[str]]:
    """Lines ``event job_id worker time`` from worker record files."""
    rows = []
    for path in paths:
        if path.exists():
            rows.extend(line.split() for line in path.read_text().splitlines() if line.strip())
    return rows


# -- tools a test needs ----------------------------------------------------------

import importlib  # noqa: E402
from types import ModuleType  # noqa: E402

import pytest  # noqa: E402


def in_ci() -> bool:
    """True when ``CI`` is set (``1``, ``true`` or ``yes``): every tool must be there."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing_tool(reason: str) -> None:
    """A tool the test needs is absent: skip, or fail under ``CI=true``."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true requires it)")
    pytest.skip(reason)


def require_module(name: str, reason: str) -> ModuleType:
    """``import name`` for a test; when it is absent, skip (fail under ``CI=true``).

    Used instead of ``pytest.importorskip`` for what the dev extra installs
    (``pip install -e '.[dev]'``), so a CI run never passes by skipping."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing_tool(f"{reason} (pip install -e '.[dev]')")
        raise
