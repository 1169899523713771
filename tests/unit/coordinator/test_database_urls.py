"""Database URLs naming several PostgreSQL hosts (a primary and its standbys)."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.config import Config
from conftest import PG_ADMIN_URL, new_pg_database
from psycopg.conninfo import conninfo_to_dict

from coordinator.store.base import create_sa_engine, postgres_connect_args
from coordinator.store.migrate import MIGRATIONS_DIR, VERSION_TABLE
from coordinator.store.schema import SCHEMA_REVISION
from coordinator.store.urls import libpq_conninfo, normalize_url

LIBPQ_FORM = "postgresql://root:p%40ss@db-a:5001,db-b:5002/jobs?target_session_attrs=read-write"
SQLALCHEMY_FORM = (
    "postgresql+psycopg://root:p%40ss@/jobs?host=db-a:5001&host=db-b:5002"
    "&target_session_attrs=read-write"
)


def test_libpq_multi_host_url_is_rewritten_to_sqlalchemy_hosts() -> None:
    assert normalize_url(LIBPQ_FORM) == SQLALCHEMY_FORM


@pytest.mark.parametrize("url", [LIBPQ_FORM, SQLALCHEMY_FORM])
def test_every_host_and_option_reaches_libpq(url: str) -> None:
    params = conninfo_to_dict(libpq_conninfo(url))
    assert params["host"] == "db-a,db-b"
    assert params["port"] == "5001,5002"
    assert params["target_session_attrs"] == "read-write"
    assert (params["dbname"], params["user"], params["password"]) == ("jobs", "root", "p@ss")


@pytest.mark.parametrize("url", [LIBPQ_FORM, SQLALCHEMY_FORM])
def test_the_pool_connects_with_every_host(url: str) -> None:
    engine = create_sa_engine(url)
    try:
        _, kwargs = engine.dialect.create_connect_args(engine.url)
    finally:
        engine.dispose()
    assert (kwargs["host"], kwargs["port"]) == ("db-a,db-b", "5001,5002")
    assert kwargs["target_session_attrs"] == "read-write"


@pytest.mark.parametrize(
    "url",
    ["sqlite:///jobs.db", "postgresql://root@127.0.0.1:5432/jobs", "postgresql+psycopg://u@h/db"],
)
def test_single_host_urls_are_left_alone(url: str) -> None:
    assert normalize_url(url) == url


def test_single_host_url_becomes_a_plain_conninfo() -> None:
    params = conninfo_to_dict(libpq_conninfo("postgresql://root@127.0.0.1:5432/jobs"))
    assert params == {"host": "127.0.0.1", "port": "5432", "dbname": "jobs", "user": "root"}


TWICE = (
    "postgresql://root@db-a:5001,db-b:5002/jobs?options=-c%20work_mem%3D8MB"
    "&options=-c%20lock_timeout%3D5s&target_session_attrs=any&target_session_attrs=read-write"
)


def test_an_option_given_twice_reaches_libpq_as_the_last_one() -> None:
    params = conninfo_to_dict(libpq_conninfo(TWICE))
    assert params["options"] == "-c lock_timeout=5s"
    assert params["target_session_attrs"] == "read-write"
    assert params["host"] == "db-a,db-b"


def test_an_option_given_twice_reaches_the_pool_as_the_last_one() -> None:
    # Behind a transaction pooler the URL's options go to the server as given.
    pooled = postgres_connect_args(TWICE, prepare=False)
    assert (pooled["options"], pooled["target_session_attrs"]) == (
        "-c lock_timeout=5s",
        "read-write",
    )
    direct = postgres_connect_args(TWICE, prepare=True)
    assert direct["target_session_attrs"] == "read-write"
    assert "-c lock_timeout=5s" in direct["options"] and "work_mem" not in direct["options"]


def test_the_alembic_command_line_accepts_a_multi_host_url(pg_database: str) -> None:
    """``alembic upgrade`` (env.py run without a connection) reads the same URL
    forms as the coordinator: a libpq multi-host URL reaches the database."""
    url, drop = new_pg_database("wfj_alembic")
    try:
        name = url.rsplit("/", 1)[1]
        user = PG_ADMIN_URL.split("://", 1)[1].split("@", 1)[0]
        # The same server named twice: libpq tries the hosts in order.
        multi = f"postgresql://{user}@127.0.0.1:5432,127.0.0.1:5432/{name}"
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.set_main_option("sqlalchemy.url", multi)
        command.upgrade(config, "head")
        engine = create_sa_engine(url)
        try:
            with engine.connect() as conn:
                revision = conn.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}")
                assert revision.scalar() == SCHEMA_REVISION
        finally:
            engine.dispose()
    finally:
        drop()  # type: ignore[operator]
