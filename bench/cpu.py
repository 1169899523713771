"""CPU per job: the CPU time each process of a run spends, read before and after.

The processes are the ones the bench starts (coordinators, worker processes:
their pids come from the process handles) and the PostgreSQL backends serving
the run's database (client backends of that database in `pg_stat_activity`,
except the bench's own probes, which connect with `PROBE_APPLICATION_NAME`).
User + system time comes from `/proc/<pid>/stat` (through psutil), for a
process together with its live children; PostgreSQL runs on this machine, so
its backends' pids are local. Backends are listed again on every `sample()`:
one that appears during the window counts from zero (it started inside it),
and one that exits keeps the time of its last sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import psutil
import psycopg

from bench.database import PROBE_APPLICATION_NAME, PostgresServer

BACKENDS = "PostgreSQL backends"

_BACKENDS_SQL = (
    "SELECT pid FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend' "
    "AND application_name IS DISTINCT FROM %s"
)


def cpu_seconds(pid: int, *, children: bool = True) -> float:
    """User + system CPU of a process and (unless not `children`) its live
    children (0 if it is gone)."""
    try:
        process = psutil.Process(pid)
        members = [process, *(process.children(recursive=True) if children else ())]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for proc in members:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


@dataclass
class CpuMeter:
    """CPU seconds of labelled processes and of a database's backends over one window.

    Args:
        server: The bench PostgreSQL.
        database: The run's database (its client backends are measured).
        processes: Label → pids (a label's pids are summed, e.g. "coordinator").
        alone: Labels whose processes count without their children (the bench's
            own process, whose children are the processes under test).
    """

    server: PostgresServer
    database: str
    processes: Mapping[str, Sequence[int]]
    alone: frozenset[str] = frozenset()
    _start: dict[str, float] = field(default_factory=dict)
    _backend_start: dict[int, float] = field(default_factory=dict)
    _backend_last: dict[int, float] = field(default_factory=dict)
    _conn: psycopg.AsyncConnection | None = None

    async def start(self) -> None:
        """Open the probe connection and take the baseline of every process and backend."""
        self._conn = await psycopg.AsyncConnection.connect(
            self.server.dsn("postgres"), autocommit=True, application_name=PROBE_APPLICATION_NAME
        )
        for pid in await self._backend_pids():
            self._backend_start[pid] = self._backend_last[pid] = cpu_seconds(pid)
        self._start = self._processes_now()

    async def sample(self) -> None:
        """List the backends again and note their CPU so far (call during the window)."""
        for pid in await self._backend_pids():
            self._backend_start.setdefault(pid, 0.0)
            now = cpu_seconds(pid)
            if now or pid not in self._backend_last:
                self._backend_last[pid] = now

    async def stop(self) -> dict[str, float]:
        """CPU seconds per label over the window, plus `BACKENDS` (all backends summed)."""
        now = self._processes_now()
        used = {label: now[label] - self._start[label] for label in self.processes}
        await self.sample()
        used[BACKENDS] = sum(
            self._backend_last[pid] - start for pid, start in self._backend_start.items()
        )
        await self.close()
        return used

    def _processes_now(self) -> dict[str, float]:
        return {
            label: sum(cpu_seconds(p, children=label not in self.alone) for p in pids)
            for label, pids in self.processes.items()
        }

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def _backend_pids(self) -> list[int]:
        assert self._conn is not None
        cur = await self._conn.execute(_BACKENDS_SQL, (self.database, PROBE_APPLICATION_NAME))
        return [int(row[0]) for row in await cur.fetchall()]


def per_job_us(used_s: Mapping[str, float], jobs: int) -> dict[str, float]:
    """CPU seconds per label → µs per job (every label divided by all `jobs` of the run)."""
    return {label: seconds / jobs * 1e6 for label, seconds in used_s.items()}
