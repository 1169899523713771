"""Processes and checks shared by the fault scenarios.

Every scenario ends with ``check_run``: it reads each job's attempt history
from the store (as ``GetJob`` shows it) and the workers' execution records, asserts the crash-safety
invariants (SPEC §5.4, §5.12) and prints one summary line::

    jobs=5000 faults=12 lost=0 double-outcomes=0 extra-executions=37 recovery=1.42s

(``extra-executions`` are handler runs beyond one per job, each explained by a
lease taken away; ``recovery`` is printed by scenarios that measure it.)

Sizes scale with ``WFJOBS_FAULTS_SCALE`` (default 1; CI runs the default, a
soak run uses e.g. 10).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
import sqlalchemy as sa
from grpc_health.v1 import health_pb2, health_pb2_grpc

from coordinator.model import AttemptOutcome, JobStatus
from coordinator.store import open_store
from coordinator.store.base import create_sa_engine
from wfj_testing import ManagedProcess, WorkerProcess, coordinator_args, wait_until
from worker_sdk import DeadlineExceededError, JobRequest, SchedulerClient, UnavailableError

SCALE = float(os.environ.get("WFJOBS_FAULTS_SCALE", "1"))
WORKER_APP = Path(__file__).resolve().parent / "fault_worker.py"


def scaled(n: int) -> int:
    return max(1, int(n * SCALE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CoordinatorProcess(ManagedProcess):
    """A coordinator subprocess on a fixed port, so it can be killed and restarted in place."""

    def __init__(
        self,
        database_url: str,
        log_dir: Path,
        *,
        port: int | None = None,
        env: dict[str, str] | None = None,
        args: Iterable[str] = (),
        name: str = "coordinator",
        program: Path | None = None,
    ) -> None:
        self.database_url = database_url
        self.log_dir = log_dir
        self.port = port or free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.env = env
        self.args = list(args)
        self.name = name
        # A script to run instead of ``python -m coordinator`` (same arguments).
        self.program = program
        self.starts = 0
        self.start()

    def start(self) -> None:
        self.starts += 1
        command = coordinator_args(
            self.database_url, self.target, "--drain-timeout", "2", *self.args
        )
        if self.program is not None:
            command = [command[0], str(self.program), *command[3:]]
        self._spawn(command, self.log_dir / f"{self.name}-{self.starts}.log", self.env)
        self.wait_started(self._listening, f"{self.name} to listen (log: {self.log_path})")

    def _listening(self) -> bool:
        if not self.alive():
            raise AssertionError(f"{self.name} exited: {self.log()[-3000:]}")
        return "listening on" in self.log()

    def log_text(self) -> str:
        return "\n".join(
            (self.log_dir / f"{self.name}-{n}.log").read_text(errors="replace")
            for n in range(1, self.starts + 1)
        )


class FaultWorker(WorkerProcess):
    """``fault_worker.py`` in a subprocess; executions go to ``record``."""

    app = WORKER_APP


class WorkerPool:
    """N worker slots, each a process that can be killed and replaced."""

    def __init__(self, target: str, tmp: Path, size: int, *args: str, name: str = "worker") -> None:
        self.target = target
        self.tmp = tmp
        self.name = name
        self.args = args
        self.started = 0
        self.kills = 0
        self.records: list[Path] = []
        self.workers = [self._spawn() for _ in range(size)]

    def _spawn(self) -> FaultWorker:
        self.started += 1
        n = self.started
        record = self.tmp / f"record-{self.name}-{n}.txt"
        self.records.append(record)
        return FaultWorker(
            self.target,
            record,
            self.tmp / f"{self.name}-{n}.log",
            "--worker-id",
            f"{self.name}-{n}",
            *self.args,
        )

    def kill_one(self, rng: random.Random) -> None:
        """SIGKILL a random worker and start a replacement at once."""
        i = rng.randrange(len(self.workers))
        self.workers[i].kill()
        self.kills += 1
        self.workers[i] = self._spawn()

    def stop(self) -> None:
        for w in self.workers:
            w.stop()


def enqueue_work(
    target: str,
    total: int,
    *,
    ms: int = 5,
    min_ms: int = 0,
    heartbeat_timeout: float = 2.0,
    tenants: int = 4,
) -> list[str]:
    """Enqueue ``total`` ``work`` jobs lasting ``min_ms``..``ms`` each; returns their ids."""
    ids: list[str] = []
    rng = random.Random(total)
    with SchedulerClient(target) as scheduler:
        for first in range(0, total, 500):
            batch = [
                JobRequest(
                    "work",
                    {"n": i, "ms": rng.randint(min_ms, ms)},
                    tenant_id=f"tenant-{i % tenants}",
                    heartbeat_timeout=heartbeat_timeout,
                    max_attempts=100,
                )
                for i in range(first, min(first + 500, total))
            ]
            ids.extend(r.job_id for r in scheduler.enqueue_batch(batch))
    return ids


def query_rows(database_url: str, sql: str, **params: object) -> list[Any]:
    """The rows of one statement, on a connection of its own (closed after)."""
    engine = create_sa_engine(database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql), params).all())
    finally:
        engine.dispose()


def count_status(database_url: str, status: JobStatus) -> int:
    [(count,)] = query_rows(
        database_url, "SELECT count(*) FROM wfj_jobs WHERE status = :s", s=int(status)
    )
    return int(count or 0)


def wait_all_completed(database_url: str, total: int, timeout: float) -> None:
    wait_until(
        lambda: count_status(database_url, JobStatus.COMPLETED) >= total,
        timeout,
        f"all {total} jobs to complete",
        interval=0.25,
    )


def count_starts(records: Iterable[Path]) -> int:
    """Handler starts recorded so far (cheap enough to poll)."""
    return sum(p.read_bytes().count(b"start ") for p in records if p.exists())


def read_start_times(records: Iterable[Path]) -> dict[str, int]:
    """Job id -> wall-clock time (µs) of its first handler start."""
    out: dict[str, int] = {}
    for path in records:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 5 and parts[0] == "start":
                out[parts[1]] = min(int(parts[4]), out.get(parts[1], int(parts[4])))
    return out


def read_executions(records: Iterable[Path]) -> list[tuple[str, int, str]]:
    """(job id, attempt, worker) for every handler start in the record files."""
    out = []
    for path in records:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[0] == "start":
                out.append((parts[1], int(parts[2]), parts[3]))
    return out


@dataclass
class Summary:
    jobs: int
    kills: int
    re_executions: int
    lost: int
    duplicates: int
    recovery_s: float | None = None

    def line(self) -> str:
        line = (
            f"jobs={self.jobs} faults={self.kills} lost={self.lost} "
            f"double-outcomes={self.duplicates} extra-executions={self.re_executions}"
        )
        if self.recovery_s is not None:
            line += f" recovery={self.recovery_s:.2f}s"
        return line


_EXPLAINING = {int(AttemptOutcome.LEASE_EXPIRED), int(AttemptOutcome.UNLOCKED)}


def check_run(
    database_url: str,
    job_ids: list[str],
    records: Iterable[Path],
    kills: int,
    scenario: str,
    *,
    recovery_s: float | None = None,
) -> Summary:
    """Assert the crash-safety invariants and print the scenario's summary line.

    * every job is COMPLETED (none lost, none faulted);
    * each job has exactly one COMPLETED attempt (its outcome recorded once);
    * each job's history (as ``GetJob`` shows it, a completed first attempt
      read from the job row) numbers its attempts 1..attempt with no gap, so
      no attempt ended without its end being recorded;
    * every handler execution is accounted for: the attempt it ran as ended
      COMPLETED, or ended LEASE_EXPIRED / UNLOCKED (the lease was taken away),
      so every re-execution is explained by the attempt history;
    * no attempt ran twice.
    """
    store = open_store(database_url, pool_size=1)
    try:
        rows = {r.id: r for r in store.job_get_many(job_ids)}
        attempts: dict[str, dict[int, int]] = collections.defaultdict(dict)
        completed = collections.Counter()
        gaps = []
        for job_id in job_ids:
            history = store.job_attempts(job_id)
            for a in history:
                attempts[job_id][a.number] = a.outcome
                if a.outcome == int(AttemptOutcome.COMPLETED):
                    completed[job_id] += 1
            row = rows.get(job_id)
            if row is not None and [a.number for a in history] != list(range(1, row.attempt + 1)):
                gaps.append((job_id, row.attempt, [a.number for a in history]))
    finally:
        store.dispose()
    statuses = {job_id: row.status for job_id, row in rows.items()}
    wanted = set(job_ids)
    lost = sorted(j for j in wanted if statuses.get(j) != int(JobStatus.COMPLETED))
    duplicates = sorted(j for j, n in completed.items() if n > 1)
    executions = read_executions(records)
    runs = collections.Counter((job_id, attempt) for job_id, attempt, _ in executions)
    per_job = collections.Counter(job_id for job_id, _, _ in executions)
    unexplained = []
    for (job_id, attempt), n in runs.items():
        outcome = attempts.get(job_id, {}).get(attempt)
        if n > 1 or (outcome != int(AttemptOutcome.COMPLETED) and outcome not in _EXPLAINING):
            unexplained.append((job_id, attempt, n, outcome))
    summary = Summary(
        jobs=len(wanted),
        kills=kills,
        re_executions=sum(n - 1 for n in per_job.values() if n > 1),
        lost=len(lost),
        duplicates=len(duplicates),
        recovery_s=recovery_s,
    )
    print(f"\n[{scenario}] {summary.line()}")
    assert not lost, f"{len(lost)} job(s) not COMPLETED, e.g. {lost[:5]}"
    assert not duplicates, f"{len(duplicates)} job(s) with several COMPLETED attempts"
    assert all(completed[j] == 1 for j in wanted), "a job has no COMPLETED attempt"
    assert not gaps, f"histories with unrecorded attempts (job, attempt, numbers): {gaps[:5]}"
    assert not unexplained, f"executions not explained by the history: {unexplained[:5]}"
    assert wanted <= set(per_job), "a job completed without any recorded execution"
    return summary


def run_for(seconds: float) -> float:
    """A deadline ``seconds`` from now (monotonic)."""
    return time.monotonic() + seconds


# -- a PostgreSQL cluster of the test's own --------------------------------------


def _pg_bindir() -> Path | None:
    configured = os.environ.get("WFJOBS_PG_BINDIR")
    if configured:
        return Path(configured)
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: p.parent)
    return versions[-1].parent if versions else None


def _as_postgres(args: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its programs as the ``postgres`` user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


class PgCluster:
    """A throw-away PostgreSQL cluster (``initdb`` + ``pg_ctl``) on a free port.

    The machine's shared server is never touched: every scenario that stops,
    restarts or fails over PostgreSQL does it to a cluster of its own, in a
    temporary directory removed by ``destroy``. Superuser ``root``, trust auth,
    TCP on 127.0.0.1 only.
    """

    def __init__(self, root: Path, name: str, port: int | None = None) -> None:
        self.root = root
        self.name = name
        self.data = root / name
        self.port = port or free_port()
        self.log = root / f"{name}.log"
        self.bindir = _pg_bindir()

    @classmethod
    def skip_unless_available(cls) -> None:
        bindir = _pg_bindir()
        if bindir is None or not (bindir / "initdb").exists():
            message = "PostgreSQL server binaries (initdb, pg_ctl) not found; set WFJOBS_PG_BINDIR"
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(message)
            pytest.skip(message)

    @staticmethod
    def workspace() -> Path:
        """A temporary directory the ``postgres`` user may write to."""
        root = Path(tempfile.mkdtemp(prefix="wfj-pg-"))
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        return root

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self.bindir is not None
        command = _as_postgres([str(self.bindir / args[0]), *args[1:]])
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise AssertionError(f"{' '.join(args)} failed: {result.stderr}{result.stdout}\n{log}")
        return result

    def init(self, **settings: str) -> PgCluster:
        self._run("initdb", "-D", str(self.data), "-U", "root", "--auth=trust", "-N", "-E", "UTF8")
        self.configure(**settings)
        return self

    def configure(self, **settings: str) -> None:
        """Append settings to postgresql.conf (the last occurrence wins)."""
        base = {
            "port": str(self.port),
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.data}'",
            "fsync": "off",
            "max_connections": "200",
        }
        base.update(settings)
        lines = "".join(f"{k} = {v}\n" for k, v in base.items())
        self._append(self.data / "postgresql.conf", lines)

    def _append(self, path: Path, text: str) -> None:
        with open(path, "a") as f:
            f.write(text)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m immediate`` is a crash (recovery on start); ``fast`` a clean stop."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def promote(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote")

    def admin_url(self, database: str = "postgres") -> str:
        return f"postgresql://root@127.0.0.1:{self.port}/{database}"

    def url(self, database: str = "wfjobs") -> str:
        return f"postgresql+psycopg://root@127.0.0.1:{self.port}/{database}"

    def create_database(self, database: str = "wfjobs") -> str:
        with psycopg.connect(self.admin_url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')
        return self.url(database)

    def standby(self, name: str) -> PgCluster:
        """A streaming standby of this cluster, made with ``pg_basebackup`` (not started)."""
        replica = PgCluster(self.root, name)
        replica.bindir = self.bindir
        self._run(
            "pg_basebackup",
            "-h", "127.0.0.1",
            "-p", str(self.port),
            "-U", "root",
            "-D", str(replica.data),
            "-X", "stream",
        )  # fmt: skip
        self._append(replica.data / "standby.signal", "")
        # The copy carries the primary's settings; a standby (and the primary it
        # may become) waits for no synchronous standby of its own.
        replica.configure(
            synchronous_standby_names="''",
            primary_conninfo=f"'host=127.0.0.1 port={self.port} user=root application_name={name}'",
        )
        return replica

    def destroy(self) -> None:
        if self.data.exists() and self.running():
            self.stop("immediate")


def listening_sessions(database: str) -> int:
    """Sessions of ``database`` that are a coordinator's LISTEN connection (the
    session's last statement: LISTEN wfj_events follows LISTEN wfj_wake when
    the coordinator serves event watchers, and the listener's liveness ping
    repeats it)."""
    from conftest import PG_ADMIN_URL

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
            "AND query IN ('LISTEN wfj_wake', 'LISTEN wfj_events')",
            (database,),
        ).fetchone()
    return int(row[0]) if row else 0


def health_status(target: str, timeout: float = 5) -> int:
    """The coordinator's grpc.health.v1 status (UNKNOWN when it does not answer)."""
    with grpc.insecure_channel(target) as channel:
        try:
            return (
                health_pb2_grpc.HealthStub(channel)
                .Check(health_pb2.HealthCheckRequest(), timeout=timeout)
                .status
            )
        except grpc.RpcError:
            return health_pb2.HealthCheckResponse.UNKNOWN


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def wait_health(targets: Iterable[str], status: int, timeout: float, what: str) -> None:
    targets = list(targets)
    wait_until(
        lambda: all(health_status(t) == status for t in targets), timeout, what, interval=0.1
    )


class SteadyEnqueuer:
    """Enqueues ``work`` jobs in a background thread until stopped, through an outage.

    Each job has an idempotency key, and a call that fails (UNAVAILABLE while
    the database is gone, DEADLINE_EXCEEDED) is retried with the same key until
    it is acknowledged: ``acknowledged`` holds the id of every job the
    coordinator confirmed, the ones a scenario must find COMPLETED at the end.
    """

    def __init__(
        self, target: str, *, batch: int = 20, ms: int = 5, prefix: str = "steady"
    ) -> None:
        self.target = target
        self.batch = batch
        self.ms = ms
        self.prefix = prefix
        self.acknowledged: list[str] = []
        self.failed_calls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-enqueuer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        with SchedulerClient(self.target, timeout=10) as scheduler:
            while not self._stop.is_set():
                batch = [
                    JobRequest(
                        "work",
                        {"n": i, "ms": self.ms},
                        tenant_id=f"tenant-{i % 4}",
                        heartbeat_timeout=2.0,
                        max_attempts=100,
                        idempotency_key=f"{self.prefix}-{i}",
                    )
                    for i in range(n, n + self.batch)
                ]
                while not self._stop.is_set():
                    try:
                        replies = scheduler.enqueue_batch(batch)
                    except (UnavailableError, DeadlineExceededError):
                        self.failed_calls += 1
                        self._stop.wait(0.1)
                        continue
                    self.acknowledged.extend(r.job_id for r in replies)
                    break
                n += self.batch
                self._stop.wait(0.02)

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the enqueuer did not stop"
        return list(dict.fromkeys(self.acknowledged))


class StallingProxy:
    """Forwards TCP to ``upstream`` while ``flowing`` is set; holds bytes otherwise."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.flowing = asyncio.Event()
        self.flowing.set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers += [writer, up_writer]
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pump(src, dst))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await src.read(65536):
                await self.flowing.wait()
                dst.write(data)
                await dst.drain()
        dst.close()

    async def close(self) -> None:
        self.server.close()
        for task in list(self._tasks):
            task.cancel()
        for writer in self._writers:
            writer.close()


class StalledPath:
    """A ``StallingProxy`` on an event loop of its own (a thread), for
    synchronous tests: ``port`` forwards to ``upstream_port`` until ``stall``,
    and again after ``resume``. Connections stay open throughout, and while
    stalled new ones are accepted and held, as a hung network path does."""

    def __init__(self, upstream_port: int) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.proxy = StallingProxy(upstream_port)
        self.port = self._call(self.proxy.start())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def stall(self) -> None:
        self._loop.call_soon_threadsafe(self.proxy.flowing.clear)

    def resume(self) -> None:
        self._loop.call_soon_threadsafe(self.proxy.flowing.set)

    def url(self, direct_url: str) -> str:
        """``direct_url`` with host and port replaced by the proxy's."""
        parsed = sa.engine.make_url(direct_url)
        return parsed.set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)

    def close(self) -> None:
        self.resume()
        self._call(self.proxy.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


class PgBouncer:
    """Debian's ``pgbouncer`` on a free port in front of ``upstream_port``.

    Trust authentication, every database passed through, ``pool_mode`` as
    given (``transaction`` for the scenarios). Runs as the ``postgres`` user
    when the tests run as root (PgBouncer refuses root).
    """

    def __init__(self, root: Path, upstream_port: int, pool_mode: str = "transaction") -> None:
        self.root = root
        self.port = free_port()
        self.ini = root / "pgbouncer.ini"
        self.log = root / "pgbouncer.log"
        (root / "userlist.txt").write_text('"root" ""\n')
        self.ini.write_text(
            "[databases]\n"
            f"* = host=127.0.0.1 port={upstream_port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {root / 'userlist.txt'}\n"
            f"pool_mode = {pool_mode}\n"
            "max_client_conn = 500\n"
            "default_pool_size = 20\n"
            f"logfile = {self.log}\n"
            f"pidfile = {root / 'pgbouncer.pid'}\n"
        )
        if os.geteuid() == 0:
            for path in (root, self.ini, root / "userlist.txt"):
                shutil.chown(path, "postgres", "postgres")
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def skip_unless_available() -> None:
        if shutil.which("pgbouncer") is None:
            message = "pgbouncer not installed (apt-get install pgbouncer)"
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(message)
            pytest.skip(message)

    def start(self) -> None:
        binary = shutil.which("pgbouncer")
        assert binary is not None
        self.proc = subprocess.Popen(
            _as_postgres([binary, str(self.ini)]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._accepting, 30, f"pgbouncer to accept connections (log: {self.log})")

    def _accepting(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise AssertionError(f"pgbouncer exited: {log[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL (every client and server connection drops at once)."""
        if self.proc is not None and self.proc.poll() is None:
            # runuser forwards nothing on SIGKILL: kill pgbouncer itself.
            pid = int((self.root / "pgbouncer.pid").read_text())
            os.kill(pid, 9)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def url(self, direct_url: str) -> str:
        """``direct_url`` with host and port replaced by the pooler's."""
        parsed = sa.engine.make_url(direct_url)
        return parsed.set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)
