"""Named queries over per-scope settings: concurrency limits (and the limit
gate), tenant weights and job type defaults."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import sqlalchemy as sa

from coordinator.model import (
    Claim,
    JobStatus,
    LimitKind,
)
from coordinator.store.base import StoreBase
from coordinator.store.schema import (
    cluster_flags,
    concurrency_limits,
    job_type_defaults,
    tenants,
)

log = logging.getLogger(__name__)


# The limit gate (PostgreSQL): a cluster flag row holding how many concurrency
# limits are stored. Every claim reads it under a share row lock (the
# one-statement claim leases only while it says "0"; the counting claim reads
# the stored limits after it); ``limit_set`` locks it for update and rewrites
# it in the transaction that changes a limit. So a claim either finishes
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


class LimitAdmission(Protocol):
    """What ``job_claim`` needs to honour concurrency limits."""

    lock_keys: Sequence[str]
    kinds: Sequence[int]

    def admit(self, running: dict[tuple[int, str], int]) -> Sequence[Claim]:
        """The claims that fit, given RUNNING counts per limited scope."""
        ...


# Builds the admission of one claim from the concurrency limits as stored
# (rows of wfj_concurrency_limits), read inside the claim's transaction.
AdmissionFor = Callable[[Sequence[Any]], LimitAdmission]


class LimitQueries(StoreBase):
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
                "(SELECT count(*) FROM wfj_concurrency_limits) AS text) WHERE name = :gate"
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

    def limit_list(self) -> list[Any]:
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

    def _limits_in_force(self, conn: sa.Connection) -> list[Any]:
        """The stored concurrency limits, read after taking the limit gate's
        share lock: a ``limit_set`` committed before is seen, one in progress
        waits for this transaction."""
        if self.is_postgres:
            conn.execute(sa.text(LIMIT_GATE_SHARE_SQL), {"gate": LIMIT_GATE})
        return list(conn.execute(sa.select(concurrency_limits)))

    def _lock_and_count(
        self, conn: sa.Connection, admission: LimitAdmission
    ) -> dict[tuple[int, str], int]:
        """Take the advisory locks of the admission's limited scopes (sorted,
        so claimers cannot deadlock) and count what runs in them."""
        if not admission.kinds:
            return {}
        if self.is_postgres:
            conn.execute(
                sa.text(
                    "SELECT pg_advisory_xact_lock(hashtext(k)) "
                    "FROM unnest(CAST(:keys AS text[])) AS k ORDER BY k"
                ),
                {"keys": list(admission.lock_keys)},
            )
        return self.job_running_counts(admission.kinds, conn)

    def tenant_weights(self) -> dict[str, int]:
        with self.tx() as conn:
            return {t: w for t, w in conn.execute(sa.select(tenants.c.tenant_id, tenants.c.weight))}

    def tenant_set_weight(self, tenant_id: str, weight: int) -> None:
        stmt = self._insert(tenants).values(tenant_id=tenant_id, weight=weight)
        stmt = stmt.on_conflict_do_update(index_elements=["tenant_id"], set_={"weight": weight})
        with self.tx() as conn:
            conn.execute(stmt)

    def job_type_defaults_list(self) -> list[Any]:
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
    ) -> None:
        """Replace a job type's defaults; all None removes them. Replicas are told."""
        with self.tx() as conn:
            conn.execute(job_type_defaults.delete().where(job_type_defaults.c.job_type == job_type))
            if retry_policy or execution_timeout_ms is not None or heartbeat_timeout_ms is not None:
                conn.execute(
                    job_type_defaults.insert().values(
                        job_type=job_type,
                        retry_policy=retry_policy,
                        execution_timeout_ms=execution_timeout_ms,
                        heartbeat_timeout_ms=heartbeat_timeout_ms,
                    )
                )
            if self.is_postgres:
                conn.execute(sa.text("SELECT pg_notify('wfj_wake', 'limits')"))
