"""The SDK's public API and the examples pass ``mypy --strict``; result types flow."""

from __future__ import annotations

import textwrap
from pathlib import Path

from wfj_testing import REPO, require_module

# mypy comes with the dev extra (make install): an environment without it skips,
# except under CI=true, where a missing mypy fails.
api = require_module("mypy.api", "mypy is not installed")

TYPED_CALLER = textwrap.dedent(
    """
    from dataclasses import dataclass
    from typing import assert_type

    from worker_sdk import SchedulerClient, enqueue_and_wait, job_outcome


    @dataclass
    class Greeting:
        greeting: str


    def caller(client: SchedulerClient) -> str:
        greeting = enqueue_and_wait(client, "hello", {"name": "Ada"}, result_type=Greeting)
        assert_type(greeting, Greeting)
        job = client.wait_for_job("some-id")
        assert_type(job.result_value(Greeting), Greeting)
        assert_type(job_outcome(job, Greeting), Greeting)
        return greeting.greeting
    """
)


def test_worker_sdk_and_examples_pass_mypy_strict() -> None:
    out, err, status = api.run(["--config-file", str(REPO / "pyproject.toml")])

    assert status == 0, out + err
    assert out.startswith("Success: no issues found")


def test_result_types_flow_to_the_caller(tmp_path: Path) -> None:
    caller = tmp_path / "caller.py"
    caller.write_text(TYPED_CALLER)

    out, err, status = api.run(
        ["--strict", "--config-file", str(REPO / "pyproject.toml"), str(caller)]
    )

    assert status == 0, out + err
