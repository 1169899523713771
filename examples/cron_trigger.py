"""A cron trigger that starts a workflow by enqueueing a job: APScheduler fires, the engine runs.

The scheduler only triggers. Each fire is a *schedule tick*: the schedule's id
and the tick's nominal time (when it was due, computed from the trigger, not
the moment the code happened to run) make it exactly one job, so a double fire
(the same schedule on two hosts for availability, or a restart that replays a
fire) finds the job the first fire made instead of adding another, and a host
that dies loses nothing while another runs the same schedule. A tick sent
later than the misfire grace follows ``--misfire``: ``fire-once-late`` (one
job now; a backlog of missed ticks is one job) or ``skip``. Retries, timeouts
and execution belong to the engine (docs/scheduler-ticks.md).

Run (needs ``pip install 'workflow-jobs[examples]'``)::

    python examples/cron_trigger.py --target 127.0.0.1:50051 \\
        --cron "0 6 * * mon-fri" --job-type report.daily --workflow daily-report

``--cron`` takes the five crontab fields (minute hour day month day-of-week;
day-of-week by name avoids the 0 = Sunday / 0 = Monday ambiguity) and
``--second`` the seconds field (default 0). Times are UTC. ``--start-at``,
``--stop-after`` and ``--stop-at`` bound a run, as the tests do.

The same trigger with the system cron and the CLI, one line in a crontab
(``%`` must be escaped there)::

    0 6 * * 1-5  wfjobs --target 127.0.0.1:50051 enqueue report.daily '{}' \\
        --definition daily-report --schedule-id daily-report \\
        --tick-time "$(date -u +\\%FT\\%H:\\%M:00Z)"
"""

from __future__ import annotations

import argparse
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_SUBMITTED, JobSubmissionEvent
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.cron import CronTrigger

from worker_sdk import SchedulerClient, WorkflowRef

TICK_JOB = "tick"


def build_trigger(cron: str, second: str, start_at: datetime | None) -> CronTrigger:
    """A UTC cron trigger from the five crontab fields plus a seconds field."""
    fields = cron.split()
    if len(fields) != 5:
        raise SystemExit(f"--cron needs 5 fields (minute hour day month day-of-week), got {cron!r}")
    minute, hour, day, month, day_of_week = fields
    return CronTrigger(
        second=second,
        minute=minute,
        hour=hour,
        day=day,
        month=month,
        day_of_week=day_of_week,
        start_date=start_at,
        timezone=UTC,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--cron", default="0 6 * * mon-fri", help="five crontab fields, UTC")
    parser.add_argument("--second", default="0", help="the seconds field (default 0)")
    parser.add_argument("--job-type", default="report.daily")
    parser.add_argument("--workflow", default="daily-report", help="workflow definition id")
    parser.add_argument("--tenant", default="default")
    parser.add_argument("--start-at", type=datetime.fromisoformat, help="first possible fire (UTC)")
    parser.add_argument("--stop-after", type=int, default=0, help="exit after this many fires")
    parser.add_argument("--stop-at", type=datetime.fromisoformat, help="exit at this time (UTC)")
    parser.add_argument("--schedule-id", help="the schedule's id (default: --workflow)")
    parser.add_argument("--misfire", choices=("fire-once-late", "skip"), default="fire-once-late")
    parser.add_argument(
        "--misfire-grace", type=float, default=60.0, help="seconds a tick may be late (default 60)"
    )
    args = parser.parse_args()
    schedule_id = args.schedule_id or args.workflow

    trigger = build_trigger(args.cron, args.second, args.start_at)
    scheduler = BlockingScheduler(timezone=UTC)
    # Ticks are sent off the scheduler's thread: a slow enqueue delays no later tick.
    senders = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tick")
    fires = 0
    lock = threading.Lock()

    with SchedulerClient(args.target) as client:

        def send(fire_time: datetime) -> None:
            nonlocal fires
            job = client.enqueue_tick(
                schedule_id,
                fire_time,
                args.job_type,
                {"fire_time": fire_time.isoformat()},
                misfire=args.misfire.replace("-", "_"),
                misfire_grace=args.misfire_grace,
                tenant_id=args.tenant,
                workflow=WorkflowRef(
                    definition_id=args.workflow,
                    correlation_id=f"{schedule_id}:{fire_time.isoformat()}",
                ),
            )
            if job is None:
                print(f"fired {fire_time.isoformat()} skipped (misfire)", flush=True)
            else:
                note = "already existed" if job.deduplicated else "new"
                print(f"fired {fire_time.isoformat()} job {job.id} {note}", flush=True)
            with lock:
                fires += 1
                if args.stop_after and fires >= args.stop_after:
                    scheduler.shutdown(wait=False)

        def on_fire(event: JobSubmissionEvent) -> None:
            # APScheduler gives the job no scheduled time, but its submission
            # event does: every run time it stands for (several after missed
            # runs, each a tick). A run refused for max instances is a tick too.
            if event.job_id == TICK_JOB:
                for fire_time in event.scheduled_run_times:
                    senders.submit(send, fire_time.astimezone(UTC))

        scheduler.add_listener(on_fire, EVENT_JOB_SUBMITTED | EVENT_JOB_MAX_INSTANCES)
        # The job itself does nothing. misfire_grace_time=None and no coalescing
        # report every missed run as a tick: the coordinator's misfire policy
        # (--misfire, --misfire-grace) decides what a late one does.
        # With --start-at, the first run is due then even if this process starts
        # later: the ticks since are reported as missed runs (and sent as ticks).
        first = {"next_run_time": trigger.start_date} if args.start_at else {}
        scheduler.add_job(
            lambda: None, trigger, id=TICK_JOB, coalesce=False, misfire_grace_time=None, **first
        )
        if args.stop_at is not None:
            stop_at = args.stop_at if args.stop_at.tzinfo else args.stop_at.replace(tzinfo=UTC)
            scheduler.add_job(lambda: scheduler.shutdown(wait=False), "date", run_date=stop_at)
        print(f"cron trigger started: {trigger}", flush=True)
        scheduler.start()
        senders.shutdown(wait=True)  # ticks already fired are sent before the exit


if __name__ == "__main__":
    main()
