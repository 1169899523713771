"""Listen addresses, read alike by the coordinator and the dashboard.

Whether an address is reachable from this machine only decides what each
side refuses to serve without authentication, so it is decided here once.
"""

from __future__ import annotations

import ipaddress


def split_listen(listen: str, what: str = "address") -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) into its parts; an empty host is every interface.

    Raises:
        ValueError: Not ``HOST:PORT``; the message names ``what`` was given.
    """
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"the {what} must be HOST:PORT, not {listen!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def is_loopback(listen: str, what: str = "address") -> bool:
    """True when ``listen`` (``host:port``) is reachable from this machine only.

    Raises:
        ValueError: ``listen`` is not ``HOST:PORT``; the message names ``what`` was given.
    """
    host, _ = split_listen(listen, what)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["is_loopback", "split_listen"]
