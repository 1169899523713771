"""``wfjobs rate-limits``: rate limits of job starts."""

from __future__ import annotations

from ..arguments import LIMIT_KINDS, CommandParsers, Subcommands, int32, limit_scope_arguments


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    rates = sub.add_parser("rate-limits", help="rate limits: list, set and remove")
    rsub = rates.add_subparsers(dest="rate_limits_command", required=True, metavar="ACTION")
    parsers.add(
        rsub, "list", "rate_limits_list", "every rate limit, with when it next admits a start"
    )
    p = parsers.add(rsub, "set", "rate_limits_set", "allow at most STARTS job starts per period")
    limit_scope_arguments(p)
    p.add_argument("starts", type=int32, help="starts allowed per period")
    p.add_argument("--period", type=float, default=1.0, help="the period in seconds (default 1)")
    p.add_argument(
        "--burst",
        type=int32,
        default=0,
        help="starts an idle scope may take at once (default: STARTS)",
    )
    p = parsers.add(rsub, "remove", "rate_limits_remove", "remove the rate limit of a scope")
    p.add_argument("kind", choices=LIMIT_KINDS, help="scope kind: " + ", ".join(LIMIT_KINDS))
    p.add_argument("value", help="the limit's value, as set ('*' for the wildcard limit)")
