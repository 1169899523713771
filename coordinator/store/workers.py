"""Named queries over the cluster: the cross-replica worker registry and cluster flags."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import sqlalchemy as sa

from coordinator.model import (
    WorkerRecord,
)
from coordinator.store.base import ROW_WRITE_ERRORS, Family
from coordinator.store.rows import WorkerRow
from coordinator.store.schema import (
    cluster_flags,
    workers,
)

log = logging.getLogger(__name__)


class WorkerQueries(Family):
    """Queries over ``wfj_workers`` and ``wfj_cluster_flags``."""

    def worker_sync(
        self, coordinator_id: str, connected: Sequence[WorkerRecord], now: int
    ) -> list[tuple[str, BaseException]]:
        """Make the registry hold exactly ``connected`` for this coordinator.

        Upserts every connected worker (``last_seen_at = now``: its stream is
        open, so it was alive within the transport keepalive) and deletes
        this coordinator's other rows. Rows are keyed by (coordinator, worker
        id): another replica's rows, even for the same worker id, are left
        alone. A record
        the database refuses (e.g. a character it cannot store) is set aside
        and returned with its error; the others are written.
        """
        ids = [w.worker_id for w in connected]
        with self.tx() as conn:
            delete = workers.delete().where(workers.c.coordinator_id == coordinator_id)
            if ids:
                delete = delete.where(workers.c.worker_id.notin_(ids))
            conn.execute(delete)
            if not connected:
                return []
            insert = self._insert(workers)
            values = [
                {
                    "worker_id": w.worker_id,
                    "coordinator_id": coordinator_id,
                    "hostname": w.hostname,
                    "pid": w.pid,
                    "sdk_version": w.sdk_version,
                    "job_types": json.dumps(sorted(w.job_types)),
                    "slots": w.slots,
                    "connected_at": w.connected_at,
                    "last_seen_at": now,
                    "draining": w.draining,
                    "tenants": None if w.tenants is None else json.dumps(sorted(w.tenants)),
                }
                for w in connected
            ]
            stmt = insert.on_conflict_do_update(
                index_elements=["coordinator_id", "worker_id"],
                set_={
                    name: insert.excluded[name]
                    for name in (
                        "hostname",
                        "pid",
                        "sdk_version",
                        "job_types",
                        "slots",
                        "connected_at",
                        "last_seen_at",
                        "draining",
                        "tenants",
                    )
                },
            )
            try:
                with conn.begin_nested():
                    conn.execute(stmt, values)
                return []
            except ROW_WRITE_ERRORS:
                pass
            refused: list[tuple[str, BaseException]] = []
            for w, value in zip(connected, values, strict=True):
                try:
                    with conn.begin_nested():
                        conn.execute(stmt, [value])
                except ROW_WRITE_ERRORS as e:
                    refused.append((w.worker_id, e))
            return refused

    def worker_delete_stale(self, before: int) -> int:
        """Remove rows not refreshed since ``before`` (their coordinator died)."""
        with self.tx() as conn:
            return conn.execute(workers.delete().where(workers.c.last_seen_at < before)).rowcount

    def worker_list(self, seen_since: int = 0) -> list[WorkerRow]:
        """Registered workers seen at or after ``seen_since``, by worker id
        (then coordinator)."""
        query = (
            sa.select(workers)
            .where(workers.c.last_seen_at >= seen_since)
            .order_by(workers.c.worker_id, workers.c.coordinator_id)
        )
        with self.tx() as conn:
            return list(conn.execute(query))

    def cluster_flag_get(self, name: str) -> str | None:
        with self.tx() as conn:
            return conn.execute(
                sa.select(cluster_flags.c.value).where(cluster_flags.c.name == name)
            ).scalar()

    def cluster_flag_list(self, prefix: str = "") -> dict[str, str]:
        query = sa.select(cluster_flags.c.name, cluster_flags.c.value)
        if prefix:
            query = query.where(cluster_flags.c.name.startswith(prefix, autoescape=True))
        with self.tx() as conn:
            return {n: v for n, v in conn.execute(query)}

    def cluster_flag_set(self, name: str, value: str | None, now: int) -> None:
        """Set a flag, or delete it when ``value`` is None; other replicas are told at once."""
        with self.tx() as conn:
            if self.is_postgres:
                conn.execute(sa.text("SELECT pg_notify('wfj_wake', 'flags')"))
            if value is None:
                conn.execute(cluster_flags.delete().where(cluster_flags.c.name == name))
                return
            insert = self._insert(cluster_flags)
            conn.execute(
                insert.values(name=name, value=value, updated_at=now).on_conflict_do_update(
                    index_elements=["name"], set_={"value": value, "updated_at": now}
                )
            )
