"""``python -m coordinator migrate`` says what it did to the schema."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from coordinator.store import open_store
from coordinator.store.migrate import upgrade
from coordinator.store.schema import SCHEMA_REVISION
from wfj_testing import subprocess_env


def migrate(url: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "coordinator", "migrate", "--database-url", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=subprocess_env(),
    )
    assert result.returncode == 0, result.stderr
    return result.stderr + result.stdout


def test_a_new_database_is_created_then_up_to_date(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"

    first, second = migrate(url), migrate(url)

    assert f"created the schema of {url} (revision {SCHEMA_REVISION})" in first
    assert "up to date" not in first
    assert f"schema of {url} is up to date (revision {SCHEMA_REVISION}); nothing to do" in second


def test_an_older_schema_is_migrated_from_its_revision(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = open_store(url)
    try:
        result = upgrade(store, "0002")
    finally:
        store.dispose()
    assert (result.before, result.after) == (None, "0002")

    assert f"migrated the schema of {url} from revision 0002 to {SCHEMA_REVISION}" in migrate(url)
