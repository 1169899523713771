"""Per-statement database cost of a run, from pg_stat_statements.

The bench's private cluster (`bench.cluster`) loads pg_stat_statements with
planning tracked. A figure resets the counters when its measured window
starts (`reset`) and reads the database's statements when it ends (`top`):
calls, mean planning time, mean execution time and rows per call of the
statements with the most total (planning + execution) time. On a server
without the extension both return nothing and the figure goes on.

The bench's own probes (completion counters, CPU sampling) start their SQL
with `PROBE`, and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from bench.database import PostgresServer

PROBE = "/* wfjobs-bench-probe */ "
_TOP_SQL = """
SELECT query, calls, plans, total_plan_time / greatest(plans, 1), total_exec_time / calls,
       rows::float8 / calls, total_plan_time + total_exec_time
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = %s AND calls > 0 AND query NOT LIKE %s
ORDER BY total_plan_time + total_exec_time DESC LIMIT %s
"""


@dataclass(frozen=True)
class Statement:
    query: str
    calls: int
    plans: int
    mean_plan_ms: float
    mean_exec_ms: float
    rows_per_call: float
    total_ms: float


def available(server: PostgresServer) -> bool:
    try:
        with server.connect() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("SELECT 1 FROM pg_stat_statements LIMIT 1")
        return True
    except psycopg.Error:
        return False


def reset(server: PostgresServer) -> bool:
    """Zero the counters of every statement (False: the server has no pg_stat_statements)."""
    if not available(server):
        return False
    with server.connect() as conn:
        conn.execute(f"{PROBE}SELECT pg_stat_statements_reset()")
    return True


def top(server: PostgresServer, database: str, limit: int = 10) -> list[Statement]:
    """The statements of `database` with the most time since the last reset."""
    if not available(server):
        return []
    with server.connect() as conn:
        rows = conn.execute(_TOP_SQL, (database, PROBE.strip() + "%", limit)).fetchall()
    return [
        Statement(
            " ".join(str(r[0]).split()),
            int(r[1]),
            int(r[2]),
            float(r[3]),
            float(r[4]),
            float(r[5]),
            float(r[6]),
        )
        for r in rows
    ]


def render(
    title: str, statements: list[Statement], *, jobs: int | None = None, width: int = 110
) -> str:
    """A Markdown table of `statements` (query text cut to `width` characters)."""
    if not statements:
        return ""
    lines = [
        f"### {title}",
        "",
        "| statement | calls | plans | mean plan ms | mean exec ms | rows/call | total ms |"
        + (" µs per job |" if jobs else ""),
        "|---|---|---|---|---|---|---|" + ("---|" if jobs else ""),
    ]
    for s in statements:
        text = s.query if len(s.query) <= width else s.query[: width - 1] + "…"
        text = text.replace("|", "/").replace("`", "'")
        row = (
            f"| `{text}` | {s.calls:,} | {s.plans:,} | {s.mean_plan_ms:.3f} | {s.mean_exec_ms:.3f} | "
            f"{s.rows_per_call:.1f} | {s.total_ms:,.0f} |"
        )
        if jobs:
            row += f" {s.total_ms * 1000 / jobs:.1f} |"
        lines.append(row)
    lines.append("")
    lines.append(
        "From pg_stat_statements on the bench's cluster over the measured window; "
        "plan time is per planning (a prepared statement reusing a generic plan is "
        "not planned again)."
    )
    return "\n".join(lines)
