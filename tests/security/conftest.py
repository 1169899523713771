"""Fixtures for security tests: token files and a coordinator that requires tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults.harness import CoordinatorProcess

from coordinator.api.auth import hash_token

# token -> (roles, tenants, job types)
CREDENTIALS = {
    "sched-a-secret": (["scheduler"], ["a"], None),
    "worker-a-secret": (["worker"], ["a"], None),
    "worker-b-secret": (["worker"], ["b"], None),
    "worker-a-mail-secret": (["worker"], ["a"], ["mail"]),
    "admin-a-secret": (["admin"], ["a"], None),
    "root-secret": (["admin", "scheduler", "worker"], ["*"], None),
}


def write_tokens(path: Path, credentials: dict[str, tuple]) -> None:
    lines = ["# test credentials"]
    for token, (roles, tenants, job_types) in credentials.items():
        entry = {
            "name": token.removesuffix("-secret"),
            "sha256": hash_token(token),
            "roles": roles,
            "tenants": tenants,
        }
        if job_types is not None:
            entry["job_types"] = job_types
        lines.append(json.dumps(entry))
    # Replaced in one step, as a mounted secret is: a reload never reads half a file.
    partial = path.with_suffix(".partial")
    partial.write_text("\n".join(lines) + "\n")
    partial.replace(path)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    """A coordinator on SQLite that requires bearer tokens."""
    tmp = tmp_path_factory.mktemp("auth")
    tokens = tmp / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    coordinator = CoordinatorProcess(
        f"sqlite:///{tmp / 'auth.db'}", tmp, env={"WFJOBS_TOKENS_FILE": str(tokens)}
    )
    coordinator.tokens_file = tokens  # type: ignore[attr-defined]
    try:
        yield coordinator
    finally:
        coordinator.stop()
