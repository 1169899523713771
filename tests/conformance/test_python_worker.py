"""The conformance kit against the Python SDK's worker (tests/conformance/python_worker.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conformance.kit import Sdk
from conformance.scenarios import *  # noqa: F403 - the scenarios run in this module

WORKER = Path(__file__).resolve().parent / "python_worker.py"


@pytest.fixture
def sdk() -> Sdk:
    return Sdk("python", [sys.executable, str(WORKER)])
