"""Scheduler ticks become jobs exactly once (docs/scheduler-ticks.md).

An outside scheduler (cron, APScheduler, Quartz) that runs on several nodes
fires each tick on each node. A tick names its schedule and its *nominal*
time (when it was due, not when the code ran), and the pair is the job's
idempotency key: every node's enqueue of one tick finds the same job, on any
replica, however late it comes.

A tick enqueued more than its grace after its nominal time is a misfire,
handled by its policy:

- FIRE_ONCE_LATE: the tick is enqueued now, with the uniqueness key of its
  schedule's misfires (unique while PENDING): a backlog of missed ticks, sent
  after an outage, is one pending job, not one per missed tick;
- SKIP: no job is stored, unless one exists for that very tick already.

A tick of a paused definition is stored like any job and waits, PENDING, for
the pause to lift.
"""

from __future__ import annotations

import datetime as dt
import hashlib

from coordinator.errors import InvalidArgument
from coordinator.model import (
    JobStatus,
    MisfirePolicy,
    NewJob,
    ScheduleTick,
    Uniqueness,
    UniqueRule,
)
from workflowjobs.contract import LONGEST_SPAN_DAYS, LONGEST_SPAN_US

_MAX_GRACE_US = LONGEST_SPAN_US


def tick_key(tick: ScheduleTick, max_length: int) -> str:
    """The idempotency key of a tick: its schedule and nominal time (UTC, to the µs).

    A schedule id too long for the key within ``max_length`` is replaced by
    its SHA-256 (the key stays one per schedule and time).
    """
    when = dt.datetime.fromtimestamp(tick.nominal_at / 1e6, dt.UTC)
    text = when.isoformat(timespec="microseconds" if when.microsecond else "seconds")
    key = f"schedule:{tick.schedule_id}@{text.replace('+00:00', 'Z')}"
    if len(key) > max_length:
        digest = hashlib.sha256(tick.schedule_id.encode()).hexdigest()
        key = f"schedule:sha256:{digest}@{text.replace('+00:00', 'Z')}"
    return key


def misfire_uniqueness(tick: ScheduleTick) -> Uniqueness:
    """The uniqueness rule that makes a schedule's late ticks one pending job."""
    return Uniqueness(
        f"schedule:{tick.schedule_id}#misfire", UniqueRule.WHILE, (JobStatus.PENDING,)
    )


def check_tick(tick: ScheduleTick, job: NewJob, max_length: int) -> None:
    """Raise ``InvalidArgument`` naming the field unless ``tick`` fits ``job``."""
    if not tick.schedule_id:
        raise InvalidArgument("schedule_tick.schedule_id is required (e.g. 'nightly-report')")
    if len(tick.schedule_id) > max_length:
        raise InvalidArgument(
            f"schedule_tick.schedule_id is {len(tick.schedule_id)} characters long; "
            f"the limit is {max_length}"
        )
    if tick.nominal_at <= 0:
        raise InvalidArgument("schedule_tick.nominal_time is required: the time the tick was due")
    if not 0 <= tick.grace_us <= _MAX_GRACE_US:
        raise InvalidArgument(f"schedule_tick.misfire_grace must be 0 to {LONGEST_SPAN_DAYS} days")
    if tick.policy not in MisfirePolicy.__members__.values():
        raise InvalidArgument(f"schedule_tick.misfire_policy {tick.policy} is not known")
    if job.idempotency_key:
        raise InvalidArgument(
            "a schedule tick's idempotency key is its schedule and nominal time; "
            "leave idempotency_key empty"
        )
    if job.due_at:
        raise InvalidArgument("a schedule tick is due at once; leave due_time empty")


def is_misfire(tick: ScheduleTick, now: int) -> bool:
    return now - tick.nominal_at > tick.grace_us


__all__ = ["check_tick", "is_misfire", "misfire_uniqueness", "tick_key"]
