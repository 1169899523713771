"""A hung, then stopped, coordinator behind an open dashboard (Playwright, Debian's chromium).

The dashboard runs on its own (``wfjobs dashboard``) so the coordinator can be
frozen (SIGSTOP: it holds its connections and answers nothing) and stopped
while the dashboard stays up. Pages then answer within their short deadline,
name the coordinator and since when it has not answered, and mark the figures
they still show as stale.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wfj_dashboard import CHROMIUM, CHROMIUM_ARGS, Dashboard, need_chromium
from wfj_testing import Coordinator
from worker_sdk import SchedulerClient

pytestmark = pytest.mark.e2e

# A page's calls have a 5 s deadline, an action's 30 s; a page answered well
# under 30 s shows the short one held (the margin is for a busy machine).
PAGE_BOUND_S = 20.0


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[dict[str, Any]]:
    need_chromium()
    coordinator = Coordinator(f"sqlite:///{tmp_path / 'jobs.db'}", tmp_path / "coord.log")
    dashboard = Dashboard(
        tmp_path / "dash.log", "--target", coordinator.target, "--listen", "127.0.0.1:0"
    )
    try:
        with SchedulerClient(coordinator.target) as scheduler:
            scheduler.enqueue("noop", {}, tenant_id="outage")
        yield {"coordinator": coordinator, "dashboard": dashboard, "url": dashboard.url()}
    finally:
        if coordinator.alive():
            coordinator.proc.send_signal(signal.SIGCONT)
        dashboard.stop()
        coordinator.stop()


def test_a_hung_then_stopped_coordinator_shows_a_banner_and_stale_figures(
    setup: dict[str, Any],
) -> None:
    from playwright.sync_api import expect, sync_playwright

    coordinator, url = setup["coordinator"], setup["url"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(40_000)
            page.goto(url + "/")
            expect(page.locator("#draining")).to_have_text("handing out jobs")
            expect(page.locator('[data-card="pending"] .value')).to_have_text("1")

            coordinator.proc.send_signal(signal.SIGSTOP)  # hung: connected, silent
            started = time.monotonic()
            page.reload()
            took = time.monotonic() - started
            banner = page.locator("#coordinator-down")
            expect(banner).to_contain_text(f"The coordinator at {coordinator.target}")
            expect(banner).to_contain_text("has not answered since")
            expect(banner).to_contain_text("DEADLINE_EXCEEDED")
            expect(page.locator("#stale")).to_contain_text("Stale: these figures were read at")
            expect(page.locator("#draining")).to_have_text("not answering: state unknown")
            # The last figures it gave are still there, marked stale.
            expect(page.locator('.stale [data-card="pending"] .value')).to_have_text("1")
            assert took < PAGE_BOUND_S, f"the page took {took:.1f} s"
            # A page with nothing to show from before says so too.
            page.goto(url + "/jobs")
            expect(page.locator("#coordinator-down")).to_contain_text(coordinator.target)

            coordinator.proc.send_signal(signal.SIGCONT)
            coordinator.stop()  # stopped: refused at once
            page.goto(url + "/")
            expect(page.locator("#coordinator-down")).to_contain_text("UNAVAILABLE")
            expect(page.locator("#draining")).to_have_text("not answering: state unknown")

            # The dashboard itself gone: the open page greys what it shows and says since when.
            setup["dashboard"].stop()
            expect(page.locator("#stale-banner")).to_contain_text("Not updating since")
            expect(page.locator("#stale-banner")).to_contain_text("UTC")
            assert "stale" in (page.locator("#live").get_attribute("class") or "")
        finally:
            browser.close()


def test_open_job_and_workers_pages_show_the_same_banner_when_the_coordinator_stops_answering(
    setup: dict[str, Any],
) -> None:
    from playwright.sync_api import expect, sync_playwright

    coordinator, url = setup["coordinator"], setup["url"]
    with SchedulerClient(coordinator.target) as scheduler:
        job = scheduler.enqueue("noop", {}, tenant_id="outage")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            context.set_default_timeout(40_000)
            pages = {"job": context.new_page(), "workers": context.new_page()}
            pages["job"].goto(f"{url}/jobs/{job.id}")
            pages["workers"].goto(f"{url}/workers")
            for page in pages.values():
                page.bring_to_front()
                expect(page.locator("#live-status")).to_contain_text("live")
                expect(page.locator("#coordinator-down")).to_have_count(0)

            coordinator.proc.send_signal(signal.SIGSTOP)  # hung: connected, silent
            for name, page in pages.items():
                page.bring_to_front()  # a page refreshes while it is shown
                banner = page.locator("#coordinator-down")
                # Its next refresh (events or not, within 10 s) waits out the 5 s deadline.
                expect(banner).to_contain_text(
                    f"The coordinator at {coordinator.target}", timeout=40_000
                )
                expect(banner).to_contain_text("has not answered since")
                expect(banner).to_contain_text("DEADLINE_EXCEEDED")
                expect(page.locator("#stale-banner")).to_have_count(0)
                assert "stale" in (page.locator("#live").get_attribute("class") or ""), name
            # The live part itself answers with the banner's words, not gRPC's text.
            answer = context.request.get(f"{url}/live/jobs/{job.id}")
            assert answer.status == 503
            assert answer.headers.get("x-coordinator-down") == "1"
            assert f"The coordinator at <b>{coordinator.target}</b> has not answered" in (
                answer.text()
            )

            coordinator.proc.send_signal(signal.SIGCONT)
            coordinator.stop()  # stopped: refused at once
            for page in pages.values():
                page.bring_to_front()
                banner = page.locator("#coordinator-down")
                expect(banner).to_contain_text("UNAVAILABLE", timeout=40_000)
                expect(page.locator("#stale-banner")).to_have_count(0)
                # The words of the banner a page opened now shows, up to the error itself.
                fresh = context.new_page()
                fresh.goto(f"{url}/jobs")
                opened = fresh.inner_text("#coordinator-down")
                fresh.close()
                assert banner.inner_text().split(" (")[0] == opened.split(" (")[0]
        finally:
            browser.close()
