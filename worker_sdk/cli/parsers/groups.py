"""``wfjobs groups``: create, show, close and cancel job groups."""

from __future__ import annotations

from ..arguments import CommandParsers, Subcommands


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
    p = parsers.add(gsub, "show", "groups_show", "a group's state and its members by status")
    p.add_argument("group_id", help="the group's id")
    p = parsers.add(
        gsub, "close", "groups_close", "no more members: it completes once every member ended"
    )
    p.add_argument("group_id", help="the group's id")
    p = parsers.add(gsub, "cancel", "groups_cancel", "close a group and cancel its pending members")
    p.add_argument("group_id", help="the group's id")
    p.add_argument("--reason", default="", help="kept with each cancelled member")
