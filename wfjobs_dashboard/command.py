"""``wfjobs dashboard``: serve the web dashboard against any coordinator.

The connection options (``--target``, ``--tls``, ``--ca``, ``--cert``,
``--key``, ``--token``, profiles) are the CLI's; this module adds the
dashboard's own and runs it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from . import DEFAULT_LISTEN, DashboardConfig, DashboardError, extra_missing, run_dashboard
from .guard import parse_allowed_hosts

LISTEN_ENV = "WFJOBS_DASHBOARD_LISTEN"
ALLOWED_HOSTS_ENV = "WFJOBS_DASHBOARD_ALLOWED_HOSTS"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The dashboard's options on its ``wfjobs dashboard`` parser."""
    p.add_argument(
        "--listen",
        default=os.environ.get(LISTEN_ENV) or DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where to serve HTTP (env {LISTEN_ENV}; default {DEFAULT_LISTEN}); beyond "
        "loopback every operator logs in with a token",
    )
    p.add_argument(
        "--login",
        action="store_true",
        help="require a token login on loopback too (it always is elsewhere)",
    )
    p.add_argument(
        "--actor",
        default=os.environ.get("USER", "") or "dashboard",
        help="who pauses are recorded as when the coordinator runs without authentication "
        "(default $USER); with it, actions are recorded under the token's name",
    )
    p.add_argument(
        "--allowed-hosts",
        default=os.environ.get(ALLOWED_HOSTS_ENV, ""),
        metavar="NAME[:PORT],...",
        help=f"with login, the host names browsers reach the dashboard by (env "
        f"{ALLOWED_HOSTS_ENV}), e.g. dash.example.com; loopback names are always answered, "
        "any other Host gets 421",
    )
    p.add_argument(
        "--secure-cookie",
        action="store_true",
        help="mark the session cookie Secure (HTTPS terminates in front of the dashboard)",
    )


def run(args: argparse.Namespace, connection: Any) -> int:
    """Serve until interrupted; returns the exit code (2 when it cannot start)."""
    if extra_missing():
        sys.stderr.write(
            "wfjobs: the dashboard needs the 'dashboard' extra: "
            "pip install 'workflow-jobs[dashboard]'\n"
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        allowed_hosts = parse_allowed_hosts(args.allowed_hosts)
    except ValueError as e:
        sys.stderr.write(f"wfjobs: --allowed-hosts: {e}\n")
        return 2
    config = DashboardConfig(
        target=connection.target,
        listen=args.listen,
        credentials=connection.credentials(),
        token=connection.token or "",
        timeout=connection.timeout,
        login=args.login,
        actor=args.actor,
        secure_cookie=args.secure_cookie,
        allowed_hosts=allowed_hosts,
    )
    try:
        run_dashboard(config)
    except DashboardError as e:
        sys.stderr.write(f"wfjobs: {e}\n")
        return 2
    return 0
