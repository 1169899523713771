"""The bench's private PostgreSQL cluster: its own server, with pg_stat_statements.

`python -m bench --private-cluster` runs every figure on a cluster of its own
(``initdb`` once into `DATA_DIR`, started on a free loopback port for the run
and stopped after it). PostgreSQL refuses to run as
root: run as root, the bench runs the server's programs as the `postgres` user.
The cluster is the machine's shared server's configuration (fsync on,
128 MB shared buffers, autovacuum off) plus `pg_stat_statements` with
planning tracked, which the per-statement cost tables read
(`bench.statements`); and no other work runs on it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

DATA_DIR = Path(tempfile.gettempdir()) / "wfjobs-bench-pg"
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''",
    "max_connections": "300",
    "shared_buffers": "'128MB'",
    "fsync": "on",
    "autovacuum": "off",
    "max_wal_size": "'1GB'",
    "shared_preload_libraries": "'pg_stat_statements'",
    "pg_stat_statements.track_planning": "on",
    "pg_stat_statements.max": "1000",
    "timezone": "'UTC'",
}


def _bindir() -> Path:
    if os.environ.get("WFJOBS_PG_BINDIR"):
        return Path(os.environ["WFJOBS_PG_BINDIR"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError(
            "PostgreSQL server binaries (initdb, pg_ctl) not found; set "
            "WFJOBS_PG_BINDIR, or BENCH_PGPORT to use a running server"
        )
    return Path(initdb).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg(*argv: str, check: bool = True) -> None:
    command = list(argv)
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, check=check, stdout=subprocess.DEVNULL)


@contextlib.contextmanager
def private_cluster(data_dir: Path = DATA_DIR) -> Iterator[int]:
    """Start the bench's own cluster (created on first use); yields its port."""
    bindir = _bindir()
    if not (data_dir / "PG_VERSION").exists():
        shutil.rmtree(data_dir, ignore_errors=True)
        data_dir.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(data_dir, "postgres", "postgres")
        _pg(
            str(bindir / "initdb"),
            "-D",
            str(data_dir),
            "-U",
            "root",
            "--auth=trust",
            "-N",
            "-E",
            "UTF8",
        )
    port = _free_port()
    (data_dir / "postgresql.auto.conf").write_text(
        "".join(f"{k} = {v}\n" for k, v in {**SETTINGS, "port": str(port)}.items())
    )
    _pg(
        str(bindir / "pg_ctl"),
        "-D",
        str(data_dir),
        "-l",
        str(data_dir / "server.log"),
        "-w",
        "-t",
        "120",
        "start",
    )
    try:
        yield port
    finally:
        _pg(
            str(bindir / "pg_ctl"),
            "-D",
            str(data_dir),
            "-m",
            "fast",
            "-w",
            "-t",
            "120",
            "stop",
            check=False,
        )
