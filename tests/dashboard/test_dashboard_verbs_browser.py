"""The operator verbs in a real browser (Playwright driving Debian's chromium):
Run now on a scheduled job, Set aside on a FAULTED ordering head, the /groups
page, Purge matching finished jobs on the jobs list, and the overview's
failures number listing the jobs it counts once they were retried.

One coordinator (token authentication on, dashboard beside it) and one worker
serve the module; each test opens its own browser context.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from wfj_dashboard import (
    TOKENS,
    browser_cluster,
    browser_context,
    chromium_browser,
    confirm,
    expect,
    log_in,
)
from wfj_testing import read_records, wait_until
from worker_sdk import AdminClient, JobFilter, JobRequest, JobStatus

pytestmark = pytest.mark.e2e

OPS = TOKENS["ops"][0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with browser_cluster(tmp_path_factory.mktemp("dashboard-verbs")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def browser(cluster: dict[str, Any]) -> Iterator[Any]:
    with chromium_browser() as chromium:
        yield chromium


@pytest.fixture
def page(browser: Any, cluster: dict[str, Any]) -> Iterator[Any]:
    with browser_context(browser) as ctx:
        yield log_in(ctx, cluster["url"], OPS)


def status_of(admin: AdminClient, job_id: str) -> JobStatus:
    return admin.get_job(job_id).status


def test_run_now_makes_a_scheduled_job_run(cluster: dict[str, Any], page: Any) -> None:
    job = cluster["scheduler"].enqueue("noop", {}, tenant_id="verbs", delay=timedelta(hours=1))
    page.goto(f"{cluster['url']}/jobs/{job.id}")
    button = page.locator("#actions button[data-op=run_now]")
    expect()(button).to_have_text("Run now")
    button.click()
    assert f"Run now job {job.id}" in confirm(page)
    expect()(page.locator(".flash.ok")).to_contain_text(f"run now job {job.id}")
    expect()(page.locator("#state .badge")).to_have_text("COMPLETED", timeout=20_000)
    # A job that is due (or finished) offers no Run now.
    expect()(page.locator("#actions button[data-op=run_now]")).to_have_count(0)


def test_set_aside_a_faulted_ordering_head_without_running_it(
    cluster: dict[str, Any], page: Any
) -> None:
    scheduler, admin = cluster["scheduler"], cluster["admin"]
    head = scheduler.enqueue(
        "flaky", {"succeed_on": 2}, tenant_id="verbs", ordering_key="poison", max_attempts=1
    ).id
    behind = scheduler.enqueue("noop", {}, tenant_id="verbs", ordering_key="poison").id
    wait_until(lambda: status_of(admin, head) == JobStatus.FAULTED or None, 30, "the head to fault")
    page.goto(f"{cluster['url']}/jobs/{behind}")
    expect()(page.locator("#explain")).to_contain_text(f"wfjobs jobs cancel {head}")
    page.goto(f"{cluster['url']}/jobs/{head}")
    expect()(page.locator("#actions")).to_contain_text("the next job of ordering key poison runs")
    page.locator("#actions button", has_text="Set aside (cancel)").click()
    assert f"Cancel job {head}" in confirm(page)
    expect()(page.locator(".flash.ok")).to_contain_text("now CANCELLED")
    wait_until(
        lambda: status_of(admin, behind) == JobStatus.COMPLETED or None,
        30,
        "the job behind the set-aside head to run",
    )
    # The worker was connected all along: the head's one start is its faulted attempt.
    starts = [r for r in read_records(Path(cluster["record"])) if r[:2] == ["start", head]]
    assert len(starts) == 1, starts
    assert status_of(admin, head) == JobStatus.CANCELLED


def test_groups_page_shows_progress_and_links_the_completion_job(
    cluster: dict[str, Any], page: Any
) -> None:
    scheduler = cluster["scheduler"]
    done, _ = scheduler.create_group(
        JobRequest("noop", {}, tenant_id="verbs-groups"),
        members=[JobRequest("noop", {}, tenant_id="verbs-groups") for _ in range(2)],
        tenant_id="verbs-groups",
        close=True,
    )
    waiting, _ = scheduler.create_group(
        JobRequest("noop", {}, tenant_id="verbs-groups"),
        members=[JobRequest("nobody-serves", {}, tenant_id="verbs-groups")],
        tenant_id="verbs-groups",
    )
    completed = wait_until(
        lambda: (lambda g: g if g.completion_job_id else None)(scheduler.get_group(done.id)),
        30,
        "the closed group to complete",
    )
    response = page.goto(cluster["url"] + "/groups")
    assert response.status == 200
    row = page.locator(f"tr[data-group='{done.id}']")
    expect()(row).to_contain_text("completed")
    expect()(row.locator(".progress")).to_have_text("2/2")
    open_row = page.locator(f"tr[data-group='{waiting.id}']")
    expect()(open_row.locator(".progress")).to_have_text("0/1")
    expect()(open_row).to_contain_text("not yet")
    row.locator("a.completion").click()
    page.wait_for_url(f"{cluster['url']}/jobs/{completed.completion_job_id}")
    page.goto(cluster["url"] + "/groups?status=open")
    expect()(page.locator(f"tr[data-group='{waiting.id}']")).to_have_count(1)
    expect()(page.locator(f"tr[data-group='{done.id}']")).to_have_count(0)
    page.locator("header nav a", has_text="Groups").click()
    page.wait_for_url(cluster["url"] + "/groups")


def test_purge_matching_finished_jobs_counts_first_and_refuses_a_search(
    cluster: dict[str, Any], page: Any
) -> None:
    scheduler, admin = cluster["scheduler"], cluster["admin"]
    ids = [scheduler.enqueue("nobody-serves", {}, tenant_id="verbs-purge").id for _ in range(3)]
    for job_id in ids[:2]:
        admin.cancel_job(job_id)
    page.goto(f"{cluster['url']}/jobs?tenant_id=verbs-purge&q=nothing&q_in=payload")
    page.click("button[data-op=purge]")
    expect()(page.locator(".flash.error")).to_contain_text("clear the search")
    page.goto(f"{cluster['url']}/jobs?tenant_id=verbs-purge")
    page.click("button[data-op=purge]")
    asked = confirm(page)
    assert "Purge 2 finished job(s) of the 3 the list holds (tenant verbs-purge)" in asked
    expect()(page.locator(".flash.ok")).to_contain_text("purged 2 of 2 matching finished job(s)")
    left = admin.list_jobs(JobFilter(tenant_id="verbs-purge")).jobs
    assert [j.id for j in left] == [ids[2]]


def test_the_failures_number_lists_the_jobs_that_failed_though_retried_since(
    cluster: dict[str, Any], browser: Any
) -> None:
    scheduler, admin = cluster["scheduler"], cluster["admin"]
    failed = [
        scheduler.enqueue("flaky", {"succeed_on": 2}, tenant_id="acme", max_attempts=1).id
        for _ in range(3)
    ]
    for job_id in failed:
        assert scheduler.wait_for_job(job_id, timeout=30).status == JobStatus.FAULTED
        admin.retry_job(job_id, keep_attempts=True)
    for job_id in failed:
        assert scheduler.wait_for_job(job_id, timeout=30).status == JobStatus.COMPLETED
    # The tenant's own login: its overview counts only these failures.
    with browser_context(browser) as ctx:
        page = log_in(ctx, cluster["url"], TOKENS["acme-admin"][0])
        card = page.locator('a.card[data-card="failures, last 5 min"]')
        expect()(card.locator(".value")).to_have_text("3")
        card.click()
        expect()(page.locator(".pager .total")).to_have_text("3 job(s) match")
        listed = page.locator("tbody td a.mono").all_inner_texts()
        assert sorted(listed) == sorted(failed)
        expect()(page.locator("tbody")).not_to_contain_text("FAULTED")
