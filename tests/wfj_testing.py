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
