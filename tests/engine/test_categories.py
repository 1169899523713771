"""Job categories as a scope: pause, concurrency limit, stats and list filters, on both stores."""

from __future__ import annotations

from collections import Counter

import pytest

from coordinator.engine import WorkerSession
from coordinator.engine.concurrency_limits import LimitBook
from coordinator.engine.explain import explain
from coordinator.errors import InvalidArgument
from coordinator.model import (
    Candidate,
    Completion,
    ConcurrencyLimit,
    JobCategory,
    JobFilter,
    JobStatus,
    LimitKind,
    PauseKind,
    PauseScope,
    parse_category,
)
from wfj_engine import Harness, run
from wfj_testing import make_job

INTEGRATION = int(JobCategory.INTEGRATION)
MAINTENANCE = int(JobCategory.MAINTENANCE)


def test_a_category_is_named_by_number_name_or_proto_name() -> None:
    for text in ("3", "integration", "INTEGRATION", "JOB_CATEGORY_INTEGRATION", " Integration "):
        assert parse_category(text) == JobCategory.INTEGRATION
    assert parse_category("activity-work") == JobCategory.ACTIVITY_WORK
    assert parse_category("nonsense") is None
    assert parse_category("99") is None


def test_a_category_limit_fits_and_excludes_by_the_category_number() -> None:
    book = LimitBook([ConcurrencyLimit(LimitKind.CATEGORY, str(INTEGRATION), 1)])
    jobs = [Candidate(f"i{i}", "t", 0, 0, "noop", "d", None, INTEGRATION) for i in range(3)]
    jobs += [Candidate("m0", "t", 0, 0, "noop", "d", None, MAINTENANCE)]
    assert [j.id for j in book.fit(jobs, {})] == ["i0", "m0"]
    assert book.exclusions({(int(LimitKind.CATEGORY), str(INTEGRATION)): 1}).categories == {
        INTEGRATION
    }


def test_pausing_a_category_holds_back_only_its_jobs_and_explain_names_it(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        h.engine.open_session(WorkerSession("w-cat", frozenset({"noop"})))
        held = await h.enqueue(tenant_id="t", category=INTEGRATION)
        free = await h.enqueue(tenant_id="t", category=MAINTENANCE)
        record = await h.engine.pause(
            PauseScope(PauseKind.CATEGORY, "t", "integration"), "ana", "api outage", None
        )
        assert record.value == str(INTEGRATION)
        _, reasons = await explain(h.engine, held)
        paused = [r for r in reasons if r.kind == "PAUSED"]
        assert len(paused) == 1
        assert "category integration is paused by ana" in paused[0].message
        assert paused[0].pause_id == record.id
        leased = await h.lease(10)
        assert [row.id for row, _ in leased] == [free]
        assert (await h.job(held))[0].status == JobStatus.PENDING
        # Another tenant's integration jobs are not covered by t's pause.
        other = await h.enqueue(tenant_id="u", category=INTEGRATION)
        assert [row.id for row, _ in await h.lease(10)] == [other]
        lifted = await h.engine.unpause(PauseScope(PauseKind.CATEGORY, "t", "3"), "ana")
        assert [p.id for p in lifted] == [record.id]
        assert [row.id for row, _ in await h.lease(10)] == [held]

    run(store_url, scenario)


def test_a_category_pause_needs_a_known_category(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        with pytest.raises(InvalidArgument, match="not a job category; use one of continuation"):
            await h.engine.pause(PauseScope(PauseKind.CATEGORY, "", "integrations"), "a", "", None)
        with pytest.raises(InvalidArgument, match="not a job category"):
            await h.engine.pause(PauseScope(PauseKind.CATEGORY, "", "unspecified"), "a", "", None)
        with pytest.raises(InvalidArgument, match="not a job category"):
            await h.engine.set_limit(ConcurrencyLimit(LimitKind.CATEGORY, "bogus", 1))

    run(store_url, scenario)


def test_category_concurrency_limit_is_never_exceeded_and_explained(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        h.engine.open_session(WorkerSession("w-cat", frozenset({"noop"})))
        await h.engine.set_limit(ConcurrencyLimit(LimitKind.CATEGORY, "integration", 2))
        listed = await h.engine.list_limits()
        assert [(limit.kind, limit.value) for limit, _ in listed] == [
            (LimitKind.CATEGORY, str(INTEGRATION))
        ]
        # A long backlog of the limited category does not hide other categories.
        await h.engine.enqueue(
            [make_job(tenant_id=f"t{i % 3}", category=INTEGRATION) for i in range(30)]
        )
        await h.engine.enqueue([make_job(category=MAINTENANCE) for _ in range(3)])
        leased = await h.lease(40)
        by_category = Counter(row.category for row, _ in leased)
        assert by_category == {INTEGRATION: 2, MAINTENANCE: 3}
        assert await h.lease(40) == []
        waiting = await h.engine.list_jobs(
            JobFilter(statuses=(int(JobStatus.PENDING),), category=INTEGRATION), 1, ""
        )
        _, reasons = await explain(h.engine, waiting.jobs[0].id)
        limit = next(r for r in reasons if r.kind == "CONCURRENCY_LIMIT")
        assert "concurrency limit of category integration is full: 2/2 running" in limit.message
        row, token = next((r, t) for r, t in leased if r.category == INTEGRATION)
        await h.engine.report([Completion(row.id, token)])
        again = await h.lease(40)
        assert [r.category for r, _ in again] == [INTEGRATION]

    run(store_url, scenario)


def test_stats_and_list_filter_by_category(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.enqueue([make_job(category=INTEGRATION) for _ in range(4)])
        await h.engine.enqueue([make_job(category=MAINTENANCE) for _ in range(2)])
        stats = await h.engine.ops.stats("", 60_000_000, INTEGRATION)
        assert stats.totals[JobStatus.PENDING] == 4
        everything = await h.engine.ops.stats("", 60_000_000)
        assert everything.totals[JobStatus.PENDING] == 6
        page = await h.engine.list_jobs(JobFilter(category=MAINTENANCE), 100, "")
        assert len(page.jobs) == 2
        assert {j.category for j in page.jobs} == {MAINTENANCE}

    run(store_url, scenario)
