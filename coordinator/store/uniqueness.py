"""Named queries of uniqueness keys: unique while, unique for a period, debounce.

A job enqueued with a uniqueness key goes through ``job_insert_unique``, never
through the plain insert: plain jobs pay nothing for the feature. The key's
row in ``wfj_unique_keys`` is the lock every enqueue of the key takes first
(PostgreSQL: the insert that creates it, or ``SELECT … FOR UPDATE`` of the
stored one; SQLite: the write lock of ``BEGIN IMMEDIATE``), so concurrent
enqueues of one key decide one after the other, each seeing what the one
before it committed. Keys of one batch are locked in (tenant, key) order, so
two batches cannot deadlock on each other's keys.

Under the key's lock the engine's rule is applied to the job the row names
(read ``FOR UPDATE``: a debounce rewrites it, and a claim skips a locked row):

- WHILE: that job in one of the rule's statuses is the answer (EXISTING);
- PERIOD: before the row's ``window_ends_at`` the job is the answer, whatever
  its state;
- DEBOUNCE: that job still PENDING and not yet due takes the new payload and
  the due time ``now + delay``, never past ``max_due_at`` (DEBOUNCED).

A job whose idempotency key names a stored job gets that job (EXISTING), the
key unchanged. A job no longer stored (retention deleted it) blocks nothing. Otherwise the
new job is stored and the row names it from then on (CREATED).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from coordinator.model import (
    JobRecord,
    JobRow,
    JobStatus,
    NewJob,
    UniqueKeyRow,
    Uniqueness,
    UniqueOutcome,
    UniqueRule,
)
from coordinator.store.base import Family, StoreCore
from coordinator.store.jobs import JobQueries
from coordinator.store.schema import jobs, unique_keys

# What a stored job's answer to a key needs: (id, status, due_at); None when
# the row names a job no longer stored.
_Current = tuple[str, int, int]


class UniqueQueries(Family):
    """Enqueue under uniqueness keys (design note above) and reads of the keys."""

    def __init__(self, core: StoreCore, jobs: JobQueries) -> None:
        super().__init__(core)
        # The jobs admitted under their keys are stored as any job is.
        self._jobs = jobs

    def job_insert_unique(
        self, new_jobs: Sequence[NewJob], uniqueness: Sequence[Uniqueness | None], now: int
    ) -> list[tuple[str, int, int]]:
        """Store ``new_jobs`` atomically, each under its uniqueness rule (None: none).

        Returns ``(job_id, UniqueOutcome, status)`` in input order; a job
        without a rule is CREATED (or EXISTING when its idempotency key names
        a stored job). The caller has set each debounced job's due time to
        ``now + delay`` (its first due time if the key admits it); a job that
        DEBOUNCED the key's job leaves with ``due_at`` the time that job moved
        to, at which the caller wakes its dispatcher.
        """
        answers: dict[int, tuple[str, int, int]] = {}
        to_store: dict[int, NewJob] = {
            i: job for i, job in enumerate(new_jobs) if uniqueness[i] is None
        }
        # Keys admitted by a job of this very batch: (index of that job).
        in_batch: dict[tuple[str, str], int] = {}
        ruled = [(i, u) for i, u in enumerate(uniqueness) if u is not None]
        ruled.sort(key=lambda ruled_job: (new_jobs[ruled_job[0]].tenant_id, ruled_job[1].key))
        order = [i for i, _ in ruled]
        new_lanes = self._jobs.lanes_unknown(new_jobs)
        with self.tx() as conn:
            if new_lanes:
                self._jobs.lane_upsert(conn, new_lanes)
            for i in order:
                job, rule = new_jobs[i], uniqueness[i]
                assert rule is not None
                ident = (job.tenant_id, rule.key)
                if ident in in_batch:
                    first = new_jobs[in_batch[ident]]
                    current: _Current | None = (first.id, int(JobStatus.PENDING), first.due_at)
                    key_row = None
                else:
                    key_row = self._unique_key_lock(conn, job, rule, now)
                    if key_row is None:  # the key was free: this job is its first
                        in_batch[ident] = i
                        to_store[i] = job
                        continue
                    keyed = self._unique_keyed_job(conn, job)
                    if keyed is not None:  # its idempotency key names a stored job
                        answers[i] = (keyed[0], int(UniqueOutcome.EXISTING), keyed[1])
                        continue
                    current = self._unique_current(conn, key_row.job_id)
                decision = _decide(rule, key_row, current, now)
                if decision == UniqueOutcome.EXISTING:
                    assert current is not None
                    answers[i] = (current[0], int(UniqueOutcome.EXISTING), current[1])
                elif decision == UniqueOutcome.DEBOUNCED:
                    assert current is not None
                    due = _debounced_due(rule, key_row, new_jobs, in_batch, ident, now)
                    job.due_at = due  # the caller wakes at the due time the key's job moved to
                    if ident in in_batch:
                        first = new_jobs[in_batch[ident]]
                        first.payload, first.content_type = job.payload, job.content_type
                        first.due_at = due
                    else:
                        self._unique_debounce(conn, ident, current[0], job, due, now)
                    answers[i] = (current[0], int(UniqueOutcome.DEBOUNCED), current[1])
                else:
                    self._unique_key_point(conn, job, rule, now)
                    in_batch[ident] = i
                    to_store[i] = job
            stored_order = sorted(to_store)
            results: list[tuple[str, bool, int]] = []
            if stored_order:
                batch = [to_store[i] for i in stored_order]
                with_keys = any(j.idempotency_key for j in batch)
                results = self._jobs.insert_in(conn, batch, with_keys, None)
            # What each job stored by this call became: (its answer id, status).
            became: dict[str, tuple[str, int]] = {}
            for i, (job_id, deduplicated, status) in zip(stored_order, results, strict=True):
                rule = uniqueness[i]
                if deduplicated and rule is not None:
                    # Its idempotency key named a stored job: the key names that one.
                    conn.execute(
                        unique_keys.update()
                        .where(
                            unique_keys.c.tenant_id == new_jobs[i].tenant_id,
                            unique_keys.c.unique_key == rule.key,
                        )
                        .values(job_id=job_id)
                    )
                outcome = UniqueOutcome.EXISTING if deduplicated else UniqueOutcome.CREATED
                answers[i] = (job_id, int(outcome), status)
                became[new_jobs[i].id] = (job_id, status)
            # A repeat of a key inside the batch answers with what its first became.
            for i, (job_id, answered, _) in list(answers.items()):
                if job_id in became and i not in to_store:
                    answers[i] = (became[job_id][0], answered, became[job_id][1])
        self._jobs.lanes_stored(new_lanes)
        return [answers[i] for i in range(len(new_jobs))]

    def _unique_key_lock(
        self, conn: sa.Connection, job: NewJob, rule: Uniqueness, now: int
    ) -> UniqueKeyRow | None:
        """Create the key's row naming ``job`` (None), or lock and return the stored one.

        A row that retention deletes between the two statements (the INSERT
        saw it, the lock finds it gone) leaves the key free: the INSERT is
        tried again, and creates the row unless another enqueue did first.
        """
        while True:
            created = conn.execute(
                self._insert(unique_keys)
                .values(_key_values(job, rule, now))
                .on_conflict_do_nothing(
                    index_elements=[unique_keys.c.tenant_id, unique_keys.c.unique_key]
                )
                .returning(unique_keys.c.job_id)
            ).first()
            if created is not None:
                return None
            row = conn.execute(
                sa.select(unique_keys)
                .where(
                    unique_keys.c.tenant_id == job.tenant_id, unique_keys.c.unique_key == rule.key
                )
                .with_for_update()
            ).first()
            if row is not None:
                return UniqueKeyRow(*row)

    def _unique_keyed_job(self, conn: sa.Connection, job: NewJob) -> tuple[str, int] | None:
        """(id, status) of the job stored under ``job``'s idempotency key, if any."""
        if not job.idempotency_key:
            return None
        row = conn.execute(
            sa.select(jobs.c.id, jobs.c.status).where(
                jobs.c.tenant_id == job.tenant_id, jobs.c.idempotency_key == job.idempotency_key
            )
        ).first()
        return (row.id, row.status) if row is not None else None

    def job_get_by_idempotency_key(self, tenant_id: str, key: str) -> JobRow | None:
        """The job stored under (tenant, idempotency key), or None."""
        with self.statement() as conn:
            row = conn.execute(
                sa.select(jobs).where(jobs.c.tenant_id == tenant_id, jobs.c.idempotency_key == key)
            ).first()
            return JobRecord(*row) if row is not None else None

    def _unique_current(self, conn: sa.Connection, job_id: str) -> _Current | None:
        row = conn.execute(
            sa.select(jobs.c.id, jobs.c.status, jobs.c.due_at)
            .where(jobs.c.id == job_id)
            .with_for_update()
        ).first()
        return (row.id, row.status, row.due_at) if row is not None else None

    def _unique_key_point(
        self, conn: sa.Connection, job: NewJob, rule: Uniqueness, now: int
    ) -> None:
        """Make the key's row name ``job``, with its rule's fresh state."""
        values = _key_values(job, rule, now)
        conn.execute(
            unique_keys.update()
            .where(unique_keys.c.tenant_id == job.tenant_id, unique_keys.c.unique_key == rule.key)
            .values({k: v for k, v in values.items() if k not in ("tenant_id", "unique_key")})
        )

    def _unique_debounce(
        self,
        conn: sa.Connection,
        ident: tuple[str, str],
        job_id: str,
        job: NewJob,
        due: int,
        now: int,
    ) -> None:
        """Give the key's pending job ``job``'s payload and the due time ``due``
        (every replica is told the job becomes eligible then)."""
        conn.execute(
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.status == int(JobStatus.PENDING))
            .values(payload=job.payload, content_type=job.content_type, due_at=due)
        )
        self._notify_wake(conn, due)
        conn.execute(
            unique_keys.update()
            .where(unique_keys.c.tenant_id == ident[0], unique_keys.c.unique_key == ident[1])
            .values(debounced=unique_keys.c.debounced + 1, debounced_at=now)
        )

    def unique_key_of_job(self, job_id: str) -> UniqueKeyRow | None:
        """The uniqueness key that names ``job_id``, if any."""
        with self.statement() as conn:
            row = conn.execute(
                sa.select(unique_keys).where(unique_keys.c.job_id == job_id).limit(1)
            ).first()
            return UniqueKeyRow(*row) if row is not None else None


def _key_values(job: NewJob, rule: Uniqueness, now: int) -> dict[str, Any]:
    """The key row of ``job`` admitted under ``rule`` at ``now``."""
    return {
        "tenant_id": job.tenant_id,
        "unique_key": rule.key,
        "job_id": job.id,
        "rule": int(rule.rule),
        "admitted_at": now,
        "window_ends_at": now + rule.period_us if rule.rule == UniqueRule.PERIOD else None,
        "debounced": 0,
        "debounced_at": None,
        "max_due_at": (
            now + rule.max_wait_us
            if rule.rule == UniqueRule.DEBOUNCE and rule.max_wait_us
            else None
        ),
    }


def _decide(
    rule: Uniqueness, key_row: UniqueKeyRow | None, current: _Current | None, now: int
) -> UniqueOutcome:
    """What the key's state says of a new enqueue (CREATED: store the new job)."""
    if current is None:  # deleted (retention): nothing of the key is left to block
        return UniqueOutcome.CREATED
    _, status, due_at = current
    if rule.rule == UniqueRule.PERIOD:
        # Admitted by this batch (no stored row yet): its window has just begun.
        ends = key_row.window_ends_at if key_row is not None else None
        if key_row is None or (ends is not None and now < ends):
            return UniqueOutcome.EXISTING
        return UniqueOutcome.CREATED
    if rule.rule == UniqueRule.DEBOUNCE:
        if status == JobStatus.PENDING and due_at > now:
            return UniqueOutcome.DEBOUNCED
        return UniqueOutcome.CREATED
    return UniqueOutcome.EXISTING if status in rule.statuses else UniqueOutcome.CREATED


def _debounced_due(
    rule: Uniqueness,
    key_row: UniqueKeyRow | None,
    new_jobs: Sequence[NewJob],
    in_batch: dict[tuple[str, str], int],
    ident: tuple[str, str],
    now: int,
) -> int:
    """The due time a debounce moves the key's job to: ``now + delay``, bounded."""
    due = now + rule.delay_us
    if key_row is not None:
        bound = key_row.max_due_at
    else:
        first = new_jobs[in_batch[ident]]
        bound = first.created_at + rule.max_wait_us if rule.max_wait_us else None
    return min(due, bound) if bound is not None else due


__all__ = ["UniqueQueries"]
