"""The conformance kit against the TypeScript SDK's worker (sdks/typescript/conformance/worker.ts,
built into sdks/typescript/dist by ``make install``)."""

from __future__ import annotations

import shutil

import pytest
from conformance.kit import REPO, Sdk
from conformance.scenarios import *  # noqa: F403 - the scenarios run in this module

from wfj_testing import missing_tool

WORKER = REPO / "sdks" / "typescript" / "dist" / "conformance" / "worker.js"


@pytest.fixture
def sdk() -> Sdk:
    node = shutil.which("node")
    if node is None:
        missing_tool("Node.js is not installed")
    if not WORKER.exists():
        missing_tool(f"{WORKER} is not built (make install builds it)")
    return Sdk("typescript", [str(node), str(WORKER)])
