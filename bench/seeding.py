"""Set-based generation of large backlogs straight into the coordinator's tables.

Millions of jobs through the API would make set-up longer than the
measurement, so the acquisition and memory figures write rows with one
`INSERT … SELECT generate_series` per chunk. The rows look like API-enqueued
jobs: PENDING, due in the past, UUIDv7-shaped time-ordered ids, the JSON
no-op payload, and a row in the lanes table for every (tenant, type,
definition) the coordinator must know about.

This is the only module that knows the coordinator's table layout
(`coordinator/store/schema.py`, revision 0013); when the schema changes,
change it here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg

from bench.wfjobs import JOB_TYPE, JOBS_TABLE, STATUS_PENDING

LANES_TABLE = "wfj_lanes"
CHUNK_ROWS = 500_000
_id_counter = 0

# A UUIDv7-shaped text id from a millisecond timestamp and a per-row sequence:
# 48-bit ms, version 7, 12-bit sequence, variant 10, 62 bits from md5. Ids
# sort by (ms, seq), i.e. in generation order, like the coordinator's own.
_INSERT_SQL = f"""
INSERT INTO {JOBS_TABLE} (
    id, job_type, tenant_id, definition_id, payload, content_type,
    status, max_attempts, created_at, due_at__KEY_COLUMNS__
)
SELECT
    substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(h, 13, 3) || '-'
        || '8' || substr(r, 1, 3) || '-' || substr(r, 4, 12),
    %(job_type)s,
    %(tenant_prefix)s || (((g.i / %(per_key)s) %% %(tenants)s)::text),
    %(definition_id)s,
    convert_to('{{}}', 'UTF8'),
    'application/json',
    {STATUS_PENDING},
    3,
    %(base_us)s + g.i,
    %(base_us)s + g.i__KEY_VALUES__
FROM (
    SELECT
        i,
        lpad(to_hex(%(base_ms)s + i / 4096), 12, '0') || lpad(to_hex(i %% 4096), 3, '0') AS h,
        md5(%(salt)s || i::text) AS r
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i
) AS g
"""


@dataclass(frozen=True)
class Backlog:
    """A block of pending jobs to generate.

    Attributes:
        count: Number of jobs.
        tenants: Spread round-robin over this many tenants, named `{tenant_prefix}{n}`.
        tenant_prefix: Tenant name prefix.
        definition_id: Workflow definition of every job (pause target).
        job_type: Job type of every job.
        age_s: How far in the past the first job was created.
        jobs_per_key: When set, the jobs carry ordering keys `key-{n}`, this
            many consecutive jobs per key (enqueued key by key), each key's
            jobs in one tenant (keys round-robin over the tenants); every job
            but a key's first is stored held behind its key, as enqueue stores it.
    """

    count: int
    tenants: int = 1
    tenant_prefix: str = "tenant-"
    definition_id: str = "bench"
    job_type: str = JOB_TYPE
    age_s: float = 3600.0
    jobs_per_key: int = 0

    def tenant_names(self) -> list[str]:
        return [f"{self.tenant_prefix}{n}" for n in range(self.tenants)]


def insert_backlog(dsn: str, backlog: Backlog, *, analyze: bool = True) -> float:
    """Insert `backlog` in chunks of `CHUNK_ROWS`; returns the seconds it took."""
    global _id_counter
    started = time.perf_counter()
    base_ms = int((time.time() - backlog.age_s) * 1000)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute(
            f"INSERT INTO {LANES_TABLE} (tenant_id, job_type, definition_id) "
            "SELECT t, %s, %s FROM unnest(%s::text[]) AS t ON CONFLICT DO NOTHING",
            (backlog.job_type, backlog.definition_id, backlog.tenant_names()),
        )
        columns, values = "", ""
        if backlog.jobs_per_key:
            columns = ", ordering_key, ordering_held"
            values = ", 'key-' || (g.i / %(per_key)s)::text, g.i %% %(per_key)s <> 0"
        statement = _INSERT_SQL.replace("__KEY_COLUMNS__", columns).replace(
            "__KEY_VALUES__", values
        )
        for first in range(0, backlog.count, CHUNK_ROWS):
            last = min(first + CHUNK_ROWS, backlog.count) - 1
            _id_counter += 1
            conn.execute(
                statement,
                {
                    "job_type": backlog.job_type,
                    "tenant_prefix": backlog.tenant_prefix,
                    "tenants": backlog.tenants,
                    "per_key": backlog.jobs_per_key or 1,
                    "definition_id": backlog.definition_id,
                    "base_us": base_ms * 1000,
                    "base_ms": base_ms,
                    "salt": f"{time.time_ns()}-{_id_counter}-",
                    "first": first,
                    "last": last,
                },
            )
        if analyze:
            conn.execute(f"VACUUM ANALYZE {JOBS_TABLE}")
            conn.execute(f"ANALYZE {LANES_TABLE}")
            # Write the bulk load out now, not during the measurement that follows.
            conn.execute("CHECKPOINT")
    return time.perf_counter() - started


def delete_jobs(dsn: str, *, definition_id: str) -> None:
    """Remove every job of one definition (to re-seed a consumed block)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {JOBS_TABLE} WHERE definition_id = %s", (definition_id,))
        conn.execute(
            "DELETE FROM wfj_job_attempts a WHERE NOT EXISTS "
            f"(SELECT 1 FROM {JOBS_TABLE} j WHERE j.id = a.job_id)"
        )


def count_pending(dsn: str, *, definition_id: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM {JOBS_TABLE} WHERE status = %s AND definition_id = %s",
            (STATUS_PENDING, definition_id),
        ).fetchone()
    return int(row[0]) if row else 0
