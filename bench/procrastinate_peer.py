"""Procrastinate as a peer: schema set-up, batched defer, and its worker process.

Procrastinate runs with its psycopg connector and default worker settings
except concurrency (async no-op task, `concurrency` sub-workers per process).
Finished jobs stay in `procrastinate_jobs` with status `succeeded`.

Worker process: `python -m bench.procrastinate_peer --dsn DSN --concurrency N`.
"""

from __future__ import annotations

import argparse
import asyncio

import psycopg
from procrastinate import App, PsycopgConnector

from bench.database import PROBE_APPLICATION_NAME, PostgresServer
from bench.processes import ManagedProcess

DATABASE = "procrastinate_bench"
TASK_NAME = "noop"


def make_app(dsn: str) -> App:
    app = App(connector=PsycopgConnector(conninfo=dsn))

    @app.task(name=TASK_NAME)
    async def noop() -> None:  # the no-op handler under test
        return None

    return app


class ProcrastinateSystem:
    """Drives Procrastinate for the throughput figure (see `bench.throughput.QueueSystem`).

    Args:
        server: The bench PostgreSQL.
        concurrency: Async sub-workers per worker process.
    """

    def __init__(self, server: PostgresServer, concurrency: int = 10) -> None:
        self.server = server
        self.concurrency = concurrency
        self.name = "Procrastinate"
        self.database = DATABASE
        self.dsn = server.dsn(DATABASE)

    async def prepare(self) -> None:
        self.server.recreate_database(DATABASE)
        app = make_app(self.dsn)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    def start_workers(self, processes: int, deadline_s: float) -> list[ManagedProcess]:
        return [
            ManagedProcess(
                f"procrastinate-worker-{i}",
                [
                    "python",
                    "-m",
                    "bench.procrastinate_peer",
                    "--dsn",
                    self.dsn,
                    "--concurrency",
                    str(self.concurrency),
                ],
                deadline_s=deadline_s,
            )
            for i in range(processes)
        ]

    async def wait_ready(self, workers: list[ManagedProcess], timeout_s: float) -> None:
        for worker in workers:
            await asyncio.to_thread(worker.wait_for_log, r"READY", timeout_s)

    async def enqueue(self, jobs: int, batch: int) -> None:
        app = make_app(self.dsn)
        async with app.open_async():
            task = app.tasks[TASK_NAME]
            for start in range(0, jobs, batch):
                n = min(batch, jobs - start)
                await task.batch_defer_async(*([{}] * n))

    async def open_counter(self) -> CompletionCounter:
        return await CompletionCounter.open(self.dsn)


class CompletionCounter:
    """Counts Procrastinate's succeeded jobs."""

    def __init__(self, conn: psycopg.AsyncConnection) -> None:
        self._conn = conn

    @classmethod
    async def open(cls, dsn: str) -> CompletionCounter:
        return cls(
            await psycopg.AsyncConnection.connect(
                dsn, autocommit=True, application_name=PROBE_APPLICATION_NAME
            )
        )

    async def completed(self) -> int:
        cur = await self._conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def close(self) -> None:
        await self._conn.close()


async def _run_worker(dsn: str, concurrency: int) -> None:
    app = make_app(dsn)
    async with app.open_async():
        print("READY", flush=True)
        # Procrastinate installs its own SIGTERM/SIGINT handlers and stops gracefully.
        await app.run_worker_async(concurrency=concurrency, wait=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="Procrastinate no-op worker for the bench")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(_run_worker(args.dsn, args.concurrency))


if __name__ == "__main__":
    main()
