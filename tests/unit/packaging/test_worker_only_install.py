"""A worker-only install (no extras): the CLI works, the coordinator script says what to install.

The install is simulated in a fresh interpreter whose importer refuses the
modules that only the ``coordinator`` extra brings (and, for the CLI, the
coordinator package itself), as they are absent there.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from coordinator.launch import EXTRA_MODULES

BLOCKED_ROOTS = {name.split(".", 1)[0] for name in EXTRA_MODULES}

_BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys

    class WorkerOnlyInstall(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".", 1)[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, WorkerOnlyInstall())
    """
)


def run_without(blocked: set[str], code: str) -> subprocess.CompletedProcess[str]:
    program = f"BLOCKED = {sorted(blocked)!r}\n{_BLOCKER}\n{textwrap.dedent(code)}"
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )


def test_wfjobs_runs_without_the_coordinator_package_or_its_extra() -> None:
    result = run_without(
        {"coordinator", *BLOCKED_ROOTS},
        """
        import sys
        from worker_sdk.cli import main
        sys.exit(main(["--help"]))
        """,
    )

    assert result.returncode == 0, result.stderr
    assert "usage: wfjobs" in result.stdout
    assert "Exit codes (stable, for scripts)" in result.stdout


def test_wfjobs_coordinator_without_the_extra_names_the_extra_to_install() -> None:
    result = run_without(
        BLOCKED_ROOTS,
        """
        import sys
        from coordinator.launch import main
        sys.exit(main(["serve", "--help"]))
        """,
    )

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "pip install 'workflow-jobs[coordinator]'" in result.stderr
    assert result.stderr.startswith("wfjobs-coordinator: this install has the worker SDK only")
    assert "sqlalchemy" in result.stderr


def test_only_the_missing_modules_are_named() -> None:
    result = run_without(
        {"prometheus_client"},
        """
        from coordinator.launch import missing_modules
        print(missing_modules())
        """,
    )

    assert result.stdout.strip() == "['prometheus_client']"


def test_wfjobs_coordinator_with_the_extra_runs_the_coordinator() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from coordinator.launch import main; sys.exit(main(['serve', '--help']))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "--database-url" in result.stdout


def test_building_the_package_prints_no_setuptools_deprecation() -> None:
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "--name"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "workflow-jobs"
    assert "Deprecat" not in result.stderr
