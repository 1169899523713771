"""``wfjobs events watch``: the job event stream."""

from __future__ import annotations

from ..arguments import EVENT_KINDS, CommandParsers, Subcommands, event_kind


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    events = sub.add_parser("events", help="watch the job event stream")
    esub = events.add_subparsers(dest="events_command", required=True, metavar="ACTION")
    p = parsers.add(
        esub,
        "watch",
        "events_watch",
        "print job events as they happen (one line each, --json: one JSON object per line), "
        "from a cursor; reconnects by itself when the coordinator restarts",
    )
    p.add_argument("--tenant", default="", help="only this tenant's jobs")
    p.add_argument("--definition", default="", help="only jobs of this workflow definition")
    p.add_argument("--instance", default="", help="only jobs of this workflow instance")
    p.add_argument("--correlation", default="", help="only jobs with this correlation id")
    p.add_argument(
        "--job-type",
        "--type",  # the spelling before job-type was the one; kept for scripts
        dest="job_type",
        default="",
        help="only jobs of this type (--type is the same)",
    )
    p.add_argument("--job", default="", help="only this job")
    p.add_argument("--group", default="", help="only the members of this job group")
    p.add_argument(
        "--kind",
        action="append",
        type=event_kind,
        metavar="KIND",
        help="only this kind of event (repeatable): " + ", ".join(EVENT_KINDS),
    )
    p.add_argument(
        "--after",
        default="",
        metavar="CURSOR",
        help="continue after this cursor (the first column of a line printed before)",
    )
    p.add_argument(
        "--from-oldest",
        action="store_true",
        help="without --after: start at the oldest event kept (default: events from now on)",
    )
    p.add_argument("--count", type=int, default=0, help="stop after this many events")
