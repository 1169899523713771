"""A database password never appears in a log line, an error message or a settings dump."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

import pytest
from conftest import new_pg_database

from coordinator.masking import display_url, mask_credentials
from coordinator.settings import Settings
from coordinator.store import open_store
from coordinator.telemetry.logs import MaskingFormatter, configure_logging
from wfj_testing import subprocess_env

SECRET = "s3cret-Pa55"


def _with_password(url: str) -> str:
    """``url`` (postgresql+psycopg://root@host/db) with a password (trust auth ignores it)."""
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{SECRET}@{host}"


def _run_coordinator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(),
    )


@pytest.fixture
def empty_pg_url_with_password(pg_database: str) -> str:
    url, drop = new_pg_database("wfj_mask")
    try:
        yield _with_password(url)
    finally:
        drop()  # type: ignore[operator]


def test_schema_check_failure_masks_the_password(empty_pg_url_with_password: str) -> None:
    store = open_store(empty_pg_url_with_password)
    try:
        with pytest.raises(Exception) as raised:
            store.check_schema()
    finally:
        store.dispose()
    assert SECRET not in str(raised.value)
    assert ":***@" in str(raised.value), raised.value

    done = _run_coordinator(
        "serve", "--listen", "127.0.0.1:0", "--database-url", empty_pg_url_with_password
    )
    assert done.returncode == 2, done.stderr
    assert "no workflow-jobs schema" in done.stderr
    assert SECRET not in done.stderr + done.stdout
    assert ":***@" in done.stderr


def test_connection_failure_masks_the_password() -> None:
    url = f"postgresql://root:{SECRET}@127.0.0.1:1/nothing"
    done = _run_coordinator("migrate", "--database-url", url)
    assert done.returncode == 3, done.stderr
    assert "cannot reach the database" in done.stderr
    assert SECRET not in done.stderr + done.stdout


@pytest.mark.parametrize(
    "url",
    [f"mysql://root:{SECRET}@127.0.0.1/db", f"not a url root:{SECRET}@host"],
    ids=["unsupported-dialect", "unparsable"],
)
@pytest.mark.parametrize("command", ["serve", "migrate"])
def test_cli_rejects_an_unusable_url_without_showing_its_password(command: str, url: str) -> None:
    args = ["--listen", "127.0.0.1:0"] if command == "serve" else []
    done = _run_coordinator(command, *args, "--database-url", url)
    assert done.returncode == 5, done.stderr
    assert "is not one this coordinator can open" in done.stderr
    assert "Traceback" not in done.stderr
    assert SECRET not in done.stderr + done.stdout


def test_settings_dump_masks_the_password() -> None:
    settings = Settings(database_url=f"postgresql+psycopg://root:{SECRET}@db:5432/jobs")
    shown = repr(settings)
    assert SECRET not in shown and str(settings).count(SECRET) == 0
    assert "postgresql+psycopg://root:***@db:5432/jobs" in shown
    # The value itself is untouched: the coordinator still connects with it.
    assert SECRET in settings.database_url


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_log_lines_mask_passwords_in_messages_and_tracebacks(log_format: str) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging(log_format, "INFO")
    out = io.StringIO()
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(out)
    try:
        log = logging.getLogger("coordinator.test")
        log.error("cannot use %s", f"postgresql://root:{SECRET}@db/jobs")
        try:
            raise RuntimeError(f"driver said: host=db password={SECRET} user=root")
        except RuntimeError:
            log.exception("store failed")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    text = out.getvalue()
    assert "cannot use" in text and "driver said" in text
    assert SECRET not in text, text
    assert "postgresql://root:***@db/jobs" in text


def test_masking_helpers() -> None:
    assert display_url(f"postgresql://u:{SECRET}@h:5432/d") == "postgresql://u:***@h:5432/d"
    assert display_url("sqlite:///var/lib/wfjobs.db") == "sqlite:///var/lib/wfjobs.db"
    assert display_url("postgresql://u@h/d") == "postgresql://u@h/d"
    assert SECRET not in display_url(f"postgresql://u:{SECRET}@h/d?password={SECRET}")
    # A raw '@' inside the password is masked too.
    assert mask_credentials(f"x postgresql://u:a@{SECRET}@h/d y") == "x postgresql://u:***@h/d y"
    formatter = MaskingFormatter(logging.Formatter("%(message)s"))
    record = logging.LogRecord("n", logging.INFO, "f", 1, "url %s", (f"pg://u:{SECRET}@h",), None)
    assert formatter.format(record) == "url pg://u:***@h"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"postgresql://root:{SECRET}@db-a:5432,db-b:5432/jobs?target_session_attrs=read-write",
            "postgresql://root:***@db-a:5432,db-b:5432/jobs?target_session_attrs=read-write",
        ),
        (
            "postgresql://root@db-a:5432,db-b:5432/jobs",
            "postgresql://root@db-a:5432,db-b:5432/jobs",
        ),
        (f"root:{SECRET}@db-a,db-b/jobs", "root:***@db-a,db-b/jobs"),
    ],
)
def test_a_multi_host_url_shows_its_user_and_hides_only_the_password(url: str, shown: str) -> None:
    assert display_url(url) == shown
