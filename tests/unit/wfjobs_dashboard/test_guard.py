"""The dashboard's front-door rules: host names, the way back, login throttling, sessions."""

from __future__ import annotations

import pytest

from wfjobs_dashboard.actions import safe_back
from wfjobs_dashboard.guard import HostCheck, LoginThrottle, parse_allowed_hosts
from wfjobs_dashboard.session import Sessions, same_csrf


def test_without_login_only_loopback_names_with_the_port_pass() -> None:
    hosts = HostCheck(["dash.example.test"], login=False)
    hosts.port = 8080
    for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "LOCALHOST:8080"):
        assert hosts.allows(host), host
    for host in (
        "dash.example.test:8080",  # configured names count with login only
        "evil.example:8080",
        "127.0.0.1:8081",
        "localhost",
        "127.0.0.1.nip.io:8080",
        "::1:8080",
        "",
        "localhost:8080/",
        "localhost:0x1f90",
    ):
        assert not hosts.allows(host), host


def test_with_login_configured_names_pass_with_their_port() -> None:
    hosts = HostCheck(parse_allowed_hosts("dash.example.test, ops.example.test:8443"), login=True)
    hosts.port = 8080
    assert hosts.allows("dash.example.test") and hosts.allows("dash.example.test:9999")
    assert hosts.allows("ops.example.test:8443") and not hosts.allows("ops.example.test:8080")
    assert hosts.allows("127.0.0.1:8080")
    assert not hosts.allows("evil.example")
    assert hosts.allows_origin("https://dash.example.test")
    assert hosts.allows_origin("http://127.0.0.1:8080")
    assert hosts.allows_origin("null")
    assert not hosts.allows_origin("http://evil.example")
    assert not hosts.allows_origin("https://ops.example.test")  # 443, not 8443
    assert not hosts.allows_origin("javascript://dash.example.test")
    assert not hosts.allows_origin("http://dash.example.test/path")


def test_a_bad_allowed_host_is_named() -> None:
    with pytest.raises(ValueError, match="not a port"):
        parse_allowed_hosts("dash.example.test:http")
    with pytest.raises(ValueError, match="allowed hosts: not a"):
        parse_allowed_hosts("https://dash.example.test")


@pytest.mark.parametrize(
    ("back", "expected"),
    [
        ("/jobs?status=PENDING", "/jobs?status=PENDING"),
        ("/pauses", "/pauses"),
        ("/\\evil.example", "/"),
        ("/\\/evil.example", "/"),
        ("//evil.example", "/"),
        ("/\t/evil.example", "/"),
        ("http://evil.example/", "/"),
        ("evil.example", "/"),
        ("", "/"),
    ],
)
def test_the_way_back_is_a_path_of_this_dashboard(back: str, expected: str) -> None:
    assert safe_back(back) == expected


def test_csrf_tokens_of_any_text_compare_without_error() -> None:
    assert same_csrf("abc", "abc")
    assert not same_csrf("é", "abc") and not same_csrf("", "")


def test_failed_logins_are_refused_past_the_limit_until_the_window_passes() -> None:
    now = [0.0]
    throttle = LoginThrottle(3, 60.0, clock=lambda: now[0])
    for _ in range(3):
        assert throttle.wait_s("10.0.0.1") == 0
        throttle.failed("10.0.0.1")
        now[0] += 1
    assert throttle.wait_s("10.0.0.1") == pytest.approx(57.0)
    assert throttle.wait_s("10.0.0.2") == 0  # another address is not held back
    now[0] = 60.5  # the first failure left the window
    assert throttle.wait_s("10.0.0.1") == 0


def test_logins_that_check_out_are_not_held_against_their_address() -> None:
    throttle = LoginThrottle(3, 60.0, clock=lambda: 0.0)
    for _ in range(10):  # counted before the check, forgiven once it passes
        assert throttle.wait_s("10.0.0.1") == 0
        throttle.failed("10.0.0.1")
        throttle.forgive("10.0.0.1")
    for _ in range(3):
        throttle.failed("10.0.0.1")
    assert throttle.wait_s("10.0.0.1") > 0


def test_the_throttle_remembers_a_bounded_number_of_addresses() -> None:
    throttle = LoginThrottle(1, 60.0, clock=lambda: 0.0, max_addresses=2)
    for address in ("a", "b", "c"):
        throttle.failed(address)
    assert throttle.wait_s("a") == 0  # forgotten, the oldest
    assert throttle.wait_s("b") > 0 and throttle.wait_s("c") > 0


def test_sessions_are_bounded_and_the_one_unused_longest_goes() -> None:
    sessions = Sessions(limit=3)
    made = [sessions.new(token="", tenant_id="", name=str(n), by_login=False) for n in range(3)]
    assert sessions.get(made[0].id) is made[0]  # used again: now the newest
    fourth = sessions.new(token="", tenant_id="", name="3", by_login=False)
    assert len(sessions) == 3
    assert sessions.get(made[1].id) is None
    assert sessions.get(made[0].id) is made[0] and sessions.get(fourth.id) is fourth
