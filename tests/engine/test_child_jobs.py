"""Child jobs in the engine, on both stores: the parent id is stored, read back,
filtered on, checked for form; children are deduplicated by their key."""

from __future__ import annotations

import pytest

from coordinator.errors import InvalidArgument
from coordinator.model import JobFilter
from wfj_engine import Harness, run
from wfj_testing import make_job


def test_children_are_stored_with_their_parent_and_listed_by_it(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        parent = await h.enqueue()
        other = await h.enqueue()
        key = f"child:{parent}:#0"
        [(first, dedup, _)] = await h.engine.enqueue(
            [make_job(parent_job_id=parent, idempotency_key=key)]
        )
        assert not dedup
        # The same child enqueued again (a retried parent) is the same job.
        [(again, dedup, _)] = await h.engine.enqueue(
            [make_job(parent_job_id=parent, idempotency_key=key)]
        )
        assert (again, dedup) == (first, True)
        await h.engine.enqueue([make_job(parent_job_id=other)])
        row, _ = await h.job(first)
        assert row.parent_job_id == parent
        page = await h.engine.list_jobs(JobFilter(parent_job_id=parent), 100, "")
        assert [j.id for j in page.jobs] == [first]
        assert (await h.job(parent))[0].parent_job_id is None

    run(store_url, scenario)


def test_a_malformed_parent_id_is_invalid(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        with pytest.raises(InvalidArgument, match="parent_job_id 'nope' is malformed"):
            await h.engine.enqueue([make_job(parent_job_id="nope")])

    run(store_url, scenario)
