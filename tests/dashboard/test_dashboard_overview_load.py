"""The overview's first load with 20,000 jobs in 50 tenants, timed in a real browser.

The overview asks the coordinator for its figures all at once (the stats,
the pauses, twelve stats windows and twelve latency samples), so its first
load costs about one call, not twenty-six in a row. The time is printed
(0.2-0.6 s on a quiet two-core machine, 1.5 s seen with both cores busy); the
assertion's bound is far above the 0.5 s aimed at, so a busy machine does not
fail it. That the calls go out at once is asserted without a clock in
tests/unit/wfjobs_dashboard/test_backend.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from wfj_dashboard import CHROMIUM, CHROMIUM_ARGS, CoordinatorWithDashboard, need_chromium
from worker_sdk import AdminClient, JobFilter, JobRequest, SchedulerClient

pytestmark = pytest.mark.e2e

JOBS = 20_000
TENANTS = 50
# The aim is 0.5 s; the bound allows for a machine whose cores are all busy.
BOUND_S = 10.0


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorWithDashboard]:
    need_chromium()
    tmp = tmp_path_factory.mktemp("overview-load")
    coordinator = CoordinatorWithDashboard(f"sqlite:///{tmp / 'jobs.db'}", tmp / "coord.log")
    try:
        with SchedulerClient(coordinator.target, timeout=120) as scheduler:
            for start in range(0, JOBS, 2_000):
                scheduler.enqueue_batch(
                    [
                        JobRequest(
                            job_type=f"type-{n % 7}",
                            payload={"n": n},
                            tenant_id=f"tenant-{n % TENANTS:02d}",
                            delay=timedelta(hours=1) if n % 3 == 0 else None,
                        )
                        for n in range(start, start + 2_000)
                    ]
                )
        with AdminClient(coordinator.target, timeout=120) as admin:
            admin.bulk_cancel_jobs(JobFilter(tenant_id="tenant-00"), reason="finished ones too")
            assert admin.get_stats().pending == JOBS - JOBS // TENANTS
        yield coordinator
    finally:
        coordinator.stop()


def test_the_overview_first_loads_within_the_bound_with_20000_jobs(
    loaded: CoordinatorWithDashboard, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(loaded.url + "/static/dashboard.css")  # the browser itself warmed up
            page.goto(loaded.url + "/")
            timing: dict[str, Any] = page.evaluate(
                "() => performance.getEntriesByType('navigation')[0].toJSON()"
            )
            cards = page.locator('[data-card="pending"] .value').inner_text()
            rows = page.locator("#live table tbody tr").count()
        finally:
            browser.close()
    first_load_s = (timing["responseEnd"] - timing["requestStart"]) / 1000
    print(
        f"\noverview first load with {JOBS} jobs in {TENANTS} tenants: "
        f"{first_load_s:.3f} s (HTML), {timing['duration'] / 1000:.3f} s (until load)"
    )
    (tmp_path / "overview-load.json").write_text(json.dumps(timing))
    assert int(cards) == JOBS - JOBS // TENANTS
    assert rows == TENANTS * 7
    assert first_load_s < BOUND_S, f"first load took {first_load_s:.2f} s"
