"""The coordinator's PostgreSQL sessions keep generic plans: a statement run
again is not planned again (``plan_cache_mode``, coordinator/store/base.py)."""

from __future__ import annotations

import base64
import json

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
            for _ in range(8):  # psycopg prepares it on its second run
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
    assert (generic, custom) == (7, 0)  # the seven runs after it was prepared


def test_the_plan_cache_mode_can_be_set_back(store_url: str, monkeypatch) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite has no plan cache setting")
    monkeypatch.setenv("WFJOBS_PLAN_CACHE_MODE", "auto")
    mode, generic, custom = _plans(store_url)
    # The server's default: the first five runs of a prepared statement are planned each
    # time; after them the planner keeps custom plans or takes a generic one by its cost
    # estimate, which depends on the table's statistics.
    assert mode == "auto"
    assert custom >= 5 and generic + custom == 7, (generic, custom)


def test_an_unknown_plan_cache_mode_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("WFJOBS_PLAN_CACHE_MODE", "sometimes")
    with pytest.raises(ValueError, match="WFJOBS_PLAN_CACHE_MODE='sometimes' is not one of"):
        plan_cache_mode_setting()


def test_the_group_commit_insert_is_one_statement_for_every_size() -> None:
    """A group commit of 1 or of 12 single enqueues sends the same statement
    text (the jobs are one JSON parameter), so a session plans it once for every size."""
    from coordinator.model import DirectLeases
    from coordinator.store.jobs import _insert_small_statement
    from wfj_testing import make_job

    texts = set()
    for size in (1, 2, 5, 12):
        batch = [make_job() for _ in range(size)]
        sql, params = _insert_small_statement(batch, None, keyed=False)
        texts.add(sql)
        records = json.loads(params["records"])
        assert [r["id"] for r in records] == [j.id for j in batch]
        assert [r["owner"] for r in records] == [None] * size
        assert [base64.b64decode(r["payload"]) for r in records] == [j.payload for j in batch]
    assert len(texts) == 1
    # Offered jobs (direct dispatch) and keyed jobs are a shape each, again one for every size.
    offered = set()
    for size in (1, 3):
        batch = [make_job() for _ in range(size)]
        direct = DirectLeases({batch[0].id: "worker-1"}, "token", 0, 30_000)
        offered.add(_insert_small_statement(batch, direct, keyed=True)[0])
    assert len(offered) == 1 and offered.isdisjoint(texts)
