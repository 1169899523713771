"""Child processes of the bench: started with a log file, bounded in time, always stopped.

Every process the bench starts runs in its own session (process group) so it
can be stopped with its children, gets a hard deadline after which it is
killed, and is registered so that an interrupted bench still stops it. Output
goes to files under the run's log directory (a full pipe would stall a child).
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

_LIVE: list[ManagedProcess] = []
LOG_DIR = Path(tempfile.mkdtemp(prefix="wfjobs-bench-"))


class ProcessFailed(RuntimeError):
    """A child exited early or did not get ready in time; the message quotes its log."""


class ManagedProcess:
    """A child process with a log file and a deadline.

    Args:
        name: Short label, used for the log file name.
        argv: Command line; `python` as first element means this interpreter.
        deadline_s: Wall-clock seconds after which `stop()` is forced (and
            `wait_for_log` gives up).
        env: Extra environment variables.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        deadline_s: float = 600.0,
        env: dict[str, str] | None = None,
    ) -> None:
        argv = list(argv)
        if argv and argv[0] == "python":
            argv[0] = sys.executable
        self.name = name
        self.argv = argv
        self.log_path = LOG_DIR / f"{name}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        child_env = dict(os.environ)
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        if env:
            child_env.update(env)
        self.started_at = time.monotonic()
        self.deadline = self.started_at + deadline_s
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=child_env,
            start_new_session=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        _LIVE.append(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def wait_for_log(self, pattern: str, timeout_s: float) -> re.Match[str]:
        """Wait until a line of the log matches `pattern`; return the match."""
        regex = re.compile(pattern)
        end = min(time.monotonic() + timeout_s, self.deadline)
        while True:
            match = regex.search(self.log_text())
            if match:
                return match
            if not self.running():
                raise ProcessFailed(
                    f"{self.name} exited with {self.popen.returncode} before logging "
                    f"{pattern!r}:\n{self.log_tail()}"
                )
            if time.monotonic() > end:
                raise ProcessFailed(
                    f"{self.name} did not log {pattern!r} within {timeout_s:.0f} s:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)

    def wait(self, timeout_s: float) -> int:
        """Wait for a normal exit (bounded); raise ProcessFailed if it does not come."""
        try:
            return self.popen.wait(
                timeout=max(0.0, min(timeout_s, self.deadline - time.monotonic()))
            )
        except subprocess.TimeoutExpired as exc:
            raise ProcessFailed(f"{self.name} still running after {timeout_s:.0f} s") from exc

    def stop(self, grace_s: float = 5.0) -> int | None:
        """SIGTERM the process group, then SIGKILL it after `grace_s`. Idempotent."""
        if self.popen.poll() is None:
            _signal_group(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        if not self._log.closed:
            self._log.close()
        if self in _LIVE:
            _LIVE.remove(self)
        return self.popen.returncode

    def __enter__(self) -> ManagedProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def stop_all(processes: Sequence[ManagedProcess], grace_s: float = 5.0) -> None:
    """Stop several processes: signal all first, then wait, so they drain in parallel."""
    for proc in processes:
        if proc.running():
            _signal_group(proc.pid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    for proc in processes:
        proc.stop(grace_s=max(0.1, end - time.monotonic()))


def enforce_deadlines() -> None:
    """Kill any registered child past its deadline (called from polling loops)."""
    now = time.monotonic()
    for proc in list(_LIVE):
        if proc.running() and now > proc.deadline:
            proc.stop(grace_s=1.0)


@atexit.register
def _stop_leftovers() -> None:
    for proc in list(_LIVE):
        proc.stop(grace_s=2.0)
