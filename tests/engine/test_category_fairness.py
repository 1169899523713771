"""Fairness weights per category within a tenant, on both stores and on both
acquisition paths (the one-statement claim, and the counting claim that a
concurrency limit turns on)."""

from __future__ import annotations

from collections import Counter

import pytest

from coordinator.errors import InvalidArgument
from coordinator.model import ConcurrencyLimit, JobCategory, LimitKind
from wfj_engine import Harness, run
from wfj_testing import make_job

INTEGRATION = int(JobCategory.INTEGRATION)
MAINTENANCE = int(JobCategory.MAINTENANCE)
PATHS = ["one-statement", "counting"]


async def _path(h: Harness, path: str) -> None:
    if path == "counting":
        # A limit that never binds sends every pass to the counting claim.
        await h.engine.set_limit(ConcurrencyLimit(LimitKind.JOB_TYPE, "other", 1))


async def _take(h: Harness, passes: int, n: int) -> Counter[tuple[str, int]]:
    taken: Counter[tuple[str, int]] = Counter()
    for _ in range(passes):
        for row, _ in await h.lease(n):
            taken[(row.tenant_id, row.category)] += 1
    return taken


@pytest.mark.parametrize("path", PATHS)
def test_category_weights_share_a_tenants_starts(store_url: str, path: str) -> None:
    async def scenario(h: Harness) -> None:
        await _path(h, path)
        await h.engine.set_category_weight("acme", INTEGRATION, 3)
        # One lane (same tenant, type, definition); the maintenance jobs are
        # all older, so in-lane order alone would start them first.
        await h.engine.enqueue(
            [make_job(tenant_id="acme", category=MAINTENANCE) for _ in range(400)]
        )
        await h.engine.enqueue(
            [make_job(tenant_id="acme", category=INTEGRATION) for _ in range(400)]
        )
        taken = await _take(h, 20, 10)
        assert taken == {("acme", INTEGRATION): 150, ("acme", MAINTENANCE): 50}, taken

    run(store_url, scenario)


@pytest.mark.parametrize("path", PATHS)
def test_category_shares_compose_with_the_tenant_share(store_url: str, path: str) -> None:
    async def scenario(h: Harness) -> None:
        await _path(h, path)
        await h.engine.set_category_weight("acme", INTEGRATION, 3)
        await h.engine.enqueue(
            [make_job(tenant_id="acme", category=MAINTENANCE) for _ in range(400)]
            + [make_job(tenant_id="acme", category=INTEGRATION) for _ in range(400)]
            + [make_job(tenant_id="globex", category=MAINTENANCE) for _ in range(400)]
        )
        taken = await _take(h, 20, 8)
        # Tenants 1:1 (80 each); within acme, integration 3 : maintenance 1.
        assert taken == {
            ("acme", INTEGRATION): 60,
            ("acme", MAINTENANCE): 20,
            ("globex", MAINTENANCE): 80,
        }, taken

    run(store_url, scenario)


@pytest.mark.parametrize("path", PATHS)
def test_a_small_category_is_not_starved_behind_a_large_older_one(
    store_url: str, path: str
) -> None:
    async def scenario(h: Harness) -> None:
        await _path(h, path)
        await h.engine.enqueue(
            [make_job(tenant_id="acme", category=MAINTENANCE) for _ in range(2000)]
        )
        for _ in range(5):
            await h.lease(5)
        small = await h.enqueue(tenant_id="acme", category=INTEGRATION)
        # Default weights 1:1: the new category's head is among the next starts.
        assert small in [row.id for row, _ in await h.lease(4)]

    run(store_url, scenario)


def test_category_weights_are_set_listed_and_removed(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_category_weight("acme", INTEGRATION, 3)
        await h.engine.set_category_weight("acme", MAINTENANCE, 2)
        await h.engine.set_category_weight("globex", INTEGRATION, 5)
        await h.engine.set_category_weight("acme", MAINTENANCE, 4)
        assert await h.engine.list_category_weights() == {
            ("acme", INTEGRATION): 3,
            ("acme", MAINTENANCE): 4,
            ("globex", INTEGRATION): 5,
        }
        assert await h.engine.list_category_weights("globex") == {("globex", INTEGRATION): 5}
        assert await h.engine.remove_category_weight("acme", INTEGRATION) is True
        assert await h.engine.remove_category_weight("acme", INTEGRATION) is False
        assert h.engine.fair.category_weight("acme", INTEGRATION) == 1
        assert h.engine.fair.category_weight("acme", MAINTENANCE) == 4
        # Back to 1:1 once removed.
        await h.engine.set_category_weight("acme", MAINTENANCE, 1)
        await h.engine.enqueue(
            [make_job(tenant_id="acme", category=MAINTENANCE) for _ in range(100)]
            + [make_job(tenant_id="acme", category=INTEGRATION) for _ in range(100)]
        )
        assert await _take(h, 5, 8) == {("acme", INTEGRATION): 20, ("acme", MAINTENANCE): 20}
        with pytest.raises(InvalidArgument, match="tenant_id is required"):
            await h.engine.set_category_weight("", INTEGRATION, 2)
        with pytest.raises(InvalidArgument, match="not a known JobCategory"):
            await h.engine.set_category_weight("acme", 99, 2)
        with pytest.raises(InvalidArgument, match="between 1 and 10000"):
            await h.engine.set_category_weight("acme", INTEGRATION, 0)

    run(store_url, scenario)
