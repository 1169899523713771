"""The end of a job, written once: what follows in the transaction that ended it.

Design note. Every statement that leaves jobs in a final status (COMPLETED,
FAULTED, CANCELLED) calls ``JobEnd.jobs_ended`` in its own transaction, after its
writes: a completion, a failure to the dead letter, an attempt budget used
up, a lease or an execution timeout reclaimed (all through
``store/leases.py``), a cancel, a bulk cancel, an unlock (``store/jobs.py``)
and a group's cancel (``store/groups.py``). It does, in this order:

1. records the events the statement gives (a statement that wrote its events
   itself, in a CTE, gives none);
2. releases the next held job of each ordering key the ended jobs had
   (``ordering.release_next``), taking the keys' locks first unless the
   statement took them (which transaction locks a key before its rows and
   which after is ``store/ordering.py``'s lock order);
3. stores the completion job of each closed group whose members have now all
   ended (``store/groups.py``);
4. notifies the wake times: the released jobs' due times and those the
   statement adds (a retry's due time, "now" when freed slots may admit a
   waiting job), and returns them.

A statement that ends no job but may still let a key's next job run or a
group complete calls it too: a purge of a FAULTED job that held its key, an
insert whose job a batch's held jobs waited behind was deduplicated away, a
group's close. Nothing else calls ``release_next`` or completes a group
(``tests/unit/packaging/test_rule_homes.py`` holds it so), so a new way to
end a job cannot forget a key or a group.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from coordinator.store.base import Family, StoreCore
from coordinator.store.events import EventEntry, EventQueries
from coordinator.store.ordering import Key, lock_keys, release_next

# Store the completion of each closed group of ``group_ids`` none of whose
# members is left (``GroupQueries.groups_after_end``): (conn, group_ids, now).
CompleteGroups = Callable[[sa.Connection, Collection[str], int], list[str]]


@dataclass(slots=True)
class Ended:
    """The ordering keys and groups of jobs a transaction ended."""

    keys: set[Key] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)

    def add(self, tenant_id: str, ordering_key: str | None, group_id: str | None) -> None:
        if ordering_key is not None:
            self.keys.add((tenant_id, ordering_key))
        if group_id is not None:
            self.groups.add(group_id)

    @classmethod
    def of(cls, rows: Iterable[Any]) -> Ended:
        """Of rows with ``tenant_id``, ``ordering_key`` and ``group_id``."""
        ended = cls()
        for row in rows:
            ended.add(row.tenant_id, row.ordering_key, row.group_id)
        return ended


class JobEnd(Family):
    """What follows jobs' ends (design note above), handed to every family
    whose statements end jobs."""

    def __init__(self, core: StoreCore, events: EventQueries) -> None:
        super().__init__(core)
        self._record_events = events.record_events
        self._complete_groups: CompleteGroups | None = None

    def complete_groups_by(self, complete: CompleteGroups) -> None:
        """Complete groups with ``complete`` (the groups family's; the store sets
        it once it has built that family, which inserts through the jobs family,
        which ends jobs through this object)."""
        self._complete_groups = complete

    def jobs_ended(
        self,
        conn: sa.Connection,
        ended: Ended,
        now: int | None,
        *,
        events: Sequence[EventEntry] = (),
        bump: bool = False,
        keys_locked: bool = False,
        wake: Iterable[int] = (),
    ) -> list[int]:
        """What follows jobs ending in the transaction of ``conn`` (design note above).

        ``ended``: the ended jobs' keys and groups. ``now``: when they ended (the
        events' time, a completion job's creation); None only for a purge, which
        records nothing and completes no group. ``events`` are written with
        ``bump`` as ``EventQueries.record_events`` does. ``keys_locked``: the
        statement took the keys' locks. ``wake``: due times to notify besides
        the released jobs'. Returns every due time notified.
        """
        if now is None and (events or ended.groups):
            raise ValueError("jobs_ended records events and completes groups at a time: give now")
        if events:
            assert now is not None
            self._record_events(conn, events, now, bump=bump)
        due = list(wake)
        if ended.keys:
            if not keys_locked:
                lock_keys(conn, self.is_postgres, ended.keys)
            due.extend(release_next(conn, self.is_postgres, ended.keys))
        if ended.groups:
            assert now is not None and self._complete_groups is not None
            self._complete_groups(conn, ended.groups, now)
        if due:
            self._notify_wake(conn, due)
        return due


__all__ = ["CompleteGroups", "Ended", "JobEnd"]
