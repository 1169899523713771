"""ExplainJob reasons and pause without churn, on both stores."""

from __future__ import annotations

import dataclasses

from coordinator.engine import WorkerSession
from coordinator.engine.explain import explain
from coordinator.model import ConcurrencyLimit, JobStatus, LimitKind, PauseKind, PauseScope
from wfj_engine import Harness, run
from wfj_testing import SECOND, T0, make_job


def kinds(reasons) -> list[str]:
    return [r.kind for r in reasons]


def test_explain_each_reason(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        serving = WorkerSession("w-explain", frozenset({"noop"}))
        h.engine.open_session(serving)
        ahead = [make_job(tenant_id="t") for _ in range(3)]
        await h.engine.enqueue(ahead)
        job_id = await h.enqueue(tenant_id="t", due_at=T0 + 60 * SECOND, definition_id="d-x")
        _, reasons = await explain(h.engine, job_id)
        assert kinds(reasons) == ["NOT_DUE", "QUEUED_BEHIND"]
        assert reasons[0].until == T0 + 60 * SECOND
        h.clock.advance(61)
        _, reasons = await explain(h.engine, job_id)
        assert kinds(reasons) == ["QUEUED_BEHIND"]
        assert reasons[0].count == 3

        await h.engine.pause(PauseScope(PauseKind.DEFINITION, "", "d-x"), "ana", "bad deploy", None)
        await h.engine.pause(PauseScope(PauseKind.TENANT, "t"), "bo", "", None)
        _, reasons = await explain(h.engine, job_id)
        assert kinds(reasons)[:2] == ["PAUSED", "TENANT_DISABLED"]
        assert "definition d-x is paused by ana" in reasons[0].message
        assert "bad deploy" in reasons[0].message
        await h.engine.unpause(PauseScope(PauseKind.DEFINITION, "", "d-x"), "ana")
        await h.engine.unpause(PauseScope(PauseKind.TENANT, "t"), "bo")

        await h.engine.set_limit(ConcurrencyLimit(LimitKind.TENANT, "t", 1))
        h.engine.close_session(serving)
        leased = await h.lease(1)
        assert len(leased) == 1
        _, reasons = await explain(h.engine, job_id)
        assert "CONCURRENCY_LIMIT" in kinds(reasons)
        limit = next(r for r in reasons if r.kind == "CONCURRENCY_LIMIT")
        assert (limit.count, limit.limit) == (1, 1)
        assert "NO_WORKER" in kinds(reasons)

        row, reasons = await explain(h.engine, leased[0][0].id)
        assert kinds(reasons) == ["LEASED"]
        assert "w1" in reasons[0].message

    run(store_url, scenario)


def test_explain_eligible_job_has_no_reasons(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        h.engine.open_session(WorkerSession("w", frozenset({"noop"})))
        job_id = await h.enqueue()
        _, reasons = await explain(h.engine, job_id)
        assert reasons == []

    run(store_url, scenario)


def test_pause_without_churn(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        paused = [make_job(tenant_id="acme", definition_id="billing") for _ in range(10_000)]
        for i in range(0, len(paused), 2_500):
            await h.engine.enqueue(paused[i : i + 2_500])
        await h.engine.pause(PauseScope(PauseKind.DEFINITION, "acme", "billing"), "ops", "", None)
        ids = [j.id for j in paused]
        before = {r.id: dataclasses.astuple(r) for r in await h.engine._call(h.engine.store.job_get_many, ids)}
        await h.engine.enqueue(
            [make_job(tenant_id="acme", definition_id="other") for _ in range(300)]
        )
        got = 0
        for _ in range(10):
            leased = await h.lease(50)
            assert all(row.definition_id == "other" for row, _ in leased)
            got += len(leased)
            h.clock.advance(1)
        assert got == 300
        after = {r.id: dataclasses.astuple(r) for r in await h.engine._call(h.engine.store.job_get_many, ids)}
        assert after == before, "a paused row was touched"
        await h.engine.unpause(PauseScope(PauseKind.DEFINITION, "acme", "billing"), "ops")
        leased = await h.lease(500)
        assert len(leased) == 500
        assert {row.status for row, _ in leased} == {JobStatus.RUNNING}

    run(store_url, scenario)
