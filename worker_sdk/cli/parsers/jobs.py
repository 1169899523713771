"""``wfjobs jobs``: list, show, retry, cancel, run now, purge, unlock, replay and explain jobs."""

from __future__ import annotations

from ..arguments import CommandParsers, Subcommands, add_filter_options, int32


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    jobs = sub.add_parser("jobs", help="list, inspect and act on jobs")
    jsub = jobs.add_subparsers(dest="jobs_command", required=True, metavar="ACTION")
    p = parsers.add(
        jsub, "list", "jobs_list", "list jobs, newest first (--sort oldest: oldest first)"
    )
    add_filter_options(p)
    p.add_argument(
        "--sort",
        choices=("newest", "oldest"),
        default="newest",
        help="by creation time, newest first (the default) or oldest first",
    )
    p.add_argument("--limit", type=int32, default=50, help="jobs per page (1..1000, default 50)")
    p.add_argument("--page-token", default="", help="continue a previous listing")
    p.add_argument("--all", action="store_true", help="follow every page")
    p = parsers.add(
        jsub,
        "count",
        "jobs_count",
        "print how many jobs match the filter (the options of jobs list; none: every job)",
    )
    add_filter_options(p)
    p = parsers.add(jsub, "show", "jobs_show", "show a job with its attempt history")
    p.add_argument("job_id", help="the job's id")
    for name, verb, text in (
        (
            "retry",
            "jobs_retry",
            "make FAULTED or CANCELLED jobs PENDING again, due now: a delay or backoff "
            "they waited for is not kept (by id or filter)",
        ),
        (
            "cancel",
            "jobs_cancel",
            "cancel PENDING jobs, signal RUNNING ones, set FAULTED ones aside without running "
            "them (by id; a filter cancels PENDING and RUNNING jobs)",
        ),
    ):
        p = parsers.add(jsub, name, verb, text)
        p.add_argument("job_ids", nargs="*", metavar="JOB_ID", help="jobs to act on (or a filter)")
        add_filter_options(p)
        p.add_argument("--dry-run", action="store_true", help="bulk: only count the matches")
        p.add_argument("--all-jobs", action="store_true", help=f"bulk: {name} with no filter")
        p.add_argument(
            "--yes",
            action="store_true",
            help="bulk across every tenant (no --tenant): do it without asking",
        )
        if name == "retry":
            p.add_argument(
                "--keep-attempts",
                action="store_true",
                help="keep the attempt count (default: a fresh attempt budget)",
            )
        else:
            p.add_argument("--reason", default="", help="kept with the job")
    p = parsers.add(
        jsub,
        "run-now",
        "jobs_run_now",
        "make PENDING jobs that are not due yet (a delay, a retry's backoff) due now",
    )
    p.add_argument("job_ids", nargs="+", metavar="JOB_ID", help="the jobs")
    p = parsers.add(
        jsub,
        "purge",
        "jobs_purge",
        "delete finished (COMPLETED, FAULTED, CANCELLED) jobs matching a filter, with their "
        "history; keeps FAULTED jobs holding their ordering key and members of unfinished groups",
    )
    add_filter_options(p)
    p.add_argument("--dry-run", action="store_true", help="only count what would be deleted")
    p.add_argument("--all-jobs", action="store_true", help="purge with no filter")
    p.add_argument(
        "--yes",
        action="store_true",
        help="purge across every tenant (no --tenant): do it without asking",
    )
    p = parsers.add(
        jsub, "unlock", "jobs_unlock", "put a RUNNING job whose worker is gone back to PENDING"
    )
    p.add_argument("job_id", help="the job's id")
    p = parsers.add(
        jsub, "replay", "jobs_replay", "enqueue a copy of a job (same payload and context)"
    )
    p.add_argument("job_id", help="the job to copy")
    p = parsers.add(jsub, "explain", "jobs_explain", "every reason a job is not running right now")
    p.add_argument("job_id", help="the job's id")
