"""Ordering keys: jobs of one tenant and ``ordering_key`` run one at a time, in enqueue order.

Design note. A key's *live* jobs are its RUNNING and PENDING jobs and its
FAULTED jobs with the blocking policy (``ordering_skip_failed`` false). Only a
key's head is a candidate for acquisition: every other PENDING job of the key
is stored *held* (``ordering_held``), which keeps it out of the ready index
(``schema.READY_JOB``), so finding a job to lease never walks past a key's
queue, however long it is. The rules:

- Enqueue (and replay, and an operator retry of an ended job) stores a job of
  a key held when the key already has a live job that is not held
  (``key_busy``), or when an earlier job of the same batch has the key.
- Every transaction that ends a live job of a key (completed, cancelled,
  FAULTED with the skip policy, purged) then releases the key's first held
  job, unless the key still has a live job that is not held
  (``release_next``). A job is never held while nothing of its key could
  release it: a held job's key always has a live job that is not held.

Enqueue order is ``ordering_seq``, a number the database gives each job as
it is stored (a sequence on PostgreSQL, a trigger on SQLite; migration 0018),
never the job's id: ids are UUIDv7 from the enqueuing replica's host clock,
and a replica whose clock is behind would put a later job first. An enqueue
takes its keys' locks before it inserts, so within a key the numbers follow
commit order; an operator retry keeps the job's number (its place in the key).

Every statement that leases also re-checks ``ordering_allows`` (not held, no
RUNNING job of the key, no earlier live job of the key that is not held), so
a stale candidate list cannot lease a job behind its key on any replica, and
two jobs of a key left unheld by concurrent enqueues still run one at a time.
The candidate reads (``job_candidates``, the ``cand`` part of
``job_claim_fair``) leave the check to that re-check and rely on the ready
index alone, which holds only heads but for such a race: with the check's
subqueries in the candidate read, PostgreSQL's planner cannot tell how many
rows they keep and reads and sorts a lane's whole ready set instead of
walking the index to its LIMIT (about 10× slower with 10,000 keys). A
candidate behind its key takes a pick that its lease then refuses.

Races. On PostgreSQL every transaction that decides or changes whether a
key's job is held takes the key's transaction advisory lock (``lock_keys``)
before it reads the key, in a statement of its own (under READ COMMITTED the
next statement then sees everything the previous holder committed): an
enqueue that finds the head RUNNING and stores its job held, and the
completion of that head, are serialised, so the completion's release sees the
held job, or the enqueue sees the head ended and stores its job unheld. Locks
are taken in one sorted statement per transaction. Transactions that end a
job they address by id (completion, ended attempts, unlock, operator retry,
purge) lock the job's row first and the key after; those that only change
PENDING jobs (enqueue, cancel, bulk cancel, replay) take the key first (a
cancel requested for a RUNNING job takes no key lock, in a transaction of
its own). A transaction holding a key's lock then waits only for rows of
PENDING jobs, which no transaction of the first kind holds while it waits
for a key, so the two orders cannot deadlock. SQLite runs one writing
transaction at a time.

The probes use small partial indexes keyed by (tenant, key[, ordering_seq]):
``ix_wfj_jobs_ordering_running`` (RUNNING rows), ``ix_wfj_jobs_ordering_ahead``
(PENDING and FAULTED rows not held) and ``ix_wfj_jobs_ordering_held``. Where
an EXISTS over RUNNING jobs sits under OR or NOT, PostgreSQL runs it as one
hashed scan of the RUNNING rows per statement rather than a probe per key.
That is the cheaper plan here: a probe per key (forced with ``OFFSET 0``)
walks every dead entry its key's earlier jobs left in the index, and halved
the keyed throughput of the ``ordering`` bench figure (a few hundred keys
each run dozens of jobs there between vacuums).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from coordinator.model import JobStatus
from coordinator.store.base import Family, driver_sql
from coordinator.store.rows import OrderingBlockerRow

_RUNNING = int(JobStatus.RUNNING)
_PENDING = int(JobStatus.PENDING)
_FAULTED = int(JobStatus.FAULTED)

# The class of the key locks (two-integer advisory locks, apart from the
# one-integer locks of chores and limits).
_LOCK_CLASS = 0x0F0D

# (tenant id, ordering key)
Key = tuple[str, str]


def _live_unheld(tenant: str, key: str, exclude: str | None = None) -> str:
    """SQL true when the key has a live job that is not held (other than ``exclude``)."""
    other = f" AND {{a}}.id <> {exclude}" if exclude else ""
    running = (
        f"EXISTS (SELECT 1 FROM wfj_jobs r WHERE r.tenant_id = {tenant} "
        f"AND r.ordering_key = {key} AND r.status = {_RUNNING}{other.format(a='r')})"
    )
    waiting = (
        f"EXISTS (SELECT 1 FROM wfj_jobs w WHERE w.tenant_id = {tenant} "
        f"AND w.ordering_key = {key} AND w.status IN ({_PENDING}, {_FAULTED}) "
        f"AND NOT w.ordering_held AND NOT (w.status = {_FAULTED} AND w.ordering_skip_failed)"
        f"{other.format(a='w')})"
    )
    return f"({running} OR {waiting})"


def ordering_allows(alias: str) -> str:
    """SQL true when the job row ``alias`` is not held back by its ordering key."""
    return (
        f"(NOT {alias}.ordering_held AND ({alias}.ordering_key IS NULL OR ("
        f"NOT EXISTS (SELECT 1 FROM wfj_jobs o1 WHERE o1.tenant_id = {alias}.tenant_id "
        f"AND o1.ordering_key = {alias}.ordering_key AND o1.status = {_RUNNING}) "
        f"AND NOT EXISTS (SELECT 1 FROM wfj_jobs o2 WHERE o2.tenant_id = {alias}.tenant_id "
        f"AND o2.ordering_key = {alias}.ordering_key AND o2.ordering_seq < {alias}.ordering_seq "
        f"AND o2.status IN ({_PENDING}, {_FAULTED}) AND NOT o2.ordering_held "
        f"AND NOT (o2.status = {_FAULTED} AND o2.ordering_skip_failed)))))"
    )


def key_busy(alias: str, *, other_than_self: bool) -> str:
    """SQL true when the job row ``alias`` would be stored held: it has an
    ordering key with a live job that is not held (other than itself when
    ``other_than_self``)."""
    live = _live_unheld(
        f"{alias}.tenant_id",
        f"{alias}.ordering_key",
        f"{alias}.id" if other_than_self else None,
    )
    return f"({alias}.ordering_key IS NOT NULL AND {live})"


def key_locks_sql(source: str, tenant: str = "tenant_id", key: str = "ordering_key") -> str:
    """SQL taking the transaction advisory lock of the key of each row of
    ``source`` that has one (PostgreSQL), in hash order: one row per lock."""
    return (
        f"SELECT pg_advisory_xact_lock({_LOCK_CLASS}, h) FROM ("
        f"SELECT DISTINCT hashtext({tenant} || chr(31) || {key}) AS h FROM {source} "
        f"WHERE {key} IS NOT NULL ORDER BY h) s"
    )


def lock_keys(conn: sa.Connection, is_postgres: bool, keys: Iterable[Key]) -> None:
    """Take the transaction advisory lock of each key (PostgreSQL), in hash order."""
    wanted = sorted(set(keys))
    if not is_postgres or not wanted:
        return
    source = "unnest(CAST(:tenants AS text[]), CAST(:keys AS text[])) AS u(t, k)"
    conn.exec_driver_sql(
        driver_sql(key_locks_sql(source, "t", "k")),
        {"tenants": [t for t, _ in wanted], "keys": [k for _, k in wanted]},
    )


def busy_keys(conn: sa.Connection, is_postgres: bool, keys: Iterable[Key]) -> set[Key]:
    """Of ``keys``, those with a live job that is not held (a new job would be held)."""
    wanted = sorted(set(keys))
    if not wanted:
        return set()
    if is_postgres:
        sql = (
            "SELECT u.t, u.k FROM unnest(CAST(:tenants AS text[]), CAST(:keys AS text[])) "
            f"AS u(t, k) WHERE {_live_unheld('u.t', 'u.k')}"
        )
        params = {"tenants": [t for t, _ in wanted], "keys": [k for _, k in wanted]}
        return {(t, k) for t, k in conn.exec_driver_sql(driver_sql(sql), params)}
    probe = sa.text(f"SELECT {_live_unheld(':t', ':k')}")
    return {(t, k) for t, k in wanted if conn.execute(probe, {"t": t, "k": k}).scalar()}


def release_next(conn: sa.Connection, is_postgres: bool, keys: Iterable[Key]) -> list[int]:
    """Release the first held job of each of ``keys`` that has no live job left
    that is not held; returns the released jobs' due times (to wake acquisition).

    Call it after a job of the key ended, in the same transaction, holding the
    key's lock (``lock_keys``). A key whose head is still live is left as it is.
    """
    wanted = sorted(set(keys))
    if not wanted:
        return []
    first_held = (
        "(SELECT h.id FROM wfj_jobs h WHERE h.tenant_id = {t} AND h.ordering_key = {k} "
        "AND h.ordering_held ORDER BY h.ordering_seq LIMIT 1)"
    )
    if is_postgres:
        sql = (
            "UPDATE wfj_jobs j SET ordering_held = false FROM ("
            f"SELECT {first_held.format(t='u.t', k='u.k')} AS id "
            "FROM unnest(CAST(:tenants AS text[]), CAST(:keys AS text[])) AS u(t, k) "
            f"WHERE NOT {_live_unheld('u.t', 'u.k')}) n "
            "WHERE j.id = n.id AND j.ordering_held RETURNING j.due_at"
        )
        params = {"tenants": [t for t, _ in wanted], "keys": [k for _, k in wanted]}
        return [due for (due,) in conn.exec_driver_sql(driver_sql(sql), params)]
    statement = sa.text(
        f"UPDATE wfj_jobs SET ordering_held = 0 WHERE id = {first_held.format(t=':t', k=':k')} "
        f"AND NOT {_live_unheld(':t', ':k')} RETURNING due_at"
    )
    out: list[int] = []
    for t, k in wanted:
        out.extend(due for (due,) in conn.execute(statement, {"t": t, "k": k}))
    return out


class OrderingQueries(Family):
    """Reads over the jobs of an ordering key."""

    def job_ordering_blocker(
        self, tenant_id: str, ordering_key: str, job_id: str
    ) -> OrderingBlockerRow | None:
        """The job that holds ``job_id`` back in its key: the key's RUNNING job,
        else its first live job that is not held and, unless ``job_id`` is held
        itself, comes before it; None when none does. A row of (id, status)."""
        running = sa.text(
            f"SELECT id, status FROM wfj_jobs WHERE tenant_id = :tenant AND ordering_key = :key "
            f"AND status = {_RUNNING} AND id <> :id LIMIT 1"
        )
        ahead = sa.text(
            f"SELECT id, status FROM wfj_jobs WHERE tenant_id = :tenant AND ordering_key = :key "
            f"AND id <> :id AND (ordering_seq < :seq OR :held) "
            f"AND status IN ({_PENDING}, {_FAULTED}) "
            f"AND NOT ordering_held AND NOT (status = {_FAULTED} AND ordering_skip_failed) "
            "ORDER BY ordering_seq LIMIT 1"
        )
        own = sa.text("SELECT ordering_held, ordering_seq FROM wfj_jobs WHERE id = :id")
        params: dict[str, Any] = {"tenant": tenant_id, "key": ordering_key, "id": job_id}
        with self.tx() as conn:
            row = conn.execute(own, params).first()
            params["held"] = bool(row is not None and row.ordering_held)
            params["seq"] = row.ordering_seq if row is not None else None
            return conn.execute(running, params).first() or conn.execute(ahead, params).first()
