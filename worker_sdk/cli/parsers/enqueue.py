"""``wfjobs enqueue``: enqueue one job, or one per line of a JSON lines file."""

from __future__ import annotations

from datetime import timedelta

from ..arguments import CommandParsers, Subcommands, int32, parse_duration, utc_time


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    p = parsers.add(
        sub,
        "enqueue",
        "enqueue",
        "enqueue a job (--from-file: one job per line of a JSON lines file, in batches)",
    )
    p.add_argument(
        "job_type",
        nargs="?",
        default=None,
        help="the job type a worker serves (with --from-file: the type of lines without job_type)",
    )
    p.add_argument("payload", nargs="?", default=None, help="JSON payload (default: null)")
    p.add_argument(
        "--from-file",
        metavar="PATH",
        default=None,
        help="enqueue one job per line of PATH ('-': standard input), each a JSON object of "
        'this command\'s options by their JSON names ({"job_type": "mail", "payload": {...}, '
        '"tenant": "acme", "delay": "5m", ...}); the options given here are every line\'s '
        "defaults. Every line is checked first (a bad one: nothing is enqueued), then sent in "
        "batches; a line the coordinator refuses is reported with its number, the others are "
        "enqueued",
    )
    p.add_argument("--tenant", default="default", help="owning tenant (default: default)")
    p.add_argument("--definition", default="", help="workflow definition id")
    p.add_argument("--instance", default="", help="workflow instance id")
    p.add_argument("--correlation", default="", help="correlation id")
    p.add_argument(
        "--priority", type=int32, default=0, help="higher runs first within the tenant (default 0)"
    )
    p.add_argument(
        "--delay",
        type=parse_duration,
        default=None,
        help="run after this long (a duration: 90s, 5m, 2h, 1d, 250ms (a bare number is seconds))",
    )
    p.add_argument(
        "--max-attempts",
        type=int32,
        default=None,
        help="attempts before the job is faulted (default: the job type's, else 3)",
    )
    p.add_argument(
        "--execution-timeout",
        type=parse_duration,
        default=None,
        help="longest one attempt may run (a duration: 90s, 5m, 2h, 1d, 250ms (a bare number is seconds))",
    )
    p.add_argument(
        "--heartbeat-timeout",
        type=parse_duration,
        default=None,
        help="longest a running attempt may go without a heartbeat (a duration: 90s, 5m, 2h, 1d, 250ms (a bare number is seconds))",
    )
    p.add_argument(
        "--idempotency-key",
        default=None,
        help="enqueueing the same key again (same tenant) returns the same job",
    )
    p.add_argument(
        "--category",
        default=None,
        help="continuation, activity_work, integration, maintenance or custom",
    )
    p.add_argument(
        "--ordering-key",
        default=None,
        help="jobs of the same tenant and ordering key run one at a time, in enqueue order",
    )
    p.add_argument(
        "--unique-key",
        default=None,
        help="uniqueness key (same tenant): with --unique-while (the default), "
        "--unique-for or --debounce; see docs/uniqueness.md",
    )
    rule = p.add_mutually_exclusive_group()
    rule.add_argument(
        "--unique-while",
        default=None,
        metavar="STATUSES",
        help="the key's job blocks another while in one of these comma-separated "
        "statuses (default: pending,running)",
    )
    rule.add_argument(
        "--unique-for",
        type=parse_duration,
        default=None,
        metavar="PERIOD",
        help="the key admits one job per period, whatever its state (a duration: 90s, 10m, 1h)",
    )
    rule.add_argument(
        "--debounce",
        type=parse_duration,
        default=None,
        metavar="DELAY",
        help="the key's pending job takes this payload and runs DELAY after the latest enqueue "
        "(a duration: 30s, 5m)",
    )
    p.add_argument(
        "--max-wait",
        type=parse_duration,
        default=None,
        help="with --debounce: never later than this long after the first enqueue (a duration: 90s, 5m)",
    )
    p.add_argument(
        "--group",
        default=None,
        metavar="GROUP_ID",
        help="join this open job group as a member (wfjobs groups create)",
    )
    p.add_argument(
        "--schedule-id",
        default=None,
        help="enqueue one tick of this schedule: exactly one job per --tick-time, whichever "
        "nodes send it (docs/scheduler-ticks.md)",
    )
    p.add_argument(
        "--tick-time",
        type=utc_time,
        default=None,
        help="with --schedule-id: the time the tick was due (ISO 8601, UTC unless it says)",
    )
    p.add_argument(
        "--misfire",
        choices=("fire-once-late", "skip"),
        default=None,
        help="with --schedule-id: what a tick later than --misfire-grace does (default "
        "fire-once-late)",
    )
    p.add_argument(
        "--misfire-grace",
        type=parse_duration,
        default=None,
        help="with --schedule-id: how late a tick may be (a duration: 90s, 5m; default 60s)",
    )
    p.add_argument(
        "--wait",
        type=parse_duration,
        nargs="?",
        const=timedelta(0),
        default=None,
        help="wait for the outcome (optionally at most this long: 30s, 5m, ...); prints the "
        "job id first, then the result, or the error and traceback and exits 8 when the job "
        "faults or is cancelled; exits 10 when the wait ends first (the job stays enqueued)",
    )
