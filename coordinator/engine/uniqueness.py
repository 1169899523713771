"""The rules of uniqueness keys a caller may ask for (docs/uniqueness.md).

What an enqueue under a key decides is the store's (``store/uniqueness.py``,
under the key's lock); this module checks the rule a caller sent and sets the
due time a debounced job starts with.
"""

from __future__ import annotations

from coordinator.errors import InvalidArgument
from coordinator.model import JobStatus, NewJob, Uniqueness, UniqueRule
from workflowjobs.contract import LONGEST_SPAN_DAYS, LONGEST_SPAN_US


def check_uniqueness(rule: Uniqueness, job: NewJob, max_length: int) -> None:
    """Raise ``InvalidArgument`` naming the field unless ``rule`` fits ``job``.

    Called before ``prepare`` fills the job's due time (0: none was asked for).
    """
    if not rule.key:
        raise InvalidArgument("uniqueness.key is required (e.g. 'sync-account-42')")
    if len(rule.key) > max_length:
        raise InvalidArgument(
            f"uniqueness.key is {len(rule.key)} characters long; the limit is {max_length}"
        )
    if job.ordering_key is not None:
        raise InvalidArgument(
            "a job cannot have both uniqueness and an ordering_key (ordering keys queue "
            "every job; uniqueness keeps one)"
        )
    if rule.rule == UniqueRule.WHILE:
        if not rule.statuses:
            raise InvalidArgument("uniqueness.unique_while.statuses names no status")
        for status in rule.statuses:
            if status not in JobStatus.__members__.values():
                raise InvalidArgument(
                    f"uniqueness.unique_while.statuses: {status} is not a known JobStatus"
                )
    elif rule.rule == UniqueRule.PERIOD:
        _check_span(rule.period_us, "uniqueness.period", allow_zero=False)
    elif rule.rule == UniqueRule.DEBOUNCE:
        _check_span(rule.delay_us, "uniqueness.debounce.delay", allow_zero=False)
        _check_span(rule.max_wait_us, "uniqueness.debounce.max_wait", allow_zero=True)
        if rule.max_wait_us and rule.max_wait_us < rule.delay_us:
            raise InvalidArgument(
                "uniqueness.debounce.max_wait must be at least its delay (or 0: no maximum)"
            )
        if job.due_at:
            raise InvalidArgument(
                "a debounced job cannot have a due_time: debounce sets it (the latest "
                "enqueue + delay)"
            )
    else:
        raise InvalidArgument("uniqueness names no rule (unique_while, period or debounce)")


def _check_span(us: int, field: str, *, allow_zero: bool) -> None:
    if us < 0 or us > LONGEST_SPAN_US or (us == 0 and not allow_zero):
        low = "0" if allow_zero else "more than 0"
        raise InvalidArgument(
            f"{field} must be {low} and at most {LONGEST_SPAN_DAYS} days, got {us // 1000} ms"
        )


def first_due_at(rule: Uniqueness, now: int) -> int:
    """The due time of a job the key admits: a debounced one waits its delay."""
    return now + rule.delay_us if rule.rule == UniqueRule.DEBOUNCE else 0


__all__ = ["check_uniqueness", "first_due_at"]
