"""Job groups: fan-in with a completion job (docs/groups.md).

A caller creates a group with the completion job's spec and, optionally, its
first members; more members join while it is OPEN (an enqueue naming its
``group_id``); closing it says no more will. Once it is closed and every
member has ended (COMPLETED, FAULTED or CANCELLED), the completion job is
stored exactly once, in the transaction of the last member's end
(``store/groups.py`` has how). Cancelling a group closes it and cancels its
pending members.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from coordinator.clock import Clock
from coordinator.engine.dispatch import Dispatcher
from coordinator.engine.enqueue import Enqueue
from coordinator.engine.reads import decode_page_token, encode_page_token
from coordinator.engine.runner import StoreRunner
from coordinator.errors import InvalidArgument, NotFound
from coordinator.ids import is_valid_id, new_id
from coordinator.model import GroupRow, GroupStatus, JobStatus, NewJob
from coordinator.store import Store
from coordinator.telemetry.hooks import EngineTelemetry


def check_group_id(group_id: str, field: str = "group_id") -> None:
    if not group_id:
        raise InvalidArgument(f"{field} is required")
    if not is_valid_id(group_id):
        raise InvalidArgument(
            f"{field} {group_id[:80]!r} is malformed; group ids are lower-case UUIDs "
            "like 0190b6e2-5c1a-7d3e-8f00-123456789abc"
        )


class JobGroups:
    """The group operations of one engine."""

    def __init__(
        self,
        *,
        store: Store,
        run_store: StoreRunner,
        clock: Clock,
        dispatcher: Dispatcher,
        enqueue: Enqueue,
        telemetry: Callable[[], EngineTelemetry],
    ) -> None:
        self._store = store
        self._run = run_store
        self._clock = clock
        self._dispatcher = dispatcher
        # Members and completion jobs are validated as every enqueued job is.
        self._enqueue = enqueue
        self._telemetry = telemetry

    async def create(
        self,
        completion: NewJob,
        members: Sequence[NewJob],
        close: bool,
        idempotency_key: str | None = None,
    ) -> tuple[GroupRow, list[tuple[str, bool, int]], bool]:
        """Store a group (of ``completion``'s tenant) with its first members.

        Returns the group, its first members' results and whether the group
        was stored before under ``idempotency_key`` (then it is answered with
        the members it was created with, and nothing is stored)."""
        if len(members) > self._enqueue.config.max_batch_size:
            raise InvalidArgument(
                f"{len(members)} members exceed the batch limit of {self._enqueue.config.max_batch_size}; "
                "add the rest by enqueueing them with the group's id"
            )
        limit = self._enqueue.config.max_string_length
        if idempotency_key is not None and len(idempotency_key) > limit:
            raise InvalidArgument(
                f"idempotency_key is {len(idempotency_key)} characters long; the limit is {limit}"
            )
        now = self._clock.now_us()
        if completion.group_id is not None:
            raise InvalidArgument("completion.group_id: a completion job joins no group")
        try:
            self._enqueue.prepare(completion, now)
        except InvalidArgument as err:
            raise InvalidArgument(f"completion: {err}") from None
        if completion.ordering_key is not None:
            raise InvalidArgument("completion.ordering_key: a completion job has no ordering key")
        group_id = new_id()
        prepared = []
        for index, job in enumerate(members):
            job.group_id = group_id
            try:
                self._check_member(job, completion.tenant_id)
                prepared.append(self._enqueue.prepare(job, now))
            except InvalidArgument as err:
                raise InvalidArgument(f"members[{index}]: {err}") from None
        created = await self._run(
            self._store.group_create, group_id, completion, prepared, close, now, idempotency_key
        )
        if not created.deduplicated:
            self._dispatcher.wake_at(j.due_at for j in prepared)
            self._telemetry().enqueued(prepared, created.members)
        return await self.get(created.group_id), created.members, created.deduplicated

    def _check_member(self, job: NewJob, tenant_id: str) -> None:
        if job.tenant_id and job.tenant_id != tenant_id:
            raise InvalidArgument(
                f"tenant_id {job.tenant_id!r} is not the group's tenant {tenant_id!r}"
            )
        job.tenant_id = tenant_id
        if job.ordering_key is not None:
            raise InvalidArgument("a group member cannot have an ordering_key")

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[tuple[str, bool, int]]:
        """Store jobs of which some join open groups (by ``group_id``), atomically."""
        self._enqueue.check_batch_size(jobs)
        now = self._clock.now_us()
        prepared = []
        for index, job in enumerate(jobs):
            where = f"jobs[{index}]: " if len(jobs) > 1 else ""
            try:
                if job.group_id is not None:
                    check_group_id(job.group_id)
                    if job.ordering_key is not None:
                        raise InvalidArgument("a group member cannot have an ordering_key")
                prepared.append(self._enqueue.prepare(job, now))
            except InvalidArgument as err:
                raise InvalidArgument(f"{where}{err}") from None
        results = await self._run(self._store.job_insert_grouped, prepared, now)
        self._dispatcher.wake_at(j.due_at for j in prepared)
        self._telemetry().enqueued(prepared, results)
        return results

    async def get(self, group_id: str) -> GroupRow:
        check_group_id(group_id)
        row = await self._run(self._store.group_get, group_id)
        if row is None:
            raise NotFound(f"job group {group_id} not found")
        return row

    async def close(self, group_id: str) -> GroupRow:
        """Close the group: no more members; it completes once every member ended."""
        check_group_id(group_id)
        row = await self._run(self._store.group_close, group_id, self._clock.now_us())
        if row is None:
            raise NotFound(f"job group {group_id} not found")
        self._dispatcher.wake()
        return row

    async def cancel(self, group_id: str, reason: str) -> tuple[GroupRow, list[str]]:
        """Close the group and cancel its pending members (running ones run on)."""
        check_group_id(group_id)
        note = (
            f"cancelled with group {group_id}: {reason}"
            if reason
            else (f"cancelled with group {group_id}")
        )
        done = await self._run(self._store.group_cancel, group_id, note, self._clock.now_us())
        if done is None:
            raise NotFound(f"job group {group_id} not found")
        self._dispatcher.wake()
        return done

    async def list(
        self, tenant_id: str, statuses: Sequence[int], page_size: int, page_token: str
    ) -> tuple[list[GroupRow], str]:
        """One page of groups, newest first, and the token of the next ("" on the last).

        Raises:
            InvalidArgument: ``page_size`` is outside 0..1000 (0: 100), a status
                is not a group status, or ``page_token`` is not one this server issued.
        """
        if not 0 <= page_size <= 1000:
            raise InvalidArgument("page_size must be between 1 and 1000 (0 means 100)")
        known = {int(s) for s in GroupStatus}
        wrong = [s for s in statuses if s not in known]
        if wrong:
            raise InvalidArgument(
                f"statuses has {', '.join(map(str, wrong))}; group statuses are "
                + ", ".join(s.name for s in GroupStatus)
            )
        size = page_size or 100
        before = decode_page_token(page_token, newest_first=True)[1] if page_token else None
        rows = await self._run(self._store.group_list, tenant_id, statuses, before, size + 1)
        if len(rows) <= size:
            return rows, ""
        rows = rows[:size]
        return rows, encode_page_token(rows[-1].id, newest_first=True, backward=False)

    async def tenant_of(self, group_id: str) -> str | None:
        """The group's tenant (None: no such group), for tenant-scope checks."""
        try:
            check_group_id(group_id)
        except InvalidArgument:
            return None
        row = await self._run(self._store.group_get, group_id)
        return row.tenant_id if row is not None else None


def live_members(row: GroupRow) -> int:
    """Members that have not ended yet."""
    return row.counts.get(int(JobStatus.PENDING), 0) + row.counts.get(int(JobStatus.RUNNING), 0)


__all__ = ["JobGroups", "live_members"]
