"""Shared set-up of the dashboard tests: a coordinator with its dashboard, tokens, chromium.

Chromium is Debian's (``/usr/bin/chromium``, ``apt-get install chromium``),
driven by Playwright from PyPI; Playwright's own browser download is never
used. Under ``CI=true`` a missing chromium fails the tests; elsewhere they skip.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wfj_testing import REPO, ManagedProcess, coordinator_args, subprocess_env

CHROMIUM = os.environ.get("WFJOBS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DASHBOARD_RE = re.compile(r"dashboard listening on http://127\.0\.0\.1:(\d+)")
COORDINATOR_RE = re.compile(r"coordinator \S+ listening on [^:]+:(\d+)")
# Screenshots go here when WFJOBS_SCREENSHOTS names a directory (make dashboard-screenshots).
SCREENSHOTS = os.environ.get("WFJOBS_SCREENSHOTS", "")

TOKENS = {
    "ops": ("ops-token-0123456789", ["admin", "scheduler"], ["*"]),
    "workers": ("worker-token-0123456789", ["worker"], ["*"]),
    "acme-admin": ("acme-admin-token-0123456789", ["admin", "scheduler"], ["acme"]),
}


def need_chromium() -> None:
    """Skip (fail under CI=true) when chromium or Playwright is missing."""
    missing = []
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        missing.append(f"chromium at {CHROMIUM} (apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (pip install -e '.[dev]')")
    if missing:
        reason = "dashboard browser tests need " + " and ".join(missing)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def write_tokens(path: Path) -> Path:
    lines = [
        json.dumps(
            {
                "name": name,
                "sha256": hashlib.sha256(token.encode()).hexdigest(),
                "roles": roles,
                "tenants": tenants,
            }
        )
        for name, (token, roles, tenants) in TOKENS.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


class CoordinatorWithDashboard(ManagedProcess):
    """``python -m coordinator serve`` with its dashboard on a free loopback port."""

    def __init__(self, database_url: str, log_path: Path, *extra: str) -> None:
        args = coordinator_args(
            database_url,
            "127.0.0.1:0",
            "--drain-timeout",
            "2",
            "--dashboard-listen",
            "127.0.0.1:0",
            *extra,
        )
        self._spawn(args, log_path)
        port, web = self.wait_started(self._ports, f"coordinator and dashboard (log: {log_path})")
        self.target = f"127.0.0.1:{port}"
        self.url = f"http://127.0.0.1:{web}"

    def _ports(self) -> tuple[int, int] | None:
        if not self.alive():
            raise AssertionError(f"coordinator exited: {self.log()[-3000:]}")
        text = self.log()
        grpc_port, web_port = COORDINATOR_RE.search(text), DASHBOARD_RE.search(text)
        if grpc_port and web_port:
            return int(grpc_port.group(1)), int(web_port.group(1))
        return None


class Worker(ManagedProcess):
    """``tests/e2e/worker_app.py`` calling with the workers' token."""

    def __init__(self, target: str, record: Path, log_path: Path) -> None:
        app = REPO / "tests" / "e2e" / "worker_app.py"
        self._spawn(
            [
                sys.executable,
                str(app),
                "--target",
                target,
                "--record",
                str(record),
                "--worker-id",
                "dash-worker",
            ],
            log_path,
            env={"WFJOBS_TOKEN": TOKENS["workers"][0]},
        )


def screenshot(page: object, name: str) -> None:
    """Save a full-page screenshot under WFJOBS_SCREENSHOTS (when set)."""
    if SCREENSHOTS:
        directory = Path(SCREENSHOTS)
        directory.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(directory / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


# -- plain HTTP to a dashboard (no browser) -------------------------------------------

LISTENING = re.compile(r"dashboard listening on http://([^\s:]+):(\d+)")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def fetch(
    url: str, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, str, dict[str, str]]:
    """One request (redirects not followed): status, body, headers."""
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with OPENER.open(request, timeout=10) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


class Dashboard(ManagedProcess):
    """``wfjobs dashboard ARGS`` in a subprocess."""

    def __init__(self, log_path: Path, *args: str) -> None:
        self._spawn([sys.executable, "-m", "worker_sdk.cli", "dashboard", *args], log_path)

    def url(self) -> str:
        def port() -> int | None:
            if not self.alive():
                raise AssertionError(f"dashboard exited: {self.log()}")
            match = LISTENING.search(self.log())
            return int(match.group(2)) if match else None

        return f"http://127.0.0.1:{self.wait_started(port, 'the dashboard to listen')}"


def run_to_exit(*args: str) -> subprocess.CompletedProcess[str]:
    """``wfjobs dashboard ARGS`` expected to exit (it refuses to start)."""
    return subprocess.run(
        [sys.executable, "-m", "worker_sdk.cli", "dashboard", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(without=("WFJOBS_TOKEN",)),
    )


def loopback_dashboard(target: str, tmp_path: Path, token: str = "ops") -> Dashboard:
    """A dashboard on loopback against ``target`` with the token ``TOKENS[token]``."""
    return Dashboard(
        tmp_path / f"dash-{token}.log", "--target", target, "--token", TOKENS[token][0],
        "--listen", "127.0.0.1:0",
    )  # fmt: skip


@contextlib.contextmanager
def ops_session(
    target: str, tmp_path: Path, token: str = "ops"
) -> Iterator[tuple[str, dict[str, str]]]:
    """A loopback dashboard with ``TOKENS[token]`` (ops by default) against
    ``target``: its URL and the session cookie header its first page set."""
    dashboard = loopback_dashboard(target, tmp_path, token)
    try:
        url = dashboard.url()
        _, _, headers = fetch(url + "/")
        yield url, {"Cookie": headers["Set-Cookie"].split(";")[0]}
    finally:
        dashboard.stop()


def csrf_of(body: str) -> str:
    """The CSRF token of the first form on a page."""
    match = re.search(r'name="csrf" value="([^"]+)"', body)
    assert match is not None, body[:2000]
    return match.group(1)


# -- browser tests: one coordinator with its dashboard, a worker and clients ---------------


@contextlib.contextmanager
def browser_cluster(tmp: Path) -> Iterator[dict[str, Any]]:
    """A coordinator on SQLite serving the dashboard (tokens of ``TOKENS``), a worker
    recording to ``record``, and scheduler and admin clients with the ops token."""
    from worker_sdk import AdminClient, SchedulerClient

    need_chromium()
    tokens = write_tokens(tmp / "tokens.jsonl")
    coordinator = CoordinatorWithDashboard(
        f"sqlite:///{tmp / 'jobs.db'}", tmp / "coordinator.log", "--tokens-file", str(tokens)
    )
    record = tmp / "record.txt"
    worker = Worker(coordinator.target, record, tmp / "worker.log")
    ops = TOKENS["ops"][0]
    scheduler = SchedulerClient(coordinator.target, token=ops)
    admin = AdminClient(coordinator.target, token=ops)
    try:
        yield {
            "url": coordinator.url,
            "scheduler": scheduler,
            "admin": admin,
            "coordinator": coordinator,
            "tmp": tmp,
            "tokens": tokens,
            "record": record,
        }
    finally:
        scheduler.close()
        admin.close()
        worker.stop()
        coordinator.stop()


@contextlib.contextmanager
def chromium_browser() -> Iterator[Any]:
    """Debian's chromium under Playwright, closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@contextlib.contextmanager
def browser_context(browser: Any) -> Iterator[Any]:
    """A fresh browser context (no cookies) at the tests' viewport."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 860})
    ctx.set_default_timeout(15_000)
    try:
        yield ctx
    finally:
        ctx.close()


def log_in(context: Any, url: str, token: str) -> Any:
    """Log in with nothing but the token: name and tenant come from the coordinator."""
    page = context.new_page()
    page.goto(url + "/")
    assert page.url.endswith("/login")
    page.fill("input[name=token]", token)
    page.click("#login button[type=submit]")
    page.wait_for_url(url + "/")
    return page


def confirm(page: Any) -> str:
    """Click Confirm on the confirmation page; returns what it asked."""
    summary: str = page.inner_text("#confirm-summary")
    page.click("#confirm")
    page.wait_for_selector(".flash")
    return summary


def expect() -> Any:
    """Playwright's ``expect``, imported where a browser test needs it."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect
