"""Two bench runs on one PostgreSQL server: the second is refused, naming the first.

Every run drops and re-creates the same bench databases, so two at once would
break each other's figures. Each test uses a lock key of its own, so a real
bench run on the same server is never disturbed.
"""

from __future__ import annotations

import random

import psycopg
import pytest
from conftest import PG_ADMIN_URL

from bench.config import BenchConfig
from bench.database import PostgresServer, ServerBusy


@pytest.fixture
def server(pg_database: str) -> PostgresServer:
    info = psycopg.conninfo.conninfo_to_dict(PG_ADMIN_URL)
    return PostgresServer(
        host=str(info.get("host", "127.0.0.1")),
        port=int(info.get("port", 5432)),
        user=str(info.get("user", "root")),
        lock=random.randrange(1 << 20, 1 << 30),
    )


def test_a_second_run_on_the_server_is_refused_naming_the_first(server: PostgresServer) -> None:
    with server.exclusive():
        with server.connect() as conn:
            [first_pid] = conn.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = %s",
                (server.lock,),
            ).fetchone() or [None]
        with pytest.raises(ServerBusy) as busy, server.exclusive():
            pytest.fail("a second holder was let in")
    message = str(busy.value)
    assert f"backend pid {first_pid}" in message
    assert f"{server.host}:{server.port}" in message
    assert "BENCH_PGPORT" in message
    # Released when the first run ends: the next one goes ahead.
    with server.exclusive():
        pass


def test_the_bench_exits_3_with_the_message_while_another_run_holds_the_server(
    server: PostgresServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import __main__ as cli

    monkeypatch.setattr(cli, "BenchConfig", lambda: BenchConfig(server=server))
    with server.exclusive():
        assert cli.main(["ordering", "--quick"]) == 3
    out = capsys.readouterr()
    assert "another bench run is using the bench databases" in out.err
    assert "== ordering" not in out.out
