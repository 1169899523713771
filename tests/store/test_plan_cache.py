"""The coordinator's PostgreSQL sessions keep generic plans: a statement run
again is not planned again (``plan_cache_mode``, coordinator/store/base.py)."""

from __future__ import annotations

import pytest

from coordinator.store import open_store
from coordinator.store.base import plan_cache_mode_setting

_PROBE = "SELECT count(*) FROM wfj_jobs WHERE tenant_id = ANY(%(t)s)"


def _plans(url: str) -> tuple[str, int, int]:
    """(plan_cache_mode, generic plans, custom plans) after the probe ran 8 times."""
    store = open_store(url)
    try:
        with store.engine.connect() as conn:
            mode = conn.exec_driver_sql("SHOW plan_cache_mode").scalar_one()
            for _ in range(8):  # psycopg prepares it on its fifth run
                conn.exec_driver_sql(_PROBE, {"t": ["a", "b"]}).scalar_one()
            generic, custom = conn.exec_driver_sql(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'SELECT count(*) FROM wfj_jobs WHERE tenant_id%%'"
            ).one()
    finally:
        store.dispose()
    return str(mode), int(generic), int(custom)


def test_a_prepared_statement_is_planned_once(store_url: str) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite has no plan cache setting")
    mode, generic, custom = _plans(store_url)
    assert mode == "force_generic_plan"
    assert (generic, custom) == (3, 0)  # the three runs after it was prepared


def test_the_plan_cache_mode_can_be_set_back(store_url: str, monkeypatch) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite has no plan cache setting")
    monkeypatch.setenv("WFJOBS_PLAN_CACHE_MODE", "auto")
    mode, generic, custom = _plans(store_url)
    # The server's default: the first five runs of a prepared statement are planned each time.
    assert mode == "auto"
    assert custom == 3


def test_an_unknown_plan_cache_mode_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("WFJOBS_PLAN_CACHE_MODE", "sometimes")
    with pytest.raises(ValueError, match="WFJOBS_PLAN_CACHE_MODE='sometimes' is not one of"):
        plan_cache_mode_setting()
