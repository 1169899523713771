"""The dashboard in a real browser (Playwright driving Debian's chromium).

One coordinator (token authentication on, dashboard beside it), one worker and
one browser serve the whole module; each test opens its own browser context,
so cookies and sessions do not leak between tests.
"""

from __future__ import annotations

import http.client
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from wfj_dashboard import (
    TOKENS,
    browser_cluster,
    browser_context,
    chromium_browser,
    confirm,
    expect,
    log_in,
    screenshot,
)
from worker_sdk import (
    JobRequest,
    RetryPolicy,
    Uniqueness,
    WorkflowRef,
)

pytestmark = pytest.mark.e2e

OPS = TOKENS["ops"][0]
ACME_ADMIN = TOKENS["acme-admin"][0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with browser_cluster(tmp_path_factory.mktemp("dashboard")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def browser(cluster: dict[str, Any]) -> Iterator[Any]:
    with chromium_browser() as chromium:
        yield chromium


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    with browser_context(browser) as ctx:
        yield ctx


def test_overview_shows_live_backlog(cluster: dict[str, Any], context: Any) -> None:
    page = log_in(context, cluster["url"], OPS)
    pending = page.locator('[data-card="pending"] .value')
    before = int(pending.inner_text())
    for n in range(3):
        cluster["scheduler"].enqueue(
            "noop", {"n": n}, tenant_id="overview", delay=timedelta(hours=1)
        )
    # The page refreshes itself: no reload, the count and the backlog row appear.
    expect()(pending).to_have_text(str(before + 3))
    row = page.locator("#live table tr", has_text="overview")
    expect()(row).to_contain_text("noop")
    expect()(page.locator("#live-status")).to_contain_text("live")
    assert page.locator("figure.chart svg").count() == 2


def test_pause_from_the_ui_shows_in_explain_then_unpause_completes_live(
    cluster: dict[str, Any], context: Any
) -> None:
    page = log_in(context, cluster["url"], OPS)
    expect()(page.locator("header .who")).to_contain_text("ops · all tenants")
    page.goto(cluster["url"] + "/pauses")
    page.select_option("#pause-form select[name=kind]", "definition")
    page.fill("#pause-form input[name=value]", "billing-flow")
    page.fill("#pause-form input[name=tenant_id]", "acme")
    page.fill("#pause-form input[name=reason]", "ledger maintenance")
    page.fill("#pause-form input[name=expire_minutes]", "90")
    page.click("#pause-form button[type=submit]")
    asked = confirm(page)
    assert "Pause definition billing-flow in tenant acme" in asked
    assert "lifting by itself in 90 min" in asked
    expect()(page.locator(".flash.ok")).to_contain_text("paused definition billing-flow")

    job = cluster["scheduler"].enqueue(
        "noop",
        {"invoice": 42},
        tenant_id="acme",
        workflow=WorkflowRef(definition_id="billing-flow", instance_id="inv-42"),
    )
    page.goto(f"{cluster['url']}/jobs/{job.id}")
    explain = page.locator("#explain")
    expect()(explain).to_contain_text("definition billing-flow is paused")
    expect()(explain).to_contain_text("ledger maintenance")
    expect()(explain).to_contain_text("lifts at")
    expect()(page.locator("#payload")).to_contain_text('"invoice": 42')
    screenshot(page, "dashboard-job-explain")

    # Unpause in a second tab; the job's page, left open, shows it complete by itself.
    other = context.new_page()
    other.goto(cluster["url"] + "/pauses")
    screenshot(other, "dashboard-pauses")
    other.locator("tr", has_text="billing-flow").locator("button", has_text="Unpause").click()
    assert "Unpause definition billing-flow" in confirm(other)
    expect()(other.locator(".flash.ok")).to_contain_text("lifted 1 pause")
    expect()(page.locator("#state .badge")).to_have_text("COMPLETED", timeout=20_000)
    expect()(page.locator("#explain")).to_have_count(0)
    expect()(page.locator("#result")).to_contain_text('"ok": true')
    other.reload()
    history = other.locator("table").last
    expect()(history.locator("tr", has_text="billing-flow")).to_contain_text("by ops")


def test_every_backlog_number_lists_exactly_the_jobs_it_counts_even_just_enqueued(
    cluster: dict[str, Any], context: Any
) -> None:
    scheduler, admin = cluster["scheduler"], cluster["admin"]
    page = log_in(context, cluster["url"], OPS)
    # No worker serves this type: the due jobs stay pending, due since this second.
    due = [scheduler.enqueue("nobody-serves", {}, tenant_id="counted").id for _ in range(3)]
    later = scheduler.enqueue("nobody-serves", {}, tenant_id="counted", delay=timedelta(hours=1)).id
    page.goto(cluster["url"] + "/")  # at once: the counts are read within the second
    row = page.locator("#live table tr", has_text="counted")
    cells = row.locator("td a.num")
    expect()(cells).to_have_count(2)
    links = [(cells.nth(i).inner_text(), cells.nth(i).get_attribute("href")) for i in range(2)]
    listed = []
    for count, href in links:
        page.goto(cluster["url"] + href)
        ids = page.locator("tbody td a.mono").all_inner_texts()
        assert page.inner_text(".pager .total") == f"{count} job(s) match"
        listed.append(sorted(ids))
    assert listed == [sorted(due), [later]]
    for job_id in [*due, later]:
        admin.cancel_job(job_id)


def test_the_pause_history_says_a_pause_expired_not_that_it_is_active(
    cluster: dict[str, Any], context: Any
) -> None:
    admin = cluster["admin"]
    admin.pause("job_type", "lapse-type", expire_time=datetime.now(UTC) + timedelta(seconds=1))
    deadline = datetime.now(UTC) + timedelta(seconds=30)
    while any(p.scope.value == "lapse-type" for p in admin.list_pauses()):
        assert datetime.now(UTC) < deadline, "the pause never expired"
        time.sleep(0.2)
    page = log_in(context, cluster["url"], OPS)
    page.goto(cluster["url"] + "/pauses")
    row = page.locator("table").last.locator("tr", has_text="lapse-type")
    expect()(row.locator("td").last).to_contain_text(" UTC by expiry")


def read_events(stream: Any, until: str) -> list[str]:
    """The ``event:`` names of a server-sent event stream, up to and including ``until``."""
    names = []
    while True:
        line = stream.readline().decode()
        assert line, f"the event stream ended before {until!r} (saw {names})"
        if line.startswith("event: "):
            names.append(line.removeprefix("event: ").strip())
            if names[-1] == until:
                return names


def test_a_job_completing_shows_live_from_the_event_stream(
    cluster: dict[str, Any], context: Any
) -> None:
    gate = cluster["tmp"] / "gate-live"
    job = cluster["scheduler"].enqueue("gate", {"path": str(gate)}, tenant_id="acme")
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs/{job.id}")
    expect()(page.locator("#state .badge")).to_have_text("RUNNING")
    # The page follows the job's events (server-sent events), not only a poll.
    expect()(page.locator("#live-status")).to_contain_text("live (events)")

    # The stream itself, read as the browser does with the session's cookie.
    cookie = next(c for c in context.cookies() if c["name"] == "wfjobs_dashboard")
    host, port = cluster["url"].removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=20)
    connection.request(
        "GET", f"/events/jobs/{job.id}", headers={"Cookie": f"wfjobs_dashboard={cookie['value']}"}
    )
    stream = connection.getresponse()
    try:
        assert stream.status == 200
        assert stream.getheader("Content-Type", "").startswith("text/event-stream")
        assert read_events(stream, "ready") == ["ready"]
        gate.touch()
        # The completion arrives as a change, and the open page shows it without a reload.
        assert read_events(stream, "change") == ["change"]
    finally:
        connection.close()
    expect()(page.locator("#state .badge")).to_have_text("COMPLETED", timeout=5_000)
    expect()(page.locator("#result")).to_contain_text('"opened": true')


def test_a_job_waiting_to_retry_shows_the_failure_it_waits_after(
    cluster: dict[str, Any], context: Any
) -> None:
    job = cluster["scheduler"].enqueue(
        "flaky",
        {"succeed_on": 2},
        tenant_id="acme",
        retry_policy=RetryPolicy(max_attempts=3, initial_backoff=timedelta(hours=1)),
    )
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs/{job.id}")
    explain = page.locator("#explain")
    expect()(explain).to_contain_text("not due until", timeout=20_000)
    failure = explain.locator("#last-failure")
    expect()(failure).to_contain_text("Attempt 1 failed: RuntimeError: attempt 1 fails on purpose")
    expect()(failure.locator("pre.tb")).to_contain_text("Traceback (most recent call last)")
    cluster["admin"].cancel_job(job.id)


def test_retry_a_faulted_job(cluster: dict[str, Any], context: Any) -> None:
    scheduler = cluster["scheduler"]
    job = scheduler.enqueue("flaky", {"succeed_on": 2}, tenant_id="acme", max_attempts=1)
    assert scheduler.wait_for_job(job.id, timeout=30).status.value == "FAULTED"
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs/{job.id}")
    expect()(page.locator("#state .badge")).to_have_text("FAULTED")
    expect()(page.locator("#attempts")).to_contain_text("attempt 1 fails on purpose")
    page.click("#attempts details summary")
    expect()(page.locator("#attempts pre.tb")).to_contain_text("RuntimeError")
    screenshot(page, "dashboard-job-faulted")
    page.check("#actions input[name=keep_attempts]")
    page.click('#actions button[data-op="retry"]')
    assert f"Retry job {job.id}" in confirm(page)
    expect()(page.locator("#state .badge")).to_have_text("COMPLETED", timeout=20_000)
    assert scheduler.get_job(job.id).status.value == "COMPLETED"


def test_a_running_job_shows_its_lease_holder_and_can_be_unlocked(
    cluster: dict[str, Any], context: Any
) -> None:
    gate = cluster["tmp"] / "gate-open"
    job = cluster["scheduler"].enqueue("gate", {"path": str(gate)}, tenant_id="acme")
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs/{job.id}")
    state = page.locator("#state")
    expect()(state.locator(".badge")).to_have_text("RUNNING")
    expect()(state).to_contain_text("dash-worker until")
    running = page.locator("#attempts tbody tr")
    expect()(running).to_have_count(1)
    expect()(running).to_contain_text("running")
    page.click('#actions button[data-op="unlock"]')
    assert f"Unlock job {job.id}" in confirm(page)
    # The worker takes it again: the first attempt reads as unlocked.
    expect()(page.locator("#attempts")).to_contain_text("unlocked")
    expect()(state).to_contain_text("2 of 3")
    expect()(state.locator(".badge")).to_have_text("RUNNING")
    expect()(page.locator("#attempts tbody tr")).to_have_count(2)
    gate.touch()
    expect()(state.locator(".badge")).to_have_text("COMPLETED", timeout=20_000)
    expect()(state).to_contain_text("last worker")


def test_bulk_cancel_dry_run_counts_and_cancels_nothing(
    cluster: dict[str, Any], context: Any
) -> None:
    scheduler, admin = cluster["scheduler"], cluster["admin"]
    ids = [
        scheduler.enqueue("noop", {"n": n}, tenant_id="bulk", delay=timedelta(hours=1)).id
        for n in range(4)
    ]
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs")
    page.check('#filters input[name=status][value="PENDING"]')
    page.fill("#filters input[name=tenant_id]", "bulk")
    page.fill("#filters input[name=page_size]", "3")
    page.click("#filters button[type=submit]")
    expect()(page.locator("tbody tr")).to_have_count(3)
    # Newest first: the first page has the last three enqueued, the next the first.
    assert page.locator("tbody td a.mono").all_inner_texts() == ids[:0:-1]
    expect()(page.locator(".pager .total")).to_have_text("4 job(s) match")
    page.click("#next-page")
    expect()(page.locator("tbody tr")).to_have_count(1)
    shown = page.locator("tbody td a.mono").all_inner_texts()
    assert shown == ids[:1]
    page.click("#prev-page")
    expect()(page.locator("tbody td a.mono")).to_have_text(ids[:0:-1])
    page.click("#last-page")
    expect()(page.locator("tbody td a.mono")).to_have_text(ids[2::-1])
    page.click("#sort-created")
    expect()(page.locator("tbody td a.mono")).to_have_text(ids[:3])
    # Child jobs: the parent's page links to them, the filter lists them only.
    child = scheduler.enqueue(
        "noop", {}, tenant_id="children", delay=timedelta(hours=1), parent_job_id=ids[0]
    )
    page.goto(f"{cluster['url']}/jobs/{child.id}")
    page.click(f'#identity a[href="/jobs/{ids[0]}"]')
    page.click("#children")
    expect()(page.locator("tbody td a.mono")).to_have_text([child.id])
    admin.cancel_job(child.id)
    page.goto(f"{cluster['url']}/jobs?tenant_id=bulk&status=PENDING")
    expect()(page.locator("tbody tr")).to_have_count(4)
    screenshot(page, "dashboard-jobs")
    page.fill(".bulk input[name=reason]", "wrong batch")
    page.click('.bulk button[data-op="bulk_cancel"]')
    summary = page.locator("#confirm-summary")
    expect()(summary).to_contain_text("Bulk cancel 4 matching job(s)")
    expect()(summary).to_contain_text("tenant bulk")
    screenshot(page, "dashboard-bulk-confirm")
    # The dry run changed nothing.
    assert {admin.get_job(i).status.value for i in ids} == {"PENDING"}
    page.click("#confirm")
    expect()(page.locator(".flash.ok")).to_contain_text("4 of 4 matching job(s) changed")
    assert {admin.get_job(i).status.value for i in ids} == {"CANCELLED"}


def test_tenant_scoped_login_sees_only_its_tenant(cluster: dict[str, Any], context: Any) -> None:
    scheduler = cluster["scheduler"]
    mine = scheduler.enqueue("noop", {}, tenant_id="acme", delay=timedelta(hours=1))
    theirs = scheduler.enqueue("noop", {}, tenant_id="globex", delay=timedelta(hours=1))

    page = context.new_page()
    page.goto(cluster["url"] + "/login")
    # No session before a login: the form's CSRF token rides in a cookie of its own.
    before = {c["name"] for c in context.cookies()}
    assert before == {"wfjobs_login"}
    page.fill("input[name=token]", "not-a-token")
    page.click("#login button[type=submit]")
    expect()(page.locator(".flash.error")).to_contain_text("does not know this token")
    # The scoped token logs in without typing its tenant: the coordinator says which it is.
    page.fill("input[name=token]", ACME_ADMIN)
    assert page.locator("#login input[name=tenant_id]").count() == 0
    page.click("#login button[type=submit]")
    page.wait_for_url(cluster["url"] + "/")
    expect()(page.locator("header .who")).to_have_text("acme-admin · tenant acme")
    # The session is made by the login: none planted before it can be taken over.
    assert "wfjobs_dashboard" in {c["name"] for c in context.cookies()}
    assert page.locator("header nav a", has_text="Workers").count() == 0

    page.goto(cluster["url"] + "/jobs")
    ids = page.locator("tbody td a.mono").all_inner_texts()
    assert mine.id in ids
    assert theirs.id not in ids
    tenants = set(page.locator("tbody tr td:nth-child(3)").all_inner_texts())
    assert tenants == {"acme"}
    # Another tenant's job reads as missing; asking for its tenant is refused.
    response = page.goto(f"{cluster['url']}/jobs/{theirs.id}")
    assert response is not None and response.status == 404
    assert theirs.id not in page.content() or "not found" in page.inner_text("#error").lower()
    response = page.goto(f"{cluster['url']}/jobs?tenant_id=globex")
    assert response is not None and response.status == 403
    assert page.goto(cluster["url"] + "/workers").status == 403


def test_a_revoked_token_sends_its_session_back_to_the_login(
    cluster: dict[str, Any], context: Any
) -> None:
    page = log_in(context, cluster["url"], ACME_ADMIN)
    tokens: Path = cluster["tokens"]
    kept = tokens.read_text()
    try:
        tokens.write_text(
            "".join(line + "\n" for line in kept.splitlines() if '"acme-admin"' not in line)
        )
        # The open overview's next refresh is refused: the page goes to the login.
        page.wait_for_url(cluster["url"] + "/login", timeout=20_000)
        assert page.goto(cluster["url"] + "/jobs").url == cluster["url"] + "/login"
    finally:
        tokens.write_text(kept)


def test_an_action_without_the_csrf_token_is_refused(cluster: dict[str, Any], context: Any) -> None:
    scheduler, admin = cluster["scheduler"], cluster["admin"]
    job = scheduler.enqueue("noop", {}, tenant_id="acme", delay=timedelta(hours=1))
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs/{job.id}")
    form = {"op": "cancel", "job_id": job.id, "confirmed": "1"}
    # The session cookie goes along (same browser context), the CSRF token does not.
    refused = page.request.post(cluster["url"] + "/action", form=form)
    assert refused.status == 403
    assert "CSRF" in refused.text()
    wrong = page.request.post(cluster["url"] + "/action", form={**form, "csrf": "guessed"})
    assert wrong.status == 403
    assert admin.get_job(job.id).status.value == "PENDING"
    # The page's own form carries the token and goes through.
    csrf = page.locator('#actions input[name="csrf"]').first.get_attribute("value")
    accepted = page.request.post(
        cluster["url"] + "/action", form={**form, "csrf": csrf}, max_redirects=0
    )
    assert accepted.status == 303
    assert admin.get_job(job.id).status.value == "CANCELLED"
    cookie = next(c for c in page.context.cookies() if c["name"] == "wfjobs_dashboard")
    assert cookie["sameSite"] == "Strict" and cookie["httpOnly"]


def test_disable_a_tenant_set_its_weight_and_a_limit_from_the_ui(
    cluster: dict[str, Any], context: Any
) -> None:
    job = cluster["scheduler"].enqueue("noop", {}, tenant_id="initech", delay=timedelta(hours=1))
    page = log_in(context, cluster["url"], OPS)
    page.goto(cluster["url"] + "/tenants")
    row = page.locator("tr", has_text="initech")
    row.locator("input[name=reason]").fill("unpaid invoice")
    row.locator("button", has_text="Disable").click()
    assert "Disable tenant initech" in confirm(page)
    expect()(page.locator("tr", has_text="initech")).to_contain_text("disabled")
    page.goto(f"{cluster['url']}/jobs/{job.id}")
    expect()(page.locator("#explain")).to_contain_text("tenant initech is disabled")
    expect()(page.locator("#explain")).to_contain_text("unpaid invoice")

    page.goto(cluster["url"] + "/tenants")
    row = page.locator("tr", has_text="initech")
    expect()(row.locator(".weight")).to_have_text("1")
    expect()(row).to_contain_text("(default)")
    row.locator("input[name=weight]").fill("3")
    row.locator("button", has_text="Set weight").click()
    assert "weight to 3" in confirm(page)
    expect()(page.locator(".flash.ok")).to_contain_text("tenant initech now has weight 3")
    # The page reads the weight back from the coordinator.
    row = page.locator("tr", has_text="initech")
    expect()(row.locator(".weight")).to_have_text("3")
    expect()(row).not_to_contain_text("(default)")
    page.locator("tr", has_text="initech").locator("button", has_text="Enable").click()
    confirm(page)
    expect()(page.locator("tr", has_text="initech")).to_contain_text("enabled")

    page.goto(cluster["url"] + "/limits")
    page.select_option("#limit-form select[name=kind]", "job_type")
    page.fill("#limit-form input[name=value]", "noop")
    page.fill("#limit-form input[name=max_running]", "7")
    page.click("#limit-form button[type=submit]")
    assert "at most 7 job(s) of job type noop" in confirm(page)
    expect()(page.locator("tr", has_text="noop")).to_contain_text("/ 7")
    limits = cluster["admin"].list_concurrency_limits()
    assert [(lim.value, lim.max_running) for lim in limits] == [("noop", 7)]
    page.locator("tr", has_text="noop").locator("button", has_text="Remove").click()
    confirm(page)
    assert cluster["admin"].list_concurrency_limits() == []
    page.select_option("#limit-form select[name=kind]", "category")
    page.fill("#limit-form input[name=value]", "integration")
    page.fill("#limit-form input[name=max_running]", "2")
    page.click("#limit-form button[type=submit]")
    confirm(page)
    expect()(page.locator("tr", has_text="integration")).to_contain_text("/ 2")
    page.locator("tr", has_text="integration").locator("button", has_text="Remove").click()
    confirm(page)
    assert cluster["admin"].list_concurrency_limits() == []

    # A rate limit: set from the form, listed with its rate, removed.
    page.select_option("#rate-limit-form select[name=kind]", "tenant")
    page.fill("#rate-limit-form input[name=value]", "initech")
    page.fill("#rate-limit-form input[name=starts]", "5")
    page.fill("#rate-limit-form input[name=period]", "2")
    page.fill("#rate-limit-form input[name=burst]", "3")
    page.click("#rate-limit-form button[type=submit]")
    assert "at most 5 job(s) of tenant initech start per 2s (bursts of 3)" in confirm(page)
    row = page.locator("tr", has_text="5 per 2s")
    expect()(row).to_contain_text("initech")
    expect()(row).to_contain_text("admitting")
    rates = cluster["admin"].list_rate_limits()
    assert [(r.value, r.starts, r.period, r.burst) for r in rates] == [
        ("initech", 5, timedelta(seconds=2), 3)
    ]
    row.locator("button", has_text="Remove").click()
    assert "Remove the rate limit of tenant initech" in confirm(page)
    assert cluster["admin"].list_rate_limits() == []

    # A category pause from the pause form names the category in ExplainJob.
    page.goto(cluster["url"] + "/pauses")
    page.select_option("#pause-form select[name=kind]", "category")
    page.fill("#pause-form input[name=value]", "maintenance")
    page.fill("#pause-form input[name=tenant_id]", "initech")
    page.click("#pause-form button[type=submit]")
    confirm(page)
    expect()(page.locator("table").first).to_contain_text("category maintenance (tenant initech)")
    held = cluster["scheduler"].enqueue("noop", {}, tenant_id="initech", category="maintenance")
    page.goto(f"{cluster['url']}/jobs/{held.id}")
    expect()(page.locator("#explain")).to_contain_text("maintenance")
    page.goto(cluster["url"] + "/pauses")
    page.locator("tr", has_text="category maintenance").locator(
        "button", has_text="Unpause"
    ).click()
    confirm(page)
    assert cluster["scheduler"].wait_for_job(held.id, timeout=30).status.value == "COMPLETED"


def test_workers_page_lists_the_worker_and_drains_it(cluster: dict[str, Any], context: Any) -> None:
    page = log_in(context, cluster["url"], OPS)
    page.goto(cluster["url"] + "/workers")
    row = page.locator("tr", has_text="dash-worker")
    expect()(row).to_contain_text("flaky")
    screenshot(page, "dashboard-workers")
    row.locator("button", has_text="Drain").click()
    assert "Drain worker dash-worker" in confirm(page)
    expect()(page.locator("tr", has_text="dash-worker")).to_contain_text("draining")
    page.locator("tr", has_text="dash-worker").locator("button", has_text="Undrain").click()
    confirm(page)
    # The page refreshes itself: the worker reconnects and asks for work again.
    expect()(page.locator("tr", has_text="dash-worker").locator("button")).to_have_text(
        "Drain", timeout=20_000
    )
    # The last test: the overview now has the module's jobs in its backlog and charts.
    page.goto(cluster["url"] + "/")
    expect()(page.locator("#live table tr", has_text="bulk")).to_contain_text("4")
    screenshot(page, "dashboard-overview")


def test_search_finds_a_job_by_id_correlation_id_and_payload_text(
    cluster: dict[str, Any], context: Any
) -> None:
    scheduler = cluster["scheduler"]
    wanted = scheduler.enqueue(
        "noop",
        {"order": "needle-4711"},
        tenant_id="search",
        delay=timedelta(hours=1),
        workflow=WorkflowRef(correlation_id="corr-search-1"),
    )
    other = scheduler.enqueue(
        "noop", {"order": "hay"}, tenant_id="search", delay=timedelta(hours=1)
    )
    page = log_in(context, cluster["url"], OPS)
    page.goto(cluster["url"] + "/jobs")
    # A job id goes straight to the job.
    page.fill("#filters input[name=q]", wanted.id)
    page.select_option("#filters select[name=q_in]", "id")
    page.click("#filters button[type=submit]")
    page.wait_for_url(f"{cluster['url']}/jobs/{wanted.id}")
    page.goto(cluster["url"] + "/jobs?q=no-such-job&q_in=id")
    expect()(page.locator("#search-note")).to_contain_text("no job has the id 'no-such-job'")
    for text, where in (("corr-search-1", "correlation"), ("needle-4711", "payload")):
        page.goto(cluster["url"] + "/jobs?tenant_id=search")
        page.fill("#filters input[name=q]", text)
        page.select_option("#filters select[name=q_in]", where)
        page.click("#filters button[type=submit]")
        expect()(page.locator("tbody td a.mono")).to_have_text([wanted.id])
    expect()(page.locator("#search-note")).to_contain_text("have 'needle-4711' in their payload")
    # JSON is found as the job page shows it ("order": 191) and as it was sent ("order":191).
    numbered = scheduler.enqueue(
        "noop", {"order": 191}, tenant_id="search", delay=timedelta(hours=1)
    )
    for text in ('"order": 191', '"order":191'):
        page.goto(
            cluster["url"]
            + "/jobs?"
            + urlencode({"tenant_id": "search", "q": text, "q_in": "payload"})
        )
        expect()(page.locator("tbody td a.mono")).to_have_text([numbered.id])
    page.goto(f"{cluster['url']}/jobs/{numbered.id}")
    expect()(page.locator("#payload pre")).to_contain_text('"order": 191')
    # The list says which pending jobs are scheduled (not due yet).
    expect()(page.locator("tbody tr").first).to_contain_text("scheduled, due in")
    for job in (wanted, other, numbered):
        cluster["admin"].cancel_job(job.id)


def _bulk_dry_run(page: Any, url: str, op: str) -> tuple[int, str]:
    """Open ``url``, then its bulk ``op``'s confirmation: (the count the list
    shows, what the confirmation says)."""
    page.goto(url)
    listed = int(page.inner_text(".pager .total").split()[0])
    page.click(f'.bulk button[data-op="{op}"]')
    return listed, page.inner_text("#confirm-summary")


def test_bulk_actions_act_on_exactly_the_jobs_a_search_and_a_tenant_filter_list(
    cluster: dict[str, Any], context: Any
) -> None:
    scheduler, admin, url = cluster["scheduler"], cluster["admin"], cluster["url"]
    later = timedelta(hours=1)
    a_hit = scheduler.enqueue("noop", {"user": "user42"}, tenant_id="sift-a", delay=later)
    a_miss = [
        scheduler.enqueue("noop", {"user": f"user{n}"}, tenant_id="sift-a", delay=later)
        for n in (7, 8)
    ]
    b_hit = scheduler.enqueue("noop", {"user": "user42"}, tenant_id="sift-b", delay=later)
    page = log_in(context, url, OPS)
    search = "/jobs?q=user42&q_in=payload"
    # A search alone, a tenant filter alone, both, and both matching nothing:
    # the confirmation counts what the list shows.
    for query, count in (
        (search, 2),
        ("/jobs?tenant_id=sift-a", 3),
        (search + "&tenant_id=sift-a", 1),
        ("/jobs?q=nobody&q_in=payload&tenant_id=sift-a", 0),
        ("/jobs?q=no-such-job&q_in=id&tenant_id=sift-a", 0),
    ):
        listed, summary = _bulk_dry_run(page, url + query, "bulk_cancel")
        assert listed == count, query
        assert f"Bulk cancel {count} matching job(s) of the {count} the list holds" in summary
    # Confirmed, the search and the tenant cancel the one job they list.
    listed, summary = _bulk_dry_run(page, url + search + "&tenant_id=sift-a", "bulk_cancel")
    assert "payload text search 'user42'" in summary and "tenant sift-a" in summary
    page.click("#confirm")
    expect()(page.locator(".flash.ok")).to_contain_text("1 of 1 matching job(s) changed")
    assert admin.get_job(a_hit.id).status.value == "CANCELLED"
    assert {admin.get_job(j.id).status.value for j in (*a_miss, b_hit)} == {"PENDING"}
    # The search alone now lists a cancelled and a pending job: a retry applies to one.
    listed, summary = _bulk_dry_run(page, url + search, "bulk_retry")
    assert listed == 2
    assert "Bulk retry 1 matching job(s) of the 2 the list holds" in summary
    assert "the other 1 cannot be retried" in summary
    page.click("#confirm")
    expect()(page.locator(".flash.ok")).to_contain_text("1 of 1 matching job(s) changed")
    # Retried (due now, so the worker may have run it already); the other untouched.
    assert admin.get_job(a_hit.id).status.value != "CANCELLED"
    assert admin.get_job(b_hit.id).status.value == "PENDING"
    for job in (*a_miss, b_hit):
        admin.cancel_job(job.id)


def test_the_backlog_sorts_splits_due_from_scheduled_and_a_pause_links_to_its_jobs(
    cluster: dict[str, Any], context: Any
) -> None:
    scheduler, admin = cluster["scheduler"], cluster["admin"]
    later = [
        scheduler.enqueue("noop", {}, tenant_id="sorted-a", delay=timedelta(hours=1))
        for _ in range(3)
    ]
    pause = admin.pause("job_type", "held-type", tenant_id="sorted-b", reason="held for sort")
    held = [scheduler.enqueue("held-type", {}, tenant_id="sorted-b") for _ in range(5)]
    try:
        page = log_in(context, cluster["url"], OPS)
        # The time the page last refreshed, written as every time on the dashboard.
        expect()(page.locator("#live-status")).to_have_text(
            re.compile(r"live( \(events\))? · \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
        )
        row_a = page.locator("#live table tr", has_text="sorted-a")
        expect()(row_a.locator("td").nth(3)).to_have_text("3")  # pending: scheduled
        expect()(row_a.locator("td").nth(2)).to_have_text("")  # pending: due
        row_b = page.locator("#live table tr", has_text="sorted-b")
        expect()(row_b.locator("td").nth(2)).to_have_text("5")
        expect()(
            page.locator('[data-card="of them scheduled (not due yet)"] .value')
        ).not_to_have_text("0")
        # Sorting by the due column puts the biggest first; again, the smallest.
        page.click('th a[data-sort="due"]')
        page.wait_for_url("**/?sort=-due")
        dues = [
            int(t or 0) for t in page.locator("#live tbody tr td:nth-child(3)").all_inner_texts()
        ]
        assert dues == sorted(dues, reverse=True) and dues[0] >= 5
        page.click('th a[data-sort="due"]')
        page.wait_for_url("**/?sort=due")
        dues = [
            int(t or 0) for t in page.locator("#live tbody tr td:nth-child(3)").all_inner_texts()
        ]
        assert dues == sorted(dues)
        # The pause's badge lists the jobs it holds.
        page.locator("a.badge", has_text="job type held-type").click()
        expect()(page.locator("tbody td a.mono")).to_have_count(5)
        assert set(page.locator("tbody td a.mono").all_inner_texts()) == {j.id for j in held}
        # A held job offers to lift the pause that holds it.
        page.goto(f"{cluster['url']}/jobs/{held[0].id}")
        unpause = page.locator('#actions button[data-op="unpause"]')
        expect()(unpause).to_have_text("Unpause job type held-type (tenant sorted-b)")
        unpause.click()
        assert "Unpause job type held-type in tenant sorted-b" in confirm(page)
        expect()(page.locator(".flash.ok")).to_contain_text("lifted 1 pause")
        assert all(p.id != pause.id for p in admin.list_pauses())
    finally:
        if any(p.id == pause.id for p in admin.list_pauses()):
            admin.unpause("job_type", "held-type", tenant_id="sorted-b")
        for job in later + held:
            admin.cancel_job(job.id)


def test_a_job_paused_by_its_definition_offers_unpause_not_another_pause(
    cluster: dict[str, Any], context: Any
) -> None:
    admin = cluster["admin"]
    admin.pause("definition", "unversioned-flow", tenant_id="acme")
    job = cluster["scheduler"].enqueue(
        "noop", {}, tenant_id="acme", workflow=WorkflowRef(definition_id="unversioned-flow")
    )
    try:
        page = log_in(context, cluster["url"], OPS)
        page.goto(f"{cluster['url']}/jobs/{job.id}")
        actions = page.locator("#actions")
        expect()(actions.locator('button[data-op="unpause"]')).to_have_text(
            "Unpause definition unversioned-flow (tenant acme)"
        )
        expect()(actions.locator('button[data-op="pause"]')).to_have_count(0)
        # No version was given: none is shown (no "v0").
        expect()(page.locator("#workflow")).to_contain_text("unversioned-flow")
        expect()(page.locator("#workflow")).not_to_contain_text(" v0")
        # Unpaused, the page offers to pause the definition again, naming the
        # one tenant it pauses it in (the pauses page and the CLI default to all).
        admin.unpause("definition", "unversioned-flow", tenant_id="acme")
        page.reload()
        pause = actions.locator('button[data-op="pause"]')
        expect()(pause).to_have_text("Pause definition unversioned-flow (tenant acme)")
        pause.click()
        assert "Pause definition unversioned-flow in tenant acme" in confirm(page)
        paused = [p.scope for p in admin.list_pauses() if p.scope.value == "unversioned-flow"]
        assert [s.tenant_id for s in paused] == ["acme"]
    finally:
        if any(p.scope.value == "unversioned-flow" for p in admin.list_pauses()):
            admin.unpause("definition", "unversioned-flow", tenant_id="acme")
        if admin.get_job(job.id).status.value in ("PENDING", "RUNNING"):
            admin.cancel_job(job.id)


def test_a_typed_cancel_reason_stays_in_the_job_s_view_after_its_handler_returns(
    cluster: dict[str, Any], context: Any
) -> None:
    gate = cluster["tmp"] / "gate-cancel-reason"
    job = cluster["scheduler"].enqueue("gate", {"path": str(gate)}, tenant_id="acme")
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs/{job.id}")
    expect()(page.locator("#state .badge")).to_have_text("RUNNING")
    page.fill("#actions input[name=reason]", "wrong customer")
    page.click('#actions button[data-op="cancel"]')
    assert f"Cancel job {job.id}" in confirm(page)
    expect()(page.locator("#state")).to_contain_text("cancel requested")
    gate.touch()  # the handler returns normally: the attempt ends CANCELLED
    expect()(page.locator("#state .badge")).to_have_text("CANCELLED", timeout=20_000)
    expect()(page.locator("#cancel-reason")).to_have_text("wrong customer")
    assert cluster["admin"].get_job(job.id).cancel_reason == "wrong customer"


def test_a_member_links_to_its_group_page_which_cancels_the_group(
    cluster: dict[str, Any], context: Any
) -> None:
    scheduler, admin = cluster["scheduler"], cluster["admin"]
    # No worker takes "grouped": the members wait until the group is cancelled.
    group, members = scheduler.create_group(
        JobRequest("noop", tenant_id="acme"),
        [JobRequest("grouped", {"n": i}, tenant_id="acme") for i in range(3)],
        tenant_id="acme",
    )
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs/{members[0].job_id}")
    page.click("#group-link")
    page.wait_for_url(f"{cluster['url']}/groups/{group.id}")
    expect()(page.locator("#group-status")).to_have_text("open")
    expect()(page.locator("#group-progress")).to_contain_text("0 of 3 members ended")
    for member in members:
        expect()(page.locator("table", has_text="last error")).to_contain_text(member.job_id)
    screenshot(page, "dashboard-group")
    # Cancel group is an action like the others: without the page's CSRF token it is refused.
    refused = page.request.post(
        cluster["url"] + "/action",
        form={"op": "cancel_group", "group_id": group.id, "confirmed": "1"},
    )
    assert refused.status == 403 and admin.get_group(group.id).status == "OPEN"
    page.click('button[data-op="cancel_group"]')
    assert f"Cancel group {group.id}" in confirm(page)
    expect()(page.locator(".flash")).to_contain_text("3 pending member(s) cancelled")
    # Every member ended: the group completed and names its completion job.
    expect()(page.locator("#group-status")).to_have_text("completed")
    expect()(page.locator("#group-progress")).to_contain_text("3 of 3 members ended")
    done = admin.get_group(group.id)
    assert (done.status, done.cancelled) == ("COMPLETED", 3)
    expect()(page.locator("#group-fields")).to_contain_text(done.completion_job_id)
    assert page.locator('button[data-op="cancel_group"]').count() == 0
    page.click("#all-members")
    for member in members:
        expect()(page.locator("body")).to_contain_text(member.job_id)


def test_a_tick_job_shows_its_schedule_and_nominal_time(
    cluster: dict[str, Any], context: Any
) -> None:
    nominal = datetime.now(UTC).replace(microsecond=0)
    job = cluster["scheduler"].enqueue_tick("nightly-report", nominal, "noop", tenant_id="acme")
    assert job is not None
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs/{job.id}")
    expect()(page.locator("#schedule-tick")).to_have_text(
        f"schedule nightly-report, nominal time {nominal:%Y-%m-%d %H:%M:%S} UTC"
    )


def test_a_debounced_job_says_its_due_time_was_moved_and_by_which_key(
    cluster: dict[str, Any], context: Any
) -> None:
    rule = Uniqueness.debounce("report-acme", delay=timedelta(hours=1))
    first = cluster["scheduler"].enqueue("noop", {"v": 1}, tenant_id="acme", uniqueness=rule)
    again = cluster["scheduler"].enqueue("noop", {"v": 2}, tenant_id="acme", uniqueness=rule)
    assert again.id == first.id and again.debounced
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs/{first.id}")
    reason = page.locator("li", has_text="debounced")
    expect()(reason).to_contain_text("1 later enqueue(s) of uniqueness key 'report-acme'")
    expect()(page.locator("#unique-key")).to_have_text(
        "report-acme (debounced, 1 later enqueue(s) moved its due time)"
    )


def test_a_unique_job_shows_its_key_and_rule_and_a_plain_job_none(
    cluster: dict[str, Any], context: Any
) -> None:
    scheduler = cluster["scheduler"]
    held = scheduler.enqueue(
        "noop", {}, tenant_id="acme", uniqueness=Uniqueness.unique_while("sync-acme")
    )
    daily = scheduler.enqueue(
        "noop", {}, tenant_id="acme", uniqueness=Uniqueness.for_period("daily-acme", 86400)
    )
    plain = scheduler.enqueue("noop", {}, tenant_id="acme")
    page = log_in(context, cluster["url"], OPS)
    page.goto(f"{cluster['url']}/jobs/{held.id}")
    expect()(page.locator("#unique-key")).to_have_text("sync-acme (one job of the key at a time)")
    page.goto(f"{cluster['url']}/jobs/{daily.id}")
    expect()(page.locator("#unique-key")).to_contain_text(
        "daily-acme (one job of the key per period, admits a new job from "
    )
    page.goto(f"{cluster['url']}/jobs/{plain.id}")
    expect()(page.locator("#identity")).to_be_visible()
    expect()(page.locator("#unique-key")).to_have_count(0)


def test_the_overview_counts_ready_held_and_scheduled_apart_as_get_stats_does(
    cluster: dict[str, Any], context: Any
) -> None:
    scheduler, admin = cluster["scheduler"], cluster["admin"]
    admin.pause("job_type", "frozen-card", tenant_id="acme", reason="cards")
    jobs = [
        scheduler.enqueue("nobody-serves-this", {}, tenant_id="acme"),
        scheduler.enqueue("nobody-serves-this", {}, tenant_id="acme"),
        scheduler.enqueue("frozen-card", {}, tenant_id="acme"),
        scheduler.enqueue("noop", {}, tenant_id="acme", delay=timedelta(hours=1)),
    ]
    try:
        page = log_in(context, cluster["url"], ACME_ADMIN)

        def card(name: str) -> int:
            return int(page.locator(f'[data-card="{name}"] .value').inner_text())

        backlog = admin.get_stats(tenant_id="acme").backlog
        assert backlog.no_worker >= 2 and backlog.paused >= 1 and backlog.scheduled >= 1
        # Jobs no worker can take, or a pause holds, are held, not ready.
        assert card("held: no worker") == backlog.no_worker
        assert card("held: paused") == backlog.paused
        assert card("of them held") == backlog.held
        assert card("of them ready (runnable now)") == backlog.ready
        assert card("of them scheduled (not due yet)") == backlog.scheduled
        assert page.locator('[data-card="of them due (ready to run)"]').count() == 0
    finally:
        for job in jobs:
            admin.cancel_job(job.id)
        admin.unpause("job_type", "frozen-card", tenant_id="acme")
