"""Named queries over per-scope settings: concurrency limits (and the limit
gate), tenant weights and job type defaults."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

import sqlalchemy as sa

from coordinator.model import (
    Claim,
    JobStatus,
    LimitKind,
)
from coordinator.store.base import Family
from coordinator.store.rows import ConcurrencyLimitRow, JobTypeDefaultsRow, RateLimitRow
from coordinator.store.schema import (
    category_weights as category_weight_rows,
)
from coordinator.store.schema import (
    cluster_flags,
    concurrency_limits,
    job_type_defaults,
    rate_buckets,
    rate_limits,
    tenants,
)

log = logging.getLogger(__name__)


# The limit gate (PostgreSQL): a cluster flag row holding how many concurrency
# and rate limits are stored. Every claim reads it under a share row lock (the
# one-statement claim leases only while it says "0"; the counting claim reads
# the stored limits after it); ``limit_set`` locks it for update and rewrites
# it in the transaction that changes a limit (``rate_limit_set`` likewise). So a claim either finishes
# before a limit change commits, or waits for the change and sees it (READ
# COMMITTED re-reads a row locked by a committed writer): once ``SetLimit``
# returns, no replica can lease past the new limit, whether or not it has
# reloaded its own copy of the limits yet.
LIMIT_GATE = "wfj.concurrency_limits"


LIMIT_GATE_SHARE_SQL = "SELECT value FROM wfj_cluster_flags WHERE name = :gate FOR KEY SHARE"


# The SQL expression over a job row whose text value each concurrency limit
# kind counts running jobs by (the engine's ``scope_value`` gives the same
# value for a candidate). Adding a limit scope is a ``LimitKind`` member, its
# entry here and its case in ``scope_value``.
LIMIT_COLUMNS: dict[int, str] = {
    LimitKind.TENANT: "tenant_id",
    LimitKind.JOB_TYPE: "job_type",
    LimitKind.DEFINITION: "definition_id",
    LimitKind.CONCURRENCY_KEY: "concurrency_key",
    # The category's number as text ("3": integration).
    LimitKind.CATEGORY: "CAST(category AS TEXT)",
}


# A rate bucket as stored: (tat, slow_level, slowed_at) by (kind, value).
BucketRows = dict[tuple[int, str], tuple[int, int, int]]


class LimitAdmission(Protocol):
    """What ``job_claim`` needs to honour concurrency and rate limits."""

    # Read-only here (properties), so any sequence or collection will do.
    @property
    def lock_keys(self) -> Sequence[str]: ...
    @property
    def kinds(self) -> Sequence[int]: ...
    @property
    def rate_keys(self) -> Sequence[tuple[int, str]]: ...
    # Ids of the claims ``admit`` turned away for a rate limit.
    @property
    def rate_refused(self) -> Collection[str]: ...

    @property
    def limited(self) -> bool:
        """Some claim falls in a limited scope (locks, counts, buckets needed)."""
        ...

    def admit(self, running: dict[tuple[int, str], int], buckets: BucketRows) -> Sequence[Claim]:
        """The claims that fit, given RUNNING counts and rate buckets per limited scope."""
        ...

    def charge(self, leased: Collection[str]) -> BucketRows:
        """The rate buckets to store once the jobs ``leased`` (ids) started."""
        ...


# Builds the admission of one claim from the limits as stored (rows of
# wfj_concurrency_limits, rows of wfj_rate_limits), read inside the claim's
# transaction.
AdmissionFor = Callable[[Sequence[ConcurrencyLimitRow], Sequence[RateLimitRow]], LimitAdmission]

# ``ScopeSettingQueries.admit_in`` and ``rate_buckets_write``, as the claiming
# queries of the other families (store/jobs.py, store/leases.py) name them.
AdmitIn = Callable[
    [sa.Connection, AdmissionFor, Sequence[Claim]], tuple[LimitAdmission, Sequence[Claim]]
]
BucketsWrite = Callable[[sa.Connection, BucketRows], None]


class ScopeSettingQueries(Family):
    """Queries over ``wfj_concurrency_limits``, ``wfj_tenants`` and ``wfj_job_type_defaults``."""

    def limit_gate_ensure(self, now: int) -> None:
        """Create the limit gate if missing and make it count the stored limits."""
        if not self.is_postgres:
            return
        with self.tx() as conn:
            self._lock_limit_gate(conn, now)
            self._write_limit_gate(conn, now)

    def _lock_limit_gate(self, conn: sa.Connection, now: int) -> None:
        from sqlalchemy.dialects.postgresql import insert

        conn.execute(
            insert(cluster_flags)
            .values(name=LIMIT_GATE, value="0", updated_at=now)
            .on_conflict_do_nothing()
        )
        conn.execute(
            sa.text("SELECT value FROM wfj_cluster_flags WHERE name = :gate FOR UPDATE"),
            {"gate": LIMIT_GATE},
        )

    def _write_limit_gate(self, conn: sa.Connection, now: int) -> None:
        conn.execute(
            sa.text(
                "UPDATE wfj_cluster_flags SET updated_at = :now, value = CAST("
                "(SELECT count(*) FROM wfj_concurrency_limits) "
                "+ (SELECT count(*) FROM wfj_rate_limits) AS text) WHERE name = :gate"
            ),
            {"gate": LIMIT_GATE, "now": now},
        )

    def limit_set(self, kind: int, value: str, max_running: int, now: int = 0) -> None:
        """Set a concurrency limit; ``max_running == 0`` removes it.

        On PostgreSQL the limit gate is locked first and rewritten in the same
        transaction, so claims in flight finish first and later ones see the
        change (see ``LIMIT_GATE``).
        """
        with self.tx() as conn:
            if self.is_postgres:
                self._lock_limit_gate(conn, now)
            conn.execute(
                concurrency_limits.delete().where(
                    concurrency_limits.c.kind == kind, concurrency_limits.c.value == value
                )
            )
            if max_running > 0:
                conn.execute(
                    concurrency_limits.insert().values(
                        kind=kind, value=value, max_running=max_running
                    )
                )
            if self.is_postgres:
                self._write_limit_gate(conn, now)
                conn.execute(sa.text("SELECT pg_notify('wfj_wake', 'limits')"))

    def limit_list(self) -> list[ConcurrencyLimitRow]:
        with self.tx() as conn:
            return list(conn.execute(sa.select(concurrency_limits)))

    def job_running_counts(
        self, kinds: Sequence[int], conn: sa.Connection | None = None
    ) -> dict[tuple[int, str], int]:
        """RUNNING jobs per (limit kind, scope value) for the given kinds."""
        parts = [
            f"SELECT {int(k)} AS kind, {LIMIT_COLUMNS[k]} AS value, count(*) AS n FROM wfj_jobs "
            f"WHERE status = {JobStatus.RUNNING:d} AND {LIMIT_COLUMNS[k]} IS NOT NULL "
            f"GROUP BY {LIMIT_COLUMNS[k]}"
            for k in kinds
        ]
        if not parts:
            return {}
        sql = sa.text(" UNION ALL ".join(parts))
        if conn is not None:
            return {(k, v): n for k, v, n in conn.execute(sql)}
        with self.tx() as c:
            return {(k, v): n for k, v, n in c.execute(sql)}

    def rate_limit_set(
        self, kind: int, value: str, starts: int, period_ms: int, burst: int, now: int = 0
    ) -> bool:
        """Set a rate limit; ``starts == 0`` removes it. Under the limit gate
        like ``limit_set``: once this returns no replica starts past it.
        Returns whether a limit was stored for the scope before."""
        with self.tx() as conn:
            if self.is_postgres:
                self._lock_limit_gate(conn, now)
            existed = conn.execute(
                rate_limits.delete().where(rate_limits.c.kind == kind, rate_limits.c.value == value)
            ).rowcount
            if starts > 0:
                conn.execute(
                    rate_limits.insert().values(
                        kind=kind, value=value, starts=starts, period_ms=period_ms, burst=burst
                    )
                )
            else:
                # A kind left without limits keeps no state.
                left = conn.execute(
                    sa.select(sa.func.count()).where(rate_limits.c.kind == kind)
                ).scalar()
                if not left:
                    conn.execute(rate_buckets.delete().where(rate_buckets.c.kind == kind))
            if self.is_postgres:
                self._write_limit_gate(conn, now)
                conn.execute(sa.text("SELECT pg_notify('wfj_wake', 'limits')"))
        return bool(existed)

    def rate_limit_list(self) -> list[RateLimitRow]:
        """The stored rate limits."""
        with self.tx() as conn:
            return list(
                conn.execute(
                    sa.select(rate_limits).order_by(rate_limits.c.kind, rate_limits.c.value)
                )
            )

    def rate_bucket_list(self, kinds: Sequence[int]) -> BucketRows:
        """The stored rate buckets of ``kinds`` (without locking)."""
        if not kinds:
            return {}
        query = sa.select(rate_buckets).where(rate_buckets.c.kind.in_(list(kinds)))
        with self.statement() as conn:
            return {
                (r.kind, r.value): (r.tat, r.slow_level, r.slowed_at) for r in conn.execute(query)
            }

    def rate_bucket_purge(self, now: int, limit: int) -> int:
        """Delete up to ``limit`` idle rate buckets: due (``tat <= now``) and not
        slowed, which admit exactly as a missing bucket does.

        A claim that rewrites one meanwhile moves its ``tat`` past ``now``. The
        outer statement checks idleness again, on the row as the DELETE finds
        it: a bucket whose advance commits while the DELETE waits for its row
        lock is kept (the subquery alone would still name it and delete it,
        and the next claim would admit a full burst again)."""
        sql = sa.text(
            "DELETE FROM wfj_rate_buckets WHERE (kind, value) IN ("
            "SELECT kind, value FROM wfj_rate_buckets "
            "WHERE tat <= :now AND slow_level = 0 LIMIT :limit) "
            "AND tat <= :now AND slow_level = 0"
        )
        with self.tx() as conn:
            return int(conn.execute(sql, {"now": now, "limit": limit}).rowcount or 0)

    def rate_bucket_update(
        self,
        keys: Sequence[tuple[int, str]],
        update: Callable[[Sequence[RateLimitRow], BucketRows], BucketRows],
    ) -> BucketRows:
        """Rewrite the rate buckets of ``keys`` atomically: under the scopes'
        advisory locks (the ones claims take), ``update`` gets the rate limits
        as stored and the buckets of ``keys`` and returns the buckets to store."""
        if not keys:
            return {}
        with self.tx() as conn:
            if self.is_postgres:
                conn.execute(sa.text(LIMIT_GATE_SHARE_SQL), {"gate": LIMIT_GATE})
            self._advisory_locks(conn, [f"wfj_rate:{k}:{v}" for k, v in keys])
            rows = list(conn.execute(sa.select(rate_limits)))
            written = update(rows, self._rate_buckets_read(conn, keys))
            self.rate_buckets_write(conn, written)
            return written

    def _rate_buckets_read(
        self, conn: sa.Connection, keys: Sequence[tuple[int, str]]
    ) -> BucketRows:
        if not keys:
            return {}
        out: BucketRows = {}
        pairs = list(keys)
        for i in range(0, len(pairs), 500):
            query = sa.select(rate_buckets).where(
                sa.tuple_(rate_buckets.c.kind, rate_buckets.c.value).in_(pairs[i : i + 500])
            )
            for r in conn.execute(query):
                out[(r.kind, r.value)] = (r.tat, r.slow_level, r.slowed_at)
        return out

    def rate_buckets_write(self, conn: sa.Connection, rows: BucketRows) -> None:
        if not rows:
            return
        stmt = self._insert(rate_buckets)
        stmt = stmt.on_conflict_do_update(
            index_elements=["kind", "value"],
            set_={
                "tat": stmt.excluded.tat,
                "slow_level": stmt.excluded.slow_level,
                "slowed_at": stmt.excluded.slowed_at,
            },
        )
        conn.execute(
            stmt,
            [
                {"kind": k, "value": v, "tat": tat, "slow_level": level, "slowed_at": at}
                for (k, v), (tat, level, at) in sorted(rows.items())
            ],
        )

    def _limits_in_force(
        self, conn: sa.Connection
    ) -> tuple[list[ConcurrencyLimitRow], list[RateLimitRow]]:
        """The stored concurrency and rate limits, read after taking the limit
        gate's share lock: a ``limit_set`` or ``rate_limit_set`` committed
        before is seen, one in progress waits for this transaction."""
        if self.is_postgres:
            conn.execute(sa.text(LIMIT_GATE_SHARE_SQL), {"gate": LIMIT_GATE})
        return (
            list(conn.execute(sa.select(concurrency_limits))),
            list(conn.execute(sa.select(rate_limits))),
        )

    def _advisory_locks(self, conn: sa.Connection, keys: Sequence[str]) -> None:
        """Take the transaction advisory locks named ``keys``, sorted (so
        claimers cannot deadlock). SQLite's transactions are serial already."""
        if self.is_postgres and keys:
            conn.execute(
                sa.text(
                    "SELECT pg_advisory_xact_lock(hashtext(k)) "
                    "FROM unnest(CAST(:keys AS text[])) AS k ORDER BY k"
                ),
                {"keys": sorted(keys)},
            )

    def _lock_and_count(
        self, conn: sa.Connection, admission: LimitAdmission
    ) -> dict[tuple[int, str], int]:
        """Take the advisory locks of the admission's limited scopes (sorted,
        so claimers cannot deadlock) and count what runs in them."""
        if not admission.limited:
            return {}
        self._advisory_locks(conn, list(admission.lock_keys))
        if not admission.kinds:
            return {}
        return self.job_running_counts(admission.kinds, conn)

    def admit_in(
        self, conn: sa.Connection, limits: AdmissionFor, claims: Sequence[Claim]
    ) -> tuple[LimitAdmission, Sequence[Claim]]:
        """Build the admission from the limits in force and let it decide,
        holding the locks of its limited scopes until the transaction ends."""
        admission = limits(*self._limits_in_force(conn))
        if not admission.limited:
            return admission, claims
        running = self._lock_and_count(conn, admission)
        buckets = self._rate_buckets_read(conn, admission.rate_keys)
        return admission, admission.admit(running, buckets)

    def tenant_weights(self) -> dict[str, int]:
        with self.tx() as conn:
            return {t: w for t, w in conn.execute(sa.select(tenants.c.tenant_id, tenants.c.weight))}

    def tenant_set_weight(self, tenant_id: str, weight: int) -> None:
        stmt = self._insert(tenants).values(tenant_id=tenant_id, weight=weight)
        stmt = stmt.on_conflict_do_update(index_elements=["tenant_id"], set_={"weight": weight})
        with self.tx() as conn:
            conn.execute(stmt)
            if self.is_postgres:
                conn.execute(sa.text("SELECT pg_notify('wfj_wake', 'limits')"))

    def category_weights(self) -> dict[tuple[str, int], int]:
        c = category_weight_rows.c
        with self.tx() as conn:
            return {
                (t, k): w for t, k, w in conn.execute(sa.select(c.tenant_id, c.category, c.weight))
            }

    def category_set_weight(self, tenant_id: str, category: int, weight: int) -> None:
        stmt = self._insert(category_weight_rows).values(
            tenant_id=tenant_id, category=category, weight=weight
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["tenant_id", "category"], set_={"weight": weight}
        )
        with self.tx() as conn:
            conn.execute(stmt)
            if self.is_postgres:
                conn.execute(sa.text("SELECT pg_notify('wfj_wake', 'limits')"))

    def category_remove_weight(self, tenant_id: str, category: int) -> bool:
        c = category_weight_rows.c
        with self.tx() as conn:
            removed = conn.execute(
                category_weight_rows.delete().where(
                    c.tenant_id == tenant_id, c.category == category
                )
            ).rowcount
            if removed and self.is_postgres:
                conn.execute(sa.text("SELECT pg_notify('wfj_wake', 'limits')"))
        return bool(removed)

    def job_type_defaults_list(self) -> list[JobTypeDefaultsRow]:
        with self.tx() as conn:
            return list(
                conn.execute(sa.select(job_type_defaults).order_by(job_type_defaults.c.job_type))
            )

    def job_type_defaults_set(
        self,
        job_type: str,
        retry_policy: str | None,
        execution_timeout_ms: int | None,
        heartbeat_timeout_ms: int | None,
        ordering_failure: int | None = None,
    ) -> None:
        """Replace a job type's defaults; all None removes them. Replicas are told."""
        with self.tx() as conn:
            conn.execute(job_type_defaults.delete().where(job_type_defaults.c.job_type == job_type))
            if (
                retry_policy
                or execution_timeout_ms is not None
                or heartbeat_timeout_ms is not None
                or ordering_failure is not None
            ):
                conn.execute(
                    job_type_defaults.insert().values(
                        job_type=job_type,
                        retry_policy=retry_policy,
                        execution_timeout_ms=execution_timeout_ms,
                        heartbeat_timeout_ms=heartbeat_timeout_ms,
                        ordering_failure=ordering_failure,
                    )
                )
            if self.is_postgres:
                conn.execute(sa.text("SELECT pg_notify('wfj_wake', 'limits')"))
