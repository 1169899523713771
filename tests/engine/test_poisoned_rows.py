"""Rows stored with values no caller can send today (policies written before
validation, or by hand) never break a job's lifecycle, on both stores."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from coordinator.engine.retries import BACKOFF_CEILING_MS
from coordinator.model import Failure, JobStatus
from wfj_engine import Harness, run
from wfj_testing import T0


def _poison(h: Harness, job_id: str, **columns: object) -> None:
    """Write columns of a stored job directly, as an old or hand-edited row."""
    sets = ", ".join(f"{name} = :{name}" for name in columns)
    with h.engine.store.engine.begin() as conn:
        conn.execute(
            sa.text(f"UPDATE wfj_jobs SET {sets} WHERE id = :id"), {**columns, "id": job_id}
        )


POISONED_POLICIES = {
    "nan-multiplier": {"backoff_multiplier": float("nan")},
    "huge-multiplier": {"backoff_multiplier": 1e308, "initial_backoff_ms": 1000},
    "infinite-cap": {"max_backoff_ms": float("inf"), "backoff_multiplier": 2.0},
    "huge-cap": {"max_backoff_ms": 10**30},
    "nan-everything": {
        "initial_backoff_ms": float("nan"),
        "backoff_multiplier": float("nan"),
        "max_backoff_ms": float("nan"),
        "jitter": float("nan"),
    },
}


@pytest.mark.parametrize("policy", sorted(POISONED_POLICIES))
def test_fail_job_with_a_poisoned_policy_is_retried_within_the_cap(
    store_url: str, policy: str
) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=100)
        [(_, token)] = await h.lease()
        # The 70th attempt: 2 ** 69 times the initial backoff fits no column.
        _poison(h, job_id, retry_policy=json.dumps(POISONED_POLICIES[policy]), attempt=70)
        h.clock.advance(1)
        result = await h.engine.report_one(Failure(job_id, token, "boom", "IOError"))
        assert result.accepted and result.status == JobStatus.PENDING
        job, _ = await h.job(job_id)
        now = h.clock.now_us()
        assert now <= job.due_at <= now + BACKOFF_CEILING_MS * 1000

    run(store_url, scenario)


def test_fail_job_on_a_huge_attempt_number_is_retried_within_the_cap(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=5)
        [(_, token)] = await h.lease()
        _poison(h, job_id, attempt=2**31 - 3, max_attempts=2**31 - 1)
        result = await h.engine.report_one(Failure(job_id, token, "boom", "IOError"))
        assert result.accepted and result.status == JobStatus.PENDING
        job, _ = await h.job(job_id)
        # The default cap (300 s, jitter 20 %) is reached, never exceeded.
        assert T0 + 240 * 1_000_000 <= job.due_at <= T0 + 300 * 1_000_000

    run(store_url, scenario)
