"""PgQueuer as a peer: schema set-up, batched enqueue, and its worker process.

PgQueuer runs with its default asyncpg driver and default settings, one
`QueueManager` per worker process, a no-op async entrypoint, and the batch
size under test. A completed job is deleted from the queue table and logged
as `successful` in the log table, which is what the bench counts.

Worker process: `python -m bench.pgqueuer_peer --dsn DSN --batch-size N`.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

import asyncpg
from pgqueuer import AsyncpgDriver, Queries, QueueManager
from pgqueuer.models import Job

from bench.database import PROBE_APPLICATION_NAME, PostgresServer
from bench.processes import ManagedProcess
from bench.recording import StartRecorder
from bench.statements import PROBE

DATABASE = "pgqueuer_bench"
QUEUE_TABLE = "pgqueuer"  # PgQueuer's default queue table (jobs wait and run here)
ENTRYPOINT = "noop"
PAYLOAD = b"{}"


class PgQueuerSystem:
    """Drives PgQueuer for the throughput figure (see `bench.throughput.QueueSystem`).

    Args:
        server: The bench PostgreSQL.
        batch_size: PgQueuer's dequeue batch size (`QueueManager.run(batch_size=...)`).
    """

    def __init__(self, server: PostgresServer, batch_size: int) -> None:
        self.server = server
        self.batch_size = batch_size
        self.name = f"PgQueuer batch {batch_size}"
        self.database = DATABASE
        self.dsn = server.dsn(DATABASE)

    async def prepare(self) -> None:
        self.server.recreate_database(DATABASE)
        conn = await asyncpg.connect(self.dsn)
        try:
            await Queries(AsyncpgDriver(conn)).install()
        finally:
            await conn.close()

    def start_workers(
        self, processes: int, deadline_s: float, record: str | None = None
    ) -> list[ManagedProcess]:
        started = []
        for i in range(processes):
            argv = [
                "python",
                "-m",
                "bench.pgqueuer_peer",
                "--dsn",
                self.dsn,
                "--batch-size",
                str(self.batch_size),
            ]
            if record:
                argv += ["--record", f"{record}.{i}"]
            started.append(ManagedProcess(f"pgqueuer-worker-{i}", argv, deadline_s=deadline_s))
        return started

    async def wait_ready(self, workers: list[ManagedProcess], timeout_s: float) -> None:
        for worker in workers:
            await asyncio.to_thread(worker.wait_for_log, r"READY", timeout_s)

    async def enqueue(self, jobs: int, batch: int) -> None:
        conn = await asyncpg.connect(self.dsn)
        try:
            queries = Queries(AsyncpgDriver(conn))
            for start in range(0, jobs, batch):
                n = min(batch, jobs - start)
                await queries.enqueue([ENTRYPOINT] * n, [PAYLOAD] * n, [0] * n)
        finally:
            await conn.close()

    async def open_counter(self) -> CompletionCounter:
        return await CompletionCounter.open(self.dsn)


class CompletionCounter:
    """Counts PgQueuer's successful jobs from its log table."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    @classmethod
    async def open(cls, dsn: str) -> CompletionCounter:
        return cls(
            await asyncpg.connect(dsn, server_settings={"application_name": PROBE_APPLICATION_NAME})
        )

    async def completed(self) -> int:
        return int(
            await self._conn.fetchval(
                f"{PROBE}SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
            )
        )

    async def close(self) -> None:
        await self._conn.close()


async def _run_worker(dsn: str, batch_size: int, record: str | None) -> None:
    conn = await asyncpg.connect(dsn)
    queue_manager = QueueManager(Queries(AsyncpgDriver(conn)))
    recorder = StartRecorder(record) if record else None

    if recorder is None:

        @queue_manager.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:  # noqa: ARG001 - the no-op handler under test
            return None
    else:

        @queue_manager.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            recorder.record("-", job.payload or b"")

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, queue_manager.shutdown.set)
    print("READY", flush=True)
    try:
        await queue_manager.run(batch_size=batch_size)
    finally:
        if recorder is not None:
            recorder.close()
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="PgQueuer no-op worker for the bench")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--record", default=None, help="record handler starts to this file")
    args = parser.parse_args()
    asyncio.run(_run_worker(args.dsn, args.batch_size, args.record))


if __name__ == "__main__":
    main()
