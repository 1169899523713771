"""``wfjobs stats``, ``workers`` and ``whoami``: what the coordinator says about the cluster and the caller."""

from __future__ import annotations

from ..arguments import CommandParsers, Subcommands, parse_duration


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    p = parsers.add(sub, "stats", "stats", "backlog, recent failures and retries, drain state")
    p.add_argument("--tenant", default="", help="only this tenant's jobs")
    p.add_argument(
        "--category",
        default=None,
        help="only jobs of this category (continuation, activity_work, integration, "
        "maintenance or custom)",
    )
    p.add_argument(
        "--window",
        type=parse_duration,
        default=None,
        help="how far back 'recent' reaches (a duration: 90s, 5m, 2h, 1d, 250ms (a bare number is seconds); default 5m)",
    )
    parsers.add(sub, "workers", "workers", "connected workers across every coordinator")
    parsers.add(sub, "whoami", "whoami", "the credential this CLI calls with: name, roles, tenants")
