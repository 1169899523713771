"""``wfjobs limits``: concurrency limits."""

from __future__ import annotations

from ..arguments import CommandParsers, Subcommands, int32, limit_scope_arguments


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    limits = sub.add_parser("limits", help="concurrency limits: list and set")
    lsub = limits.add_subparsers(dest="limits_command", required=True, metavar="ACTION")
    parsers.add(lsub, "list", "limits_list", "every concurrency limit with its running count")
    p = parsers.add(
        lsub, "set", "limits_set", "limit running jobs of a scope cluster-wide (0 removes)"
    )
    limit_scope_arguments(p)
    p.add_argument("max_running", type=int32, help="most running at once; 0 removes the limit")
