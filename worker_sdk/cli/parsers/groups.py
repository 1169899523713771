"""``wfjobs groups``: list, create, show, close and cancel job groups."""

from __future__ import annotations

from ..arguments import CommandParsers, Subcommands, int32


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    groups = sub.add_parser("groups", help="job groups: fan-in with a completion job")
    gsub = groups.add_subparsers(dest="groups_command", required=True, metavar="ACTION")
    p = parsers.add(
        gsub,
        "create",
        "groups_create",
        "create a group whose completion job is enqueued once it is closed and every member "
        "ended; add members with `wfjobs enqueue TYPE --group ID`",
    )
    p.add_argument("job_type", help="the completion job's type")
    p.add_argument(
        "payload",
        nargs="?",
        default=None,
        help="the completion job's JSON payload (default: the group's summary)",
    )
    p.add_argument("--tenant", default="default", help="owning tenant (default: default)")
    p.add_argument("--close", action="store_true", help="close it at once (no members join)")
    p = parsers.add(
        gsub, "list", "groups_list", "job groups, newest first, with their members by status"
    )
    p.add_argument("--tenant", default="", help="only this tenant's groups")
    p.add_argument(
        "--status",
        action="append",
        metavar="STATUS",
        help="open, closed or completed (repeat or comma-separate)",
    )
    p.add_argument("--limit", type=int32, default=50, help="groups per page (1..1000, default 50)")
    p.add_argument("--page-token", default="", help="continue a previous listing")
    p.add_argument("--all", action="store_true", help="follow every page")
    p = parsers.add(gsub, "show", "groups_show", "a group's state and its members by status")
    p.add_argument("group_id", help="the group's id")
    p = parsers.add(
        gsub, "close", "groups_close", "no more members: it completes once every member ended"
    )
    p.add_argument("group_id", help="the group's id")
    p = parsers.add(gsub, "cancel", "groups_cancel", "close a group and cancel its pending members")
    p.add_argument("group_id", help="the group's id")
    p.add_argument("--reason", default="", help="kept with each cancelled member")
