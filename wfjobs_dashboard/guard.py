"""The dashboard's front door: which host names it answers, who may retry a login.

DNS rebinding: a hostile web page can make its own host name resolve to
127.0.0.1, after which the browser sends the dashboard requests with that
page's ``Host`` (and ``Origin``), as a same-origin page would. So the
dashboard answers only the host names it is known by: without login, the
loopback names (``127.0.0.1``, ``localhost``, ``[::1]``) with its port; with
login, those and the names the operator configures (``--allowed-hosts``).
Every other ``Host`` is answered 421, and a POST whose ``Origin`` names another
host is refused, whatever ``Host`` says.

Failed logins are counted per client address: past :data:`LOGIN_FAILURES` in
:data:`LOGIN_WINDOW_S` seconds an address gets 429 without its token being
checked, until the oldest failure leaves the window.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
# Failed logins an address may make in the window before it is refused.
LOGIN_FAILURES = 10
LOGIN_WINDOW_S = 60.0
# Addresses whose failures are remembered; past this, the oldest are forgotten.
LOGIN_ADDRESSES = 10_000


def split_host(host: str) -> tuple[str, int | None]:
    """``name[:port]`` (IPv6 in brackets) as (lower-case name, port or None).

    Raises:
        ValueError: Not a host name with an optional numeric port.
    """
    host = host.strip().lower()
    if host.startswith("["):
        name, sep, rest = host[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"not a host: {host!r}")
        port_text = rest[1:] if rest else ""
    elif host.count(":") == 1:
        name, _, port_text = host.partition(":")
    elif ":" in host:
        raise ValueError(f"an IPv6 address needs brackets: {host!r}")
    else:
        name, port_text = host, ""
    if not name or any(c in name for c in "/\\@?# "):
        raise ValueError(f"not a host: {host!r}")
    if not port_text:
        return name, None
    if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
        raise ValueError(f"not a port: {port_text!r}")
    return name, int(port_text)


def parse_allowed_hosts(text: str | Iterable[str]) -> tuple[str, ...]:
    """Host names from a comma-separated list (or a list): ``name`` or ``name:port``.

    Raises:
        ValueError: An entry is not a host name with an optional port.
    """
    entries = text.split(",") if isinstance(text, str) else list(text)
    out = []
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        try:
            name, port = split_host(entry)
        except ValueError as exc:
            raise ValueError(f"allowed hosts: {exc}") from None
        out.append(f"[{name}]" if ":" in name else name)
        if port is not None:
            out[-1] += f":{port}"
    return tuple(out)


def check_allowed_hosts(allowed: Iterable[str], *, login: bool) -> None:
    """The rule for allowed hosts: they widen what a dashboard with login answers.

    Raises:
        ValueError: Hosts are allowed without login (which answers loopback names alone).
    """
    if tuple(allowed) and not login:
        raise ValueError(
            "allowed hosts apply with login only: without login the dashboard answers "
            "its loopback names alone (127.0.0.1, localhost, [::1])"
        )


class HostCheck:
    """Whether a ``Host`` (or an ``Origin``'s host) names this dashboard.

    Args:
        allowed: Names (``name`` matches any port, ``name:port`` that port)
            answered besides the loopback names; used only with login.
        login: Whether sessions log in (without login only loopback names pass).
    """

    def __init__(self, allowed: Iterable[str] = (), *, login: bool) -> None:
        self.port = 0  # the port the dashboard serves on, set once it listens
        self._names: dict[str, int | None] = {}
        for entry in allowed if login else ():
            name, port = split_host(entry)
            self._names[name] = port
        self.login = login

    def allows(self, host: str) -> bool:
        """A ``Host`` header (``name[:port]``)."""
        try:
            name, port = split_host(host)
        except ValueError:
            return False
        return self._allows(name, port, None)

    def allows_origin(self, origin: str) -> bool:
        """An ``Origin`` header: ``null`` passes (a same-origin form POST under
        ``Referrer-Policy: no-referrer`` sends it; the CSRF token guards it),
        else its scheme must be http(s) and its host one this dashboard answers."""
        if origin == "null":
            return True
        scheme, sep, netloc = origin.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or "/" in netloc:
            return False
        try:
            name, port = split_host(netloc)
        except ValueError:
            return False
        return self._allows(name, port, 443 if scheme.lower() == "https" else 80)

    def _allows(self, name: str, port: int | None, default: int | None) -> bool:
        # default: the port an absent one means (an Origin's scheme's); None: unknown.
        effective = port if port is not None else default
        if name in LOOPBACK_NAMES:
            return (effective or 80) == self.port
        if name not in self._names:
            return False
        wanted = self._names[name]
        if wanted is None or effective == wanted:
            return True
        # Host leaves out the default port of whichever scheme the browser used.
        return effective is None and wanted in (80, 443)

    def refusal(self, host: str) -> str:
        """What a refused request is told."""
        if self.login:
            hint = (
                "name it with --allowed-hosts (WFJOBS_DASHBOARD_ALLOWED_HOSTS) where the "
                "dashboard is started"
            )
        else:
            hint = f"without login it answers only http://127.0.0.1:{self.port} and localhost"
        return f"refused: this dashboard does not answer to the host name {host!r}; {hint}"


class LoginThrottle:
    """Failed logins per client address, with a sliding window.

    Args:
        failures: Failures an address may make within ``window_s``.
        window_s: The window, in seconds.
        clock: Monotonic seconds (injected by tests).
    """

    def __init__(
        self,
        failures: int = LOGIN_FAILURES,
        window_s: float = LOGIN_WINDOW_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_addresses: int = LOGIN_ADDRESSES,
    ) -> None:
        self._failures = failures
        self._window = window_s
        self._clock = clock
        self._max = max_addresses
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def wait_s(self, address: str) -> float:
        """Seconds until ``address`` may try again (0: it may now)."""
        times = self._seen.get(address)
        if times is None:
            return 0.0
        now = self._clock()
        while times and now - times[0] >= self._window:
            times.popleft()
        if not times:
            del self._seen[address]
            return 0.0
        if len(times) < self._failures:
            return 0.0
        return self._window - (now - times[0])

    def forgive(self, address: str) -> None:
        """Take back the last count of ``address``: a login that checked out
        (every login is counted before its check; only failures are held)."""
        times = self._seen.get(address)
        if times:
            times.pop()
            if not times:
                del self._seen[address]

    def failed(self, address: str) -> None:
        times = self._seen.pop(address, None) or deque()
        times.append(self._clock())
        while len(times) > self._failures:
            times.popleft()
        self._seen[address] = times  # most recent last
        while len(self._seen) > self._max:
            self._seen.popitem(last=False)
