"""Named queries of job groups: fan-in with a completion job enqueued exactly once.

A group (``wfj_groups``) is OPEN while members may join (a job joins by its
``group_id``), CLOSED once no more may, and COMPLETED when its completion job
is stored. The completion job is stored in the transaction that ends the last
member (or closes a group whose members have all ended), never elsewhere:

- every transaction that ends a member (completion, failure, expiry, cancel)
  locks the member's group row ``FOR UPDATE`` after its own writes, then, in
  a new statement, looks for members that have not ended. Under PostgreSQL's
  READ COMMITTED that statement sees every member ended by a transaction that
  held the lock before, so of two replicas ending the last two members at
  once the second to take the lock sees both ended and stores the completion;
  the first saw the other member still running and did nothing;
- joining an open group takes the group row ``FOR SHARE`` and checks it is
  OPEN, so a close (``FOR UPDATE``) waits for joins in flight and a join after
  it is refused;
- the completion is stored with the idempotency key ``group:<id>:completion``
  and the group row's ``completion_job_id`` is set with the status COMPLETED
  in the same transaction: a group completes once.

Groups of one transaction are locked in id order. Jobs without a group never
touch ``wfj_groups``: the outcome statements return ``group_id`` and only the
ends of members come here.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa

from coordinator.errors import FailedPrecondition, NotFound
from coordinator.ids import new_id
from coordinator.model import (
    FINISHED_STATUSES,
    LIVE_STATUSES,
    GroupRow,
    GroupStatus,
    JobEventKind,
    JobStatus,
    NewJob,
)
from coordinator.store.base import Family, StoreCore
from coordinator.store.events import EventEntry
from coordinator.store.job_end import Ended, JobEnd
from coordinator.store.jobs import JobQueries
from coordinator.store.schema import groups, jobs

# Most member contexts a completion job links to (OpenTelemetry's default
# limit of links per span).
MAX_TRACE_LINKS = 128


def completion_key(group_id: str) -> str:
    """The idempotency key of a group's completion job."""
    return f"group:{group_id}:completion"


def _completion_text(job: NewJob) -> str:
    data = dataclasses.asdict(job)
    data["payload"] = base64.b64encode(job.payload).decode()
    return json.dumps(data, separators=(",", ":"))


def _completion_job(text: str) -> NewJob:
    data = json.loads(text)
    data["payload"] = base64.b64decode(data["payload"])
    return NewJob(**data)


class GroupCreated(NamedTuple):
    """What ``group_create`` stored, or found under the idempotency key."""

    group_id: str
    # The members' (id, deduplicated, status), in request order.
    members: list[tuple[str, bool, int]]
    # True: a group of the key was stored before; nothing was stored now.
    deduplicated: bool


class GroupQueries(Family):
    """Job groups (design note above)."""

    def __init__(self, core: StoreCore, jobs: JobQueries, job_end: JobEnd) -> None:
        super().__init__(core)
        # Members and completion jobs are stored as any job is.
        self._jobs = jobs
        self._jobs_ended = job_end.jobs_ended
        # Called (in the store's thread) when a completion job was stored, on a
        # store whose replicas hear no NOTIFY (SQLite): the engine wakes itself.
        self._completion_listener: Callable[[], None] | None = None

    def set_completion_listener(self, listener: Callable[[], None] | None) -> None:
        """Call ``listener`` whenever a group's completion job is stored."""
        self._completion_listener = listener

    def group_create(
        self,
        group_id: str,
        completion: NewJob,
        members: Sequence[NewJob],
        close: bool,
        now: int,
        idempotency_key: str | None = None,
    ) -> GroupCreated:
        """Store a group, its completion job's template and its first members, atomically.

        With ``close`` the group is closed at once; a closed group whose
        members have all ended (none given, say) completes in this very
        transaction. A group of the tenant already stored under
        ``idempotency_key`` is answered instead (``deduplicated``), with the
        members it was created with, and nothing is stored. A member whose
        idempotency key names a job outside the group is refused
        (FailedPrecondition), and nothing is stored.
        """
        for member in members:
            member.group_id = group_id
        with self.tx() as conn:
            stored = conn.execute(
                self._insert(groups)
                .values(
                    id=group_id,
                    tenant_id=completion.tenant_id,
                    status=int(GroupStatus.CLOSED if close else GroupStatus.OPEN),
                    completion=_completion_text(completion),
                    created_at=now,
                    closed_at=now if close else None,
                    idempotency_key=idempotency_key,
                    member_ids=(
                        json.dumps([m.id for m in members]) if idempotency_key is not None else None
                    ),
                )
                .on_conflict_do_nothing(
                    index_elements=[groups.c.tenant_id, groups.c.idempotency_key],
                    index_where=groups.c.idempotency_key.isnot(None),
                )
                .returning(groups.c.id)
            ).first()
            if stored is None:
                return self._group_by_key(conn, completion.tenant_id, idempotency_key)
            result = (
                self._insert_members(conn, members, lambda i: f"members[{i}]: ") if members else []
            )
            if close:
                self._jobs_ended(conn, Ended(groups={group_id}), now)
        return GroupCreated(group_id, result, False)

    def _group_by_key(
        self, conn: sa.Connection, tenant_id: str, idempotency_key: str | None
    ) -> GroupCreated:
        """The group stored under the key, with the members it was created with
        (a member since deleted by retention is answered with status 0, unknown)."""
        row = conn.execute(
            sa.select(groups.c.id, groups.c.member_ids).where(
                groups.c.tenant_id == tenant_id, groups.c.idempotency_key == idempotency_key
            )
        ).one()
        ids: list[str] = json.loads(row.member_ids or "[]")
        status = {
            job_id: status
            for job_id, status in conn.execute(
                sa.select(jobs.c.id, jobs.c.status).where(jobs.c.id.in_(ids))
            )
        }
        return GroupCreated(row.id, [(i, True, int(status.get(i, 0))) for i in ids], True)

    def job_insert_grouped(
        self, new_jobs: Sequence[NewJob], now: int
    ) -> list[tuple[str, bool, int]]:
        """Store jobs of which some join groups: each group must be OPEN and the
        job's tenant the group's (else nothing is stored). A job of the batch
        with an ordering key is held behind its key as by ``job_insert_many``;
        the keys are locked before the groups, the order a job's end takes."""
        with self.tx() as conn:
            keys = self._jobs.hold_behind_keys(conn, new_jobs)
            wanted = sorted({j.group_id for j in new_jobs if j.group_id is not None})
            found = {
                r.id: r
                for r in conn.execute(
                    sa.select(groups.c.id, groups.c.tenant_id, groups.c.status)
                    .where(groups.c.id.in_(wanted))
                    .order_by(groups.c.id)
                    .with_for_update(read=True)
                )
            }
            for index, job in enumerate(new_jobs):
                if job.group_id is None:
                    continue
                where = f"jobs[{index}]: " if len(new_jobs) > 1 else ""
                group = found.get(job.group_id)
                if group is None or group.tenant_id != job.tenant_id:
                    raise NotFound(f"{where}job group {job.group_id} not found")
                if group.status != GroupStatus.OPEN:
                    raise FailedPrecondition(
                        f"{where}job group {job.group_id} is {GroupStatus(group.status).name}: "
                        "it takes no more members (create another group)"
                    )
            result = self._insert_members(
                conn, new_jobs, lambda i: f"jobs[{i}]: " if len(new_jobs) > 1 else ""
            )
            if keys and any(j.idempotency_key for j in new_jobs):
                # A job held behind one of the batch that was deduplicated (not
                # stored) may have nothing live ahead of it.
                self._jobs_ended(conn, Ended(keys=keys), None, keys_locked=True)
            return result

    def _insert_members(
        self, conn: sa.Connection, new_jobs: Sequence[NewJob], where: Callable[[int], str]
    ) -> list[tuple[str, bool, int]]:
        """Store jobs (members, or a completion job); a member deduplicated by its
        idempotency key to a job that is not a member of its group is refused,
        so a group never counts without a job its caller gave it."""
        result = self._jobs.insert_with_lanes(conn, new_jobs)
        deduplicated = {
            job_id: job for job, (job_id, dedup, _) in zip(new_jobs, result, strict=True) if dedup
        }
        if any(job.group_id is not None for job in deduplicated.values()):
            self._check_deduplicated_members(conn, new_jobs, result, deduplicated, where)
        return result

    def _check_deduplicated_members(
        self,
        conn: sa.Connection,
        new_jobs: Sequence[NewJob],
        result: Sequence[tuple[str, bool, int]],
        deduplicated: dict[str, NewJob],
        where: Callable[[int], str],
    ) -> None:
        found = {
            job_id: group_id
            for job_id, group_id in conn.execute(
                sa.select(jobs.c.id, jobs.c.group_id).where(jobs.c.id.in_(sorted(deduplicated)))
            )
        }
        for index, (job, (job_id, dedup, _)) in enumerate(zip(new_jobs, result, strict=True)):
            if not dedup or job.group_id is None or found.get(job_id, job.group_id) == job.group_id:
                continue
            raise FailedPrecondition(
                f"{where(index)}idempotency key {job.idempotency_key!r} already names job "
                f"{job_id}, which is not a member of job group {job.group_id}; give the member "
                "a key of its own (to retry CreateGroup, give the group an idempotency_key)"
            )

    def group_close(self, group_id: str, now: int) -> GroupRow | None:
        """Close an OPEN group (a closed or completed one is left as it is); a group
        whose members have all ended completes now. None: no such group."""
        with self.tx() as conn:
            row = conn.execute(
                sa.select(groups.c.status).where(groups.c.id == group_id).with_for_update()
            ).first()
            if row is None:
                return None
            if row.status == GroupStatus.OPEN:
                conn.execute(
                    groups.update()
                    .where(groups.c.id == group_id)
                    .values(status=int(GroupStatus.CLOSED), closed_at=now)
                )
                self._jobs_ended(conn, Ended(groups={group_id}), now)
            return self._group_read(conn, group_id)

    def group_cancel(
        self, group_id: str, reason: str, now: int
    ) -> tuple[GroupRow, list[str]] | None:
        """Close the group and cancel its PENDING members; returns the group and
        the ids cancelled (None: no such group). Running members run on; the
        completion follows once they end (now, when none runs).

        The close commits first, so no member joins after it; the members are
        then locked before the group, the order every member's end takes.
        """
        if self.group_close(group_id, now) is None:
            return None
        with self.tx() as conn:
            # One statement by group id, however many members: the members are
            # locked in id order (PostgreSQL) and no id list is sent.
            pending = (
                sa.select(jobs.c.id)
                .where(jobs.c.group_id == group_id, jobs.c.status == int(JobStatus.PENDING))
                .order_by(jobs.c.id)
                .with_for_update()
            )
            cancelled: list[str] = list(
                conn.execute(
                    jobs.update()
                    .where(
                        jobs.c.id.in_(pending.scalar_subquery()),
                        jobs.c.status == int(JobStatus.PENDING),
                    )
                    .values(
                        status=int(JobStatus.CANCELLED),
                        finished_at=now,
                        last_error=reason,
                        last_error_kind="Cancelled",
                        cancel_reason=reason,
                    )
                    .returning(jobs.c.id)
                ).scalars()
            )
            if cancelled:
                # A group's members have no ordering key (engine/groups.py).
                self._jobs_ended(
                    conn,
                    Ended(groups={group_id}),
                    now,
                    events=[
                        EventEntry(i, JobEventKind.CANCELLED, reason, "Cancelled")
                        for i in cancelled
                    ],
                    bump=True,
                )
            group = self._group_read(conn, group_id)
            assert group is not None
            return group, sorted(cancelled)

    def group_get(self, group_id: str) -> GroupRow | None:
        with self.statement() as conn:
            return self._group_read(conn, group_id)

    def group_list(
        self, tenant_id: str, statuses: Collection[int], before_id: str | None, limit: int
    ) -> list[GroupRow]:
        """Groups newest first (ids are in creation order), before ``before_id``,
        of one tenant (empty: every tenant) and in ``statuses`` (empty: any),
        each with its members counted by status (one grouped read per page)."""
        query = sa.select(groups).order_by(groups.c.id.desc()).limit(limit)
        if tenant_id:
            query = query.where(groups.c.tenant_id == tenant_id)
        if statuses:
            query = query.where(groups.c.status.in_([int(s) for s in statuses]))
        if before_id:
            query = query.where(groups.c.id < before_id)
        with self.statement() as conn:
            rows = list(conn.execute(query))
            return self._groups_counted(conn, rows)

    def _group_read(self, conn: sa.Connection, group_id: str) -> GroupRow | None:
        row = conn.execute(sa.select(groups).where(groups.c.id == group_id)).first()
        return self._groups_counted(conn, [row])[0] if row is not None else None

    def _groups_counted(self, conn: sa.Connection, rows: Sequence[Any]) -> list[GroupRow]:
        """The group rows as ``GroupRow``, their members counted by status."""
        counts: dict[str, dict[int, int]] = {r.id: {} for r in rows}
        if rows:
            for group_id, status, n in conn.execute(
                sa.select(jobs.c.group_id, jobs.c.status, sa.func.count())
                .where(jobs.c.group_id.in_(list(counts)))
                .group_by(jobs.c.group_id, jobs.c.status)
            ):
                counts[group_id][int(status)] = int(n)
        return [
            GroupRow(
                row.id,
                row.tenant_id,
                GroupStatus(row.status),
                row.completion_job_id,
                row.created_at,
                row.closed_at,
                row.completed_at,
                counts[row.id],
            )
            for row in rows
        ]

    def groups_after_end(
        self,
        conn: sa.Connection,
        group_ids: Collection[str],
        now: int,
    ) -> list[str]:
        """Members of ``group_ids`` ended (or the groups closed) in this
        transaction: store the completion of each closed group none of whose
        members is left. Returns the completion jobs stored. Called by
        ``JobEnd.jobs_ended`` alone."""
        stored: list[str] = []
        for group_id in sorted(group_ids):
            row = conn.execute(
                sa.select(groups).where(groups.c.id == group_id).with_for_update()
            ).first()
            if row is None or row.status != GroupStatus.CLOSED:
                continue
            live = conn.execute(
                sa.select(jobs.c.id)
                .where(
                    jobs.c.group_id == group_id, jobs.c.status.in_([int(s) for s in LIVE_STATUSES])
                )
                .limit(1)
            ).first()
            if live is not None:
                continue
            stored.append(self._group_complete(conn, row, now))
        if stored and self._completion_listener is not None:
            self._completion_listener()
        return stored

    def _member_trace_links(self, conn: sa.Connection, group_id: str) -> str | None:
        """The members' enqueue contexts the completion job's spans link to (the
        first ``MAX_TRACE_LINKS`` by id), as JSON; None when no member had one."""
        links = list(
            conn.execute(
                sa.select(jobs.c.traceparent)
                .where(jobs.c.group_id == group_id, jobs.c.traceparent != "")
                .order_by(jobs.c.id)
                .limit(MAX_TRACE_LINKS)
            ).scalars()
        )
        return json.dumps(links) if links else None

    def _group_complete(self, conn: sa.Connection, row: Any, now: int) -> str:
        """Store the group's completion job and mark the group COMPLETED."""
        counts = {
            JobStatus(int(status)).name.lower(): int(n)
            for status, n in conn.execute(
                sa.select(jobs.c.status, sa.func.count())
                .where(jobs.c.group_id == row.id)
                .group_by(jobs.c.status)
            )
        }
        job = _completion_job(row.completion)
        job.id = new_id()
        job.created_at = now
        job.due_at = max(job.due_at, now)
        job.idempotency_key = completion_key(row.id)
        job.trace_links = self._member_trace_links(conn, row.id)
        if not job.payload:
            summary = {
                "group_id": row.id,
                "total": sum(counts.values()),
                **{s.name.lower(): counts.get(s.name.lower(), 0) for s in FINISHED_STATUSES},
            }
            job.payload = json.dumps(summary, separators=(",", ":")).encode()
            job.content_type = "application/json"
        [(job_id, _, _)] = self._insert_members(conn, [job], lambda i: "")
        conn.execute(
            groups.update()
            .where(groups.c.id == row.id)
            .values(status=int(GroupStatus.COMPLETED), completion_job_id=job_id, completed_at=now)
        )
        return job_id


__all__ = ["GroupCreated", "GroupQueries", "completion_key"]
