"""``wfjobs dashboard`` on its own, and when the dashboard refuses to start.

No browser here: plain HTTP is enough to see whether it serves, asks for a
login, or refuses to start.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from wfj_dashboard import (
    TOKENS,
    Dashboard,
    fetch,
    loopback_dashboard,
    ops_session,
    run_to_exit,
    write_tokens,
)
from wfj_testing import Coordinator, coordinator_args, subprocess_env

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def coordinators(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Coordinator]]:
    tmp = tmp_path_factory.mktemp("standalone")
    tokens = write_tokens(tmp / "tokens.jsonl")
    secured = Coordinator(
        f"sqlite:///{tmp / 'secured.db'}",
        tmp / "secured.log",
        args=("--drain-timeout", "1", "--tokens-file", str(tokens)),
    )
    try:
        open_ = Coordinator(f"sqlite:///{tmp / 'open.db'}", tmp / "open.log")
    except BaseException:
        secured.stop()
        raise
    try:
        yield {"secured": secured, "open": open_}
    finally:
        secured.stop()
        open_.stop()


def test_on_loopback_it_serves_without_login_using_its_own_token(
    coordinators: dict[str, Coordinator], tmp_path: Path
) -> None:
    dashboard = loopback_dashboard(coordinators["secured"].target, tmp_path)
    try:
        url = dashboard.url()
        status, body, headers = fetch(url + "/")
        assert status == 200
        assert "Overview" in body and "handing out jobs" in body
        assert "SameSite=Strict" in headers["Set-Cookie"]
        # No CSRF token, no action.
        status, body, _ = fetch(url + "/action", data=b"op=drain&confirmed=1")
        assert status == 403 and "CSRF" in body
        # With the session's token but from another site: refused too.
        cookie = headers["Set-Cookie"].split(";")[0]
        status, body, _ = fetch(url + "/workers", headers={"Cookie": cookie})
        assert status == 200
        match = re.search(r'name="csrf" value="([^"]+)"', body)
        assert match is not None
        form = f"op=drain&csrf={match.group(1)}".encode()
        status, body, _ = fetch(
            url + "/action", data=form, headers={"Cookie": cookie, "Origin": "http://evil.test"}
        )
        assert status == 403 and "cross-site" in body
        # From the dashboard's own page it reaches the confirmation step.
        status, body, _ = fetch(
            url + "/action", data=form, headers={"Cookie": cookie, "Origin": url}
        )
        assert status == 200 and "Drain this coordinator" in body
    finally:
        dashboard.stop()


def test_on_loopback_without_a_token_for_a_secured_coordinator_it_says_what_to_pass(
    coordinators: dict[str, Coordinator],
) -> None:
    done = run_to_exit("--target", coordinators["secured"].target, "--listen", "127.0.0.1:0")
    assert done.returncode == 2
    assert "refuses the dashboard's token" in done.stderr
    assert "--login" in done.stderr


def test_beyond_loopback_every_page_asks_for_a_login(
    coordinators: dict[str, Coordinator], tmp_path: Path
) -> None:
    dashboard = Dashboard(
        tmp_path / "dash.log",
        "--target",
        coordinators["secured"].target,
        "--token",
        TOKENS["ops"][0],
        "--listen",
        "0.0.0.0:0",
    )
    try:
        url = dashboard.url()
        for path in ("/", "/jobs", "/workers"):
            status, _, headers = fetch(url + path)
            assert status == 303 and headers["Location"] == "/login", path
        status, body, _ = fetch(url + "/login")
        assert status == 200 and 'name="token"' in body
        # The dashboard's own --token is not used for anyone beyond loopback.
        assert "handing out jobs" not in body and 'href="/workers"' not in body
    finally:
        dashboard.stop()


def test_beyond_loopback_it_refuses_a_coordinator_that_takes_anonymous_calls(
    coordinators: dict[str, Coordinator],
) -> None:
    done = run_to_exit("--target", coordinators["open"].target, "--listen", "0.0.0.0:0")
    assert done.returncode == 2
    assert "accepts calls without a token" in done.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ("--dashboard-listen", "0.0.0.0:0"),
            "refusing to serve the dashboard on 0.0.0.0:0 without authentication",
        ),
        (
            ("--dashboard-listen", "127.0.0.1:0", "--tls-cert", "c.pem", "--tls-key", "k.pem"),
            "run `wfjobs dashboard --target HOST:PORT --ca FILE` instead",
        ),
        (("--dashboard-listen", "127.0.0.1"), "--dashboard-listen: the dashboard address"),
    ],
    ids=["beyond-loopback-without-tokens", "tls", "no-port"],
)
def test_the_coordinator_refuses_a_dashboard_it_cannot_serve_safely(
    tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    args = coordinator_args(f"sqlite:///{tmp_path / 'x.db'}", "127.0.0.1:0", *extra)
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, env=subprocess_env())
    assert done.returncode == 5
    assert message in done.stderr


def test_the_tenants_page_lists_the_category_weights_set(
    coordinators: dict[str, Coordinator], tmp_path: Path
) -> None:
    from worker_sdk import AdminClient

    target = coordinators["secured"].target
    with AdminClient(target, token=TOKENS["ops"][0]) as admin:
        admin.set_category_weight("cw-tenant", "integration", 3)
    try:
        with ops_session(target, tmp_path) as (url, cookie):
            status, body, _ = fetch(url + "/tenants", headers=cookie)
        assert status == 200
        section = body[body.index("<h2>Category weights</h2>") :]
        assert re.search(
            r"cw-tenant</a></td><td>integration</td><td><span class=\"weight\">3</span>", section
        ), section[:2000]
    finally:
        with AdminClient(target, token=TOKENS["ops"][0]) as admin:
            admin.remove_category_weight("cw-tenant", "integration")


def test_category_weights_are_set_and_removed_from_the_tenants_page(
    coordinators: dict[str, Coordinator], tmp_path: Path
) -> None:
    from worker_sdk import AdminClient

    target = coordinators["secured"].target

    def weights() -> list[tuple[str, str, int]]:
        with AdminClient(target, token=TOKENS["ops"][0]) as admin:
            listed = admin.list_category_weights(tenant_id="cw-set")
        return [(w.tenant_id, str(w.category.to_proto()), w.weight) for w in listed.weights]

    with ops_session(target, tmp_path) as (url, cookie):
        status, body, _ = fetch(url + "/tenants", headers=cookie)
        assert status == 200 and 'id="category-weight-form"' in body
        csrf = re.search(r'name="csrf" value="([^"]+)"', body)
        assert csrf is not None
        headers = {**cookie, "Origin": url}
        assert 'name="back" value="/tenants"' in body  # pages send no Referer: forms say it

        def act(**fields: str) -> str:
            """Post a confirmed action; the page it sends the browser to (with its flash)."""
            sent = {"csrf": csrf.group(1), "back": "/tenants", **fields}
            data = "&".join(f"{k}={v}" for k, v in sent.items())
            status, _, answer = fetch(url + "/action", data=data.encode(), headers=headers)
            assert status == 303, status
            return fetch(url + answer["Location"], headers=cookie)[1]

        form = {"op": "category_weight", "tenant_id": "cw-set", "category": "integration"}
        _, confirm, _ = fetch(
            url + "/action",
            data="&".join(
                f"{k}={v}" for k, v in {"csrf": csrf.group(1), **form, "weight": "4"}.items()
            ).encode(),
            headers=headers,
        )
        assert "Set the weight of category integration in tenant cw-set to 4?" in confirm
        assert weights() == []  # nothing until confirmed
        shown = act(**form, weight="4", confirmed="1")
        assert "category integration of tenant cw-set now has weight 4" in shown
        assert weights() == [("cw-set", "3", 4)]
        assert 'name="op" value="category_weight_remove"' in shown  # its Remove button
        # The coordinator's own bound comes back as the action's error.
        refused = act(**form, weight="0", confirmed="1")
        assert "set category weight failed" in refused
        assert weights() == [("cw-set", "3", 4)]
        unknown = act(**{**form, "category": "nightly"}, weight="2", confirmed="1")
        assert "unknown category &#39;nightly&#39;" in unknown
        removed = act(**{**form, "op": "category_weight_remove"}, confirmed="1")
        assert "category integration of tenant cw-set is back to weight 1" in removed
        assert weights() == []
    # A session with a credential scoped to tenant acme sets no other tenant's weights.
    with ops_session(target, tmp_path, "acme-admin") as (url, cookie):
        _, body, _ = fetch(url + "/tenants", headers=cookie)
        csrf = re.search(r'name="csrf" value="([^"]+)"', body)
        assert csrf is not None
        data = (
            f"op=category_weight&csrf={csrf.group(1)}&tenant_id=cw-set&category=integration"
            "&weight=4&confirmed=1"
        )
        status, _, answer = fetch(
            url + "/action", data=data.encode(), headers={**cookie, "Origin": url}
        )
        assert status == 303
        refused = fetch(url + answer["Location"], headers=cookie)[1]
        assert "set category weight failed" in refused
        assert "may not act on tenant &#39;cw-set&#39;" in refused
        assert weights() == []


def test_the_jobs_filter_takes_several_job_types(
    coordinators: dict[str, Coordinator], tmp_path: Path
) -> None:
    from worker_sdk import SchedulerClient

    target = coordinators["secured"].target
    with SchedulerClient(target, token=TOKENS["ops"][0]) as client:
        ids = {t: client.enqueue(t, {}, tenant_id="jt-tenant").id for t in ("jt-a", "jt-b", "jt-c")}
    with ops_session(target, tmp_path) as (url, cookie):

        def listed(query: str) -> tuple[set[str], str]:
            status, body, _ = fetch(url + "/jobs?tenant_id=jt-tenant&" + query, headers=cookie)
            assert status == 200, body
            return {t for t, job_id in ids.items() if f'href="/jobs/{job_id}"' in body}, body

        comma, body = listed("job_type=jt-a,+jt-b")
        repeated, _ = listed("job_type=jt-a&job_type=jt-c")
        one, _ = listed("job_type=jt-b")
        _, paged = listed("job_type=jt-a,jt-b&page_size=1")
        csrf = re.search(r'name="csrf" value="([^"]+)"', body)
        assert csrf is not None
        form = f"op=bulk_cancel&csrf={csrf.group(1)}&tenant_id=jt-tenant&job_type=jt-a%2C+jt-b"
        status, confirm, _ = fetch(
            url + "/action", data=form.encode(), headers={**cookie, "Origin": url}
        )

    assert comma == {"jt-a", "jt-b"}
    assert repeated == {"jt-a", "jt-c"}
    assert one == {"jt-b"}
    # The field shows the types as one comma-separated value, and the bulk forms
    # (retry, cancel, purge) carry it.
    assert 'name="job_type" value="jt-a, jt-b"' in body
    assert body.count('type="hidden" name="job_type" value="jt-a, jt-b"') == 3
    assert "job_type=jt-a%2C+jt-b" in paged.split('id="next-page"', 1)[1].split(">", 1)[0]
    assert status == 200
    assert (
        "Bulk cancel 2 matching job(s) of the 2 the list holds (tenant jt-tenant, job type jt-a, jt-b)?"
        in confirm
    )
