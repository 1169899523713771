"""A cron trigger that starts a workflow by enqueueing a job: APScheduler fires, the engine runs.

The scheduler only triggers. Each fire enqueues one job whose idempotency key
is the *scheduled* fire time (not the moment the code happened to run), so a
double fire — the same schedule on two hosts for availability, or a restart
that replays a fire — finds the job the first fire made instead of adding
another. Retries, timeouts and execution belong to the engine.

Run (needs ``pip install 'workflow-jobs[examples]'``)::

    python examples/cron_trigger.py --target 127.0.0.1:50051 \\
        --cron "0 6 * * mon-fri" --job-type report.daily --workflow daily-report

``--cron`` takes the five crontab fields (minute hour day month day-of-week;
day-of-week by name avoids the 0 = Sunday / 0 = Monday ambiguity) and
``--second`` the seconds field (default 0). Times are UTC. ``--start-at`` and
``--stop-after`` bound a run, as the tests do.

The same trigger with the system cron and the CLI, one line in a crontab
(``%`` must be escaped there)::

    0 6 * * 1-5  wfjobs --target 127.0.0.1:50051 enqueue report.daily '{}' \\
        --definition daily-report --idempotency-key "daily-report:$(date -u +\\%FT\\%H:\\%M)"
"""

from __future__ import annotations

import argparse
import threading
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.cron import CronTrigger

from worker_sdk import SchedulerClient, WorkflowRef

# How far back to look for the fire a run belongs to; a run later than this is not matched.
LOOKBACK = timedelta(hours=1)


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


def scheduled_fire_time(trigger: CronTrigger, now: datetime) -> datetime:
    """The latest time ``trigger`` fires at or before ``now``: the fire this run belongs to.

    APScheduler does not hand the scheduled time to the job; the trigger gives
    it back, the same on every host that runs the same schedule.
    """
    fire = trigger.get_next_fire_time(None, now - LOOKBACK)
    latest: datetime | None = None
    while fire is not None and fire <= now:
        latest = fire
        fire = trigger.get_next_fire_time(fire, fire + timedelta(microseconds=1))
    if latest is None:
        raise RuntimeError(f"no fire of {trigger} between {now - LOOKBACK} and {now}")
    return latest


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
    args = parser.parse_args()

    trigger = build_trigger(args.cron, args.second, args.start_at)
    scheduler = BlockingScheduler(timezone=UTC)
    fires = 0
    lock = threading.Lock()

    with SchedulerClient(args.target) as client:

        def fire() -> None:
            nonlocal fires
            fire_time = scheduled_fire_time(trigger, datetime.now(UTC))
            key = f"{args.workflow}:{fire_time.isoformat()}"
            job = client.enqueue(
                args.job_type,
                {"fire_time": fire_time.isoformat()},
                tenant_id=args.tenant,
                workflow=WorkflowRef(definition_id=args.workflow, correlation_id=key),
                idempotency_key=key,
            )
            note = "already existed" if job.deduplicated else "new"
            print(f"fired {fire_time.isoformat()} job {job.id} {note}", flush=True)
            with lock:
                fires += 1
                if args.stop_after and fires >= args.stop_after:
                    scheduler.shutdown(wait=False)

        # max_instances=1 and coalesce: a slow coordinator never piles up overlapping fires;
        # a missed fire runs once, late, and still finds the key of its scheduled time.
        scheduler.add_job(fire, trigger, max_instances=1, coalesce=True, misfire_grace_time=60)
        print(f"cron trigger started: {trigger}", flush=True)
        scheduler.start()


if __name__ == "__main__":
    main()
