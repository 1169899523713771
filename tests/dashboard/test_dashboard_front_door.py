"""The dashboard's front door over plain HTTP: host names, garbage, logins, headers.

A DNS-rebinding page reaches the dashboard with its own ``Host`` and
``Origin``; a client sends bodies and fields no form would; a guesser tries
tokens. Each gets a 4xx that says why, nothing reaches the log as a
traceback, and nothing changes in the coordinator.
"""

from __future__ import annotations

import random
import re
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from wfj_dashboard import (
    TOKENS,
    CoordinatorWithDashboard,
    Dashboard,
    csrf_of,
    fetch,
    run_to_exit,
    write_tokens,
)
from wfj_testing import Coordinator, coordinator_args, subprocess_env
from worker_sdk import AdminClient

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def open_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorWithDashboard]:
    """``make run``'s default: a coordinator without authentication, its dashboard
    on loopback without login."""
    tmp = tmp_path_factory.mktemp("front-door")
    coordinator = CoordinatorWithDashboard(f"sqlite:///{tmp / 'jobs.db'}", tmp / "coord.log")
    try:
        yield coordinator
    finally:
        coordinator.stop()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    tmp = tmp_path_factory.mktemp("front-door-secured")
    tokens = write_tokens(tmp / "tokens.jsonl")
    coordinator = Coordinator(
        f"sqlite:///{tmp / 'secured.db'}", tmp / "secured.log", args=("--tokens-file", str(tokens))
    )
    try:
        yield coordinator
    finally:
        coordinator.stop()


def session(url: str) -> tuple[dict[str, str], str]:
    """A no-login session: its cookie header and CSRF token."""
    status, body, headers = fetch(url + "/workers")
    assert status == 200, body
    return {"Cookie": headers["Set-Cookie"].split(";")[0]}, csrf_of(body)


def draining(target: str) -> bool:
    with AdminClient(target) as admin:
        return bool(admin.get_stats().draining)


def form(**fields: str) -> bytes:
    return urllib.parse.urlencode(fields).encode()


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


# -- DNS rebinding -------------------------------------------------------------------


def test_without_login_only_the_loopback_names_with_its_port_are_answered(
    open_cluster: CoordinatorWithDashboard,
) -> None:
    url, port = open_cluster.url, port_of(open_cluster.url)
    # A rebinding page: its own host name, now resolving to 127.0.0.1.
    status, body, headers = fetch(url + "/jobs", headers={"Host": f"evil.example:{port}"})
    assert status == 421
    assert "does not answer to the host name 'evil.example:" in body
    assert "Set-Cookie" not in headers and 'name="csrf"' not in body
    for host in (f"127.0.0.2:{port}", f"127.0.0.1:{port + 1}", "localhost", f"LOCALHOST.:{port}"):
        assert fetch(url + "/", headers={"Host": host})[0] == 421, host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LocalHost:{port}"):
        assert fetch(url + "/", headers={"Host": host})[0] == 200, host

    # Even with a real session's cookie and CSRF token, the rebound host drains nothing.
    cookie, csrf = session(url)
    drain = form(op="drain", cluster="1", confirmed="1", csrf=csrf)
    status, _, _ = fetch(
        url + "/action",
        data=drain,
        headers={**cookie, "Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
    )
    assert status == 421
    # Origin is checked against the names the dashboard answers, not against Host.
    status, body, _ = fetch(
        url + "/action", data=drain, headers={**cookie, "Origin": f"http://evil.example:{port}"}
    )
    assert status == 403 and "cross-site" in body
    assert not draining(open_cluster.target)
    # Its own origin (or "null", which a form sends under Referrer-Policy: no-referrer) passes.
    for origin in (url, f"http://localhost:{port}", "null"):
        status, body, _ = fetch(
            url + "/action",
            data=form(op="drain", csrf=csrf),
            headers={**cookie, "Origin": origin},
        )
        assert status == 200 and "Drain this coordinator" in body, origin


def test_with_login_only_the_configured_host_names_are_answered(
    secured: Coordinator, tmp_path: Path
) -> None:
    dashboard = Dashboard(
        tmp_path / "dash.log", "--target", secured.target, "--login",
        "--allowed-hosts", "dash.example.test, ops.example.test:8443", "--listen", "127.0.0.1:0",
    )  # fmt: skip
    try:
        url = dashboard.url()
        port = port_of(url)
        for host in ("dash.example.test", f"dash.example.test:{port}", "ops.example.test:8443"):
            status, _, headers = fetch(url + "/", headers={"Host": host})
            assert status == 303 and headers["Location"] == "/login", host
        for host in ("evil.example", f"ops.example.test:{port}", f"x.dash.example.test:{port}"):
            status, body, _ = fetch(url + "/login", headers={"Host": host})
            assert status == 421 and "--allowed-hosts" in body, host
        status, body, headers = fetch(url + "/login", headers={"Host": "dash.example.test"})
        assert status == 200
        login_cookie = headers["Set-Cookie"].split(";")[0]
        status, body, _ = fetch(
            url + "/login",
            data=form(csrf=csrf_of(body), token=TOKENS["ops"][0]),
            headers={
                "Cookie": login_cookie,
                "Host": "dash.example.test",
                "Origin": "http://evil.example",
            },
        )
        assert status == 403 and "cross-site" in body
    finally:
        dashboard.stop()


def test_allowed_hosts_without_login_are_refused(
    secured: Coordinator, open_cluster: CoordinatorWithDashboard, tmp_path: Path
) -> None:
    done = run_to_exit(
        "--target", open_cluster.target, "--allowed-hosts", "dash.example.test",
        "--listen", "127.0.0.1:0",
    )  # fmt: skip
    assert done.returncode == 2
    assert "allowed hosts apply with login only" in done.stderr
    args = coordinator_args(
        f"sqlite:///{tmp_path / 'x.db'}", "127.0.0.1:0", "--dashboard-listen", "127.0.0.1:0",
        "--dashboard-allowed-hosts", "dash.example.test",
    )  # fmt: skip
    import subprocess

    done = subprocess.run(args, capture_output=True, text=True, timeout=60, env=subprocess_env())
    assert done.returncode == 5
    assert "--dashboard-allowed-hosts needs --tokens-file" in done.stderr


# -- garbage in, 4xx out --------------------------------------------------------------


def post_raw(url: str, cookie: dict[str, str], body: bytes, content_type: str) -> tuple[int, str]:
    status, text, _ = fetch(
        url + "/action", data=body, headers={**cookie, "Content-Type": content_type}
    )
    return status, text


def follow(url: str, cookie: dict[str, str], status: int, headers: dict[str, str]) -> str:
    assert status == 303, status
    return fetch(url + headers["Location"], headers=cookie)[1]


def test_bodies_no_form_sends_are_answered_400_before_anything_else(
    open_cluster: CoordinatorWithDashboard,
) -> None:
    url = open_cluster.url
    cookie, csrf = session(url)
    urlencoded = "application/x-www-form-urlencoded"
    # A CSRF token that is not ASCII: refused as any wrong token.
    status, body = post_raw(url, cookie, "op=drain&csrf=é".encode(), urlencoded)
    assert status == 403 and "CSRF" in body
    status, body = post_raw(url, cookie, b"op=drain&csrf=\xff\xfe", urlencoded)
    assert status == 400 and "not a form the dashboard can read" in body
    status, body = post_raw(url, cookie, b"--x\r\nbroken", "multipart/form-data; boundary=x")
    assert status == 400 and "not a form the dashboard can read" in body
    status, body = post_raw(url, cookie, b"junk", "multipart/form-data")
    assert status == 400 and "not a form the dashboard can read" in body
    upload = (
        '--x\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n' + csrf + "\r\n"
        '--x\r\nContent-Disposition: form-data; name="op"; filename="a.txt"\r\n\r\n'
        "drain\r\n--x--\r\n"
    )
    status, body = post_raw(url, cookie, upload.encode(), "multipart/form-data; boundary=x")
    assert status == 400 and "no file uploads" in body
    assert not draining(open_cluster.target)
    assert_no_traceback(open_cluster)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("created_after=0001-01-01T00:00:00%2B14:00", "created after must be a date and time"),
        ("created_before=9999-12-31T23:59:59-14:00", "created before must be a date and time"),
        ("due_after=yesterday", "due after must be a date and time"),
    ],
)
def test_filters_at_the_edge_of_the_date_range_are_answered_400(
    open_cluster: CoordinatorWithDashboard, query: str, message: str
) -> None:
    status, body, _ = fetch(open_cluster.url + "/jobs?" + query)
    assert status == 400
    assert message in body
    assert_no_traceback(open_cluster)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"op": "pause", "kind": "job_type", "value": "x", "expire_minutes": minutes},
            "the expiry must be above 0 and at most",
        )
        for minutes in ("1e308", "inf", "1e10", "nan", "-5")
    ]
    + [
        (
            {"op": "rate_limit", "kind": "job_type", "value": "x", "starts": "5", "period": p},
            message,
        )
        for p, message in (
            ("inf", "the period a number of seconds (not &#39;inf&#39;)"),
            ("nan", "the period a number of seconds (not &#39;nan&#39;)"),
            ("1e300", "the period must be at most 366 days"),
        )
    ]
    + [
        ({"op": "retry"}, "name the job to retry (job_id)"),
        ({"op": "cancel", "job_id": " "}, "name the job to cancel (job_id)"),
        ({"op": "unlock"}, "name the job to unlock (job_id)"),
        ({"op": "weight", "tenant_id": "t", "weight": "9" * 40}, "the weight must be a whole"),
        ({"op": "limit", "kind": "tenant", "value": "t", "max_running": "1e3"}, "whole number"),
    ],
)
@pytest.mark.parametrize("confirmed", ["", "1"], ids=["asked", "confirmed"])
def test_action_fields_no_form_allows_are_answered_with_what_was_wrong(
    open_cluster: CoordinatorWithDashboard,
    fields: dict[str, str],
    message: str,
    confirmed: str,
) -> None:
    url = open_cluster.url
    cookie, csrf = session(url)
    status, _, headers = fetch(
        url + "/action",
        data=form(csrf=csrf, back="/pauses", confirmed=confirmed, **fields),
        headers=cookie,
    )
    shown = follow(url, cookie, status, headers)
    assert headers["Location"] == "/pauses"
    assert message in shown
    with AdminClient(open_cluster.target) as admin:
        assert all(p.scope.value != "x" for p in admin.list_pauses())
        assert all(r.value != "x" for r in admin.list_rate_limits())
    assert_no_traceback(open_cluster)


FIELDS = (
    "job_id", "kind", "value", "tenant_id", "reason", "expire_minutes", "weight",
    "category", "max_running", "starts", "period", "burst", "worker_id", "cluster",
    "keep_attempts", "statuses", "job_type", "created_after", "due_before", "back",
)  # fmt: skip
GARBAGE = (
    "", " ", "0", "-1", "1e308", "-inf", "nan", "9" * 30, "0x10", "１２", "٣",
    "é", "\x00", "\ud7ff", "%", "../..", "/\\evil.example", "//evil.example",
    "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-01:00", "x" * 2000,
    "PENDING,BOGUS", "tenant", "definition", "category", "*", "true",
)  # fmt: skip


def test_fuzzed_action_forms_are_never_answered_5xx(open_cluster: CoordinatorWithDashboard) -> None:
    """Every action with random garbage in random fields (fixed seed, bounded count)."""
    from wfjobs_dashboard.actions import ACTIONS

    # Every action of the table but draining this coordinator (the test asserts it
    # is not drained at the end), and one that does not exist.
    ops = (*sorted(set(ACTIONS) - {"drain"}), "nonsense")
    assert "bulk_cancel" in ops and "rate_limit" in ops
    url = open_cluster.url
    cookie, csrf = session(url)
    rng = random.Random(20261201)
    answered: dict[int, int] = {}
    for _ in range(300):
        fields = {name: rng.choice(GARBAGE) for name in rng.sample(FIELDS, rng.randint(1, 8))}
        fields.update(op=rng.choice(ops), csrf=csrf, confirmed=rng.choice(("", "1")))
        status, body, _ = fetch(url + "/action", data=form(**fields), headers=cookie)
        answered[status] = answered.get(status, 0) + 1
        assert status < 500, (fields, body[:500])
    for query in (
        {"page_size": "1e9", "status": "x", "category": "é"},
        {"page_token": "\x00garbage", "tenant_id": "x" * 2000},
        {"created_after": "0001-01-01T00:00:00+00:00", "due_before": "9999-12-31T23:59:59"},
    ):
        status, body, _ = fetch(url + "/jobs?" + urllib.parse.urlencode(query), headers=cookie)
        assert status < 500, (query, body[:500])
    for path in ("/jobs/%00", "/jobs/" + "x" * 3000, "/live/jobs/%ff", "/static/%2e%2e"):
        status, body, _ = fetch(url + path, headers=cookie)
        assert status < 500, (path, body[:500])
    assert 303 in answered and 200 in answered  # both steps of actions were reached
    assert not draining(open_cluster.target)
    assert_no_traceback(open_cluster)


def assert_no_traceback(process: Any) -> None:
    log = process.log()
    assert "Traceback" not in log and "Error handling request" not in log, log[-3000:]


# -- logins, sessions, the way back, headers ------------------------------------------


def login_form(url: str) -> tuple[dict[str, str], str]:
    status, body, headers = fetch(url + "/login")
    assert status == 200
    # The form's CSRF token rides in a cookie of its own: no session yet.
    assert headers["Set-Cookie"].startswith("wfjobs_login="), headers["Set-Cookie"]
    return {"Cookie": headers["Set-Cookie"].split(";")[0]}, csrf_of(body)


def test_failed_logins_are_throttled_per_address_and_no_session_is_made_before_one(
    secured: Coordinator, tmp_path: Path
) -> None:
    dashboard = Dashboard(
        tmp_path / "dash.log", "--target", secured.target, "--login", "--listen", "127.0.0.1:0"
    )
    try:
        url = dashboard.url()
        # Pages before a login make no session: a redirect without a session cookie.
        status, _, headers = fetch(url + "/jobs")
        assert status == 303 and "Set-Cookie" not in headers
        status, _, headers = fetch(url + "/live/overview")
        assert status == 401 and "Set-Cookie" not in headers
        cookie, csrf = login_form(url)
        answers = []
        for n in range(12):
            status, body, headers = fetch(
                url + "/login", data=form(csrf=csrf, token=f"guess-{n}"), headers=cookie
            )
            answers.append(status)
        assert answers == [401] * 10 + [429, 429]
        assert "too many failed logins from 127.0.0.1" in body
        assert 1 <= int(headers["Retry-After"]) <= 60
        # While refused, even the right token is not checked.
        status, body, _ = fetch(
            url + "/login", data=form(csrf=csrf, token=TOKENS["ops"][0]), headers=cookie
        )
        assert status == 429
        # The login form's token is its own cookie's: without it, refused.
        status, body, _ = fetch(url + "/login", data=form(csrf=csrf, token="x"))
        assert status == 403 and "CSRF" in body
    finally:
        dashboard.stop()


def test_a_login_makes_the_session(secured: Coordinator, tmp_path: Path) -> None:
    dashboard = Dashboard(
        tmp_path / "dash.log", "--target", secured.target, "--login", "--listen", "127.0.0.1:0"
    )
    try:
        url = dashboard.url()
        cookie, csrf = login_form(url)
        status, _, headers = fetch(
            url + "/login", data=form(csrf=csrf, token=TOKENS["ops"][0]), headers=cookie
        )
        assert status == 303 and headers["Location"] == "/"
        session_cookie = headers["Set-Cookie"].split(";")[0]
        assert session_cookie.startswith("wfjobs_dashboard=")
        status, body, _ = fetch(url + "/", headers={"Cookie": session_cookie})
        assert status == 200 and "ops · all tenants" in body
    finally:
        dashboard.stop()


def test_static_files_and_live_parts_make_no_session(
    open_cluster: CoordinatorWithDashboard,
) -> None:
    status, _, headers = fetch(open_cluster.url + "/static/dashboard.css")
    assert status == 200 and "Set-Cookie" not in headers
    status, _, headers = fetch(open_cluster.url + "/live/overview")
    assert status == 401 and "Set-Cookie" not in headers


@pytest.mark.parametrize(
    "back", ["/\\evil.example", "//evil.example", "http://evil.example/", "/\t/evil.example"]
)
def test_the_way_back_after_an_action_stays_on_the_dashboard(
    open_cluster: CoordinatorWithDashboard, back: str
) -> None:
    url = open_cluster.url
    cookie, csrf = session(url)
    status, _, headers = fetch(
        url + "/action",
        data=form(csrf=csrf, op="pause", kind="bogus", back=back, confirmed="1"),
        headers=cookie,
    )
    assert status == 303 and headers["Location"] == "/"


def test_pages_name_no_referrer_and_no_server_software(
    open_cluster: CoordinatorWithDashboard,
) -> None:
    url, port = open_cluster.url, port_of(open_cluster.url)
    for path, host in (
        ("/", f"127.0.0.1:{port}"),
        ("/static/dashboard.js", f"127.0.0.1:{port}"),
        ("/no-such-page", f"127.0.0.1:{port}"),
        ("/", f"evil.example:{port}"),
    ):
        status, _, headers = fetch(url + path, headers={"Host": host})
        assert headers.get("Referrer-Policy") == "no-referrer", (path, host, status)
        assert "Server" not in headers, (path, host, headers.get("Server"))
    _, body, _ = fetch(url + "/pauses", headers=session(url)[0])
    # Forms say where to go back to (pages send no Referer).
    assert re.search(r'name="back" value="/pauses"', body)


def test_a_pause_recorded_without_a_name_reads_unauthenticated(
    open_cluster: CoordinatorWithDashboard,
) -> None:
    import subprocess
    import sys

    with AdminClient(open_cluster.target) as admin:
        admin.pause("job_type", "nameless-type", actor="")
    try:
        _, body, _ = fetch(open_cluster.url + "/pauses", headers=session(open_cluster.url)[0])
        row = body[body.index("job type nameless-type") :].split("</tr>", 1)[0]
        assert "<td>unauthenticated</td>" in row
        listed = subprocess.run(
            [sys.executable, "-m", "worker_sdk.cli", "--target", open_cluster.target, "pauses"],
            capture_output=True,
            text=True,
            timeout=60,
            env=subprocess_env(without=("WFJOBS_TOKEN",)),
        )
        line = next(x for x in listed.stdout.splitlines() if "nameless-type" in x)
        assert "unauthenticated" in line, listed.stdout
    finally:
        with AdminClient(open_cluster.target) as admin:
            admin.unpause("job_type", "nameless-type")


def test_successful_logins_are_not_counted_as_failures(
    secured: Coordinator, tmp_path: Path
) -> None:
    """A login is counted before its token is checked and taken back once it
    proves good: an operator who logs in again and again is never refused."""
    dashboard = Dashboard(
        tmp_path / "dash.log", "--target", secured.target, "--login", "--listen", "127.0.0.1:0"
    )
    try:
        url = dashboard.url()
        cookie, csrf = login_form(url)
        answers = []
        for _ in range(12):
            status, _, _ = fetch(
                url + "/login", data=form(csrf=csrf, token=TOKENS["ops"][0]), headers=cookie
            )
            answers.append(status)
        assert answers == [303] * 12
        # Failures still count from zero: ten are answered, the next refused.
        wrong = [
            fetch(url + "/login", data=form(csrf=csrf, token=f"g-{n}"), headers=cookie)[0]
            for n in range(11)
        ]
        assert wrong == [401] * 10 + [429]
    finally:
        dashboard.stop()


def test_concurrent_wrong_tokens_are_throttled_too(secured: Coordinator, tmp_path: Path) -> None:
    """Each login is counted before the coordinator checks its token: 100
    guesses sent at once do not all pass the throttle while the checks run."""
    dashboard = Dashboard(
        tmp_path / "dash.log", "--target", secured.target, "--login", "--listen", "127.0.0.1:0"
    )
    try:
        url = dashboard.url()
        cookie, csrf = login_form(url)

        def guess(n: int) -> int:
            status, _, _ = fetch(
                url + "/login", data=form(csrf=csrf, token=f"burst-{n}"), headers=cookie
            )
            return status

        with ThreadPoolExecutor(max_workers=100) as pool:
            answers = list(pool.map(guess, range(100)))
        assert sorted(set(answers)) == [401, 429]
        assert answers.count(401) == 10
    finally:
        dashboard.stop()
