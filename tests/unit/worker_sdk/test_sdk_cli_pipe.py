"""``wfjobs`` writing into a pipe whose reader is gone (``wfjobs ... | head``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from wfj_testing import Coordinator, subprocess_env


def test_a_closed_pipe_ends_quietly_with_141(tmp_path: Path) -> None:
    coordinator = Coordinator(f"sqlite:///{tmp_path / 'pipe.db'}", tmp_path / "coordinator.log")
    try:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "wfjobs"), "stats"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=subprocess_env({"WFJOBS_TARGET": coordinator.target}),
        )
        # No reader is left by the time wfjobs writes: its write fails with EPIPE.
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        proc.stderr.close()
        code = proc.wait(60)
    finally:
        coordinator.stop()

    assert stderr == ""
    assert code == 141
