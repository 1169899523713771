"""docs/sdk.md runs as written: its enqueue_batch block against a coordinator,
its run_handler tests as tests."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import types
from pathlib import Path

from wfj_testing import REPO, Coordinator
from worker_sdk import AdminClient, JobFilter

PAGE = REPO / "docs" / "sdk.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_the_batch_block_enqueues_every_job_once(tmp_path: Path) -> None:
    batch, _ = _blocks()
    coordinator = Coordinator(f"sqlite:///{tmp_path / 'sdk.db'}", tmp_path / "coordinator.log")
    try:
        code = batch.replace("127.0.0.1:50051", coordinator.target)
        runs = []
        for _ in range(2):  # the idempotency keys make the second run find the same jobs
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, str(PAGE), "exec"), {})  # noqa: S102 - the page's own code
            runs.append(out.getvalue().splitlines())
        with AdminClient(coordinator.target) as admin:
            stored = list(admin.iter_jobs(JobFilter(tenant_id="shop")))
    finally:
        coordinator.stop()
    first, second = runs
    assert [line.split()[1:] for line in first] == [["PENDING", "new"]] * 4
    # The keyed thumbnails are found again; the unkeyed summary is a new job.
    assert [line.split()[2] for line in second] == ["existing"] * 3 + ["new"]
    assert [line.split()[0] for line in second[:3]] == [line.split()[0] for line in first[:3]]
    assert len(stored) == 5


def test_the_testing_block_passes(monkeypatch) -> None:
    _, testing = _blocks()
    module = types.ModuleType("sdk_doc")
    monkeypatch.setitem(sys.modules, "sdk_doc", module)  # dataclasses look their module up
    exec(compile(testing, str(PAGE), "exec"), module.__dict__)  # noqa: S102 - the page's own code
    tests = [v for k, v in vars(module).items() if k.startswith("test_") and callable(v)]
    assert len(tests) == 2
    for test in tests:
        test()
