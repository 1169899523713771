"""A tenant-scoped worker session only ever receives its tenants' jobs (both stores)."""

from __future__ import annotations

from coordinator.engine import LeaseBatch, WorkerSession
from wfj_engine import Harness, run
from wfj_testing import make_job


def test_scoped_session_gets_only_its_tenants_jobs(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.enqueue([make_job(tenant_id=t) for t in ("a", "b", "c") for _ in range(20)])
        scoped = WorkerSession("scoped", frozenset({"noop"}), tenants=frozenset({"a", "c"}))
        h.engine.open_session(scoped)
        h.engine.grant(scoped, 100)
        while await h.engine.dispatcher.run_pass():
            pass
        got = []
        while not scoped.outbox.empty():
            item = scoped.outbox.get_nowait()
            if isinstance(item, LeaseBatch):
                got.extend(item.jobs)
        assert len(got) == 40
        assert {row.tenant_id for row in got} == {"a", "c"}
        # Tenant b's jobs are still there for a worker allowed to see them.
        h.engine.close_session(scoped)
        leased = await h.lease(100)
        assert {row.tenant_id for row, _ in leased} == {"b"} and len(leased) == 20

    run(store_url, scenario)
