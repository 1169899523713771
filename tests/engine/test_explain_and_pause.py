"""ExplainJob reasons and pause without churn, on both stores."""

from __future__ import annotations

import dataclasses

import pytest

from coordinator.engine import Engine, EngineConfig, WorkerSession
from coordinator.engine.explain import _when, explain
from coordinator.errors import FailedPrecondition, InvalidArgument, NotFound
from coordinator.model import (
    ConcurrencyLimit,
    JobStatus,
    LimitKind,
    PauseKind,
    PauseScope,
    WorkerRecord,
)
from coordinator.store import open_store
from wfj_engine import Harness, chores_of, run
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


def test_explain_says_which_tenants_share_the_workers_and_at_what_weight(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        h.engine.open_session(WorkerSession("w", frozenset({"noop", "other"})))
        job_id = await h.enqueue(tenant_id="small")
        # Another tenant's job of another type, and a third tenant's job that
        # is not due yet, compete with nothing.
        await h.enqueue(tenant_id="elsewhere", job_type="other")
        await h.enqueue(tenant_id="later", due_at=T0 + 60 * SECOND)
        _, reasons = await explain(h.engine, job_id)
        assert reasons == []
        for tenant in ("big", "bigger"):
            await h.enqueue(tenant_id=tenant)
        await h.engine.set_tenant_weight("big", 3)
        _, reasons = await explain(h.engine, job_id)
        assert kinds(reasons) == ["FAIR_SHARE"]
        assert reasons[0].count == 2
        assert (
            "tenant small shares the workers of job type 'noop' with 2 other tenant(s) that "
            "have eligible jobs of it (big, bigger): while they all do, it gets 1 of every 5 "
            "starts" in reasons[0].message
        )
        assert "wfjobs tenants set-weight small N" in reasons[0].message
        # A disabled tenant's jobs, and a paused instance's, compete with nothing.
        await h.engine.pause(PauseScope(PauseKind.TENANT, "bigger"), "ops", "", None)
        await h.enqueue(tenant_id="held-up", instance_id="stuck")
        await h.engine.pause(PauseScope(PauseKind.INSTANCE, "held-up", "stuck"), "ops", "", None)
        _, reasons = await explain(h.engine, job_id)
        assert "with 1 other tenant(s) that have eligible jobs of it (big)" in reasons[0].message
        await h.engine.unpause(PauseScope(PauseKind.TENANT, "bigger"), "ops")
        # A caller scoped to some tenants hears only of those.
        _, reasons = await explain(h.engine, job_id, frozenset({"small", "bigger"}))
        assert kinds(reasons) == ["FAIR_SHARE"] and reasons[0].count == 1
        assert "with 1 other tenant(s) that have eligible jobs of it (bigger)" in reasons[0].message
        assert "it gets 1 of every 2 starts" in reasons[0].message
        _, reasons = await explain(h.engine, job_id, frozenset({"small"}))
        assert reasons == []

    run(store_url, scenario)


def test_pause_without_churn(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        paused = [make_job(tenant_id="acme", definition_id="billing") for _ in range(10_000)]
        for i in range(0, len(paused), 2_500):
            await h.engine.enqueue(paused[i : i + 2_500])
        await h.engine.pause(PauseScope(PauseKind.DEFINITION, "acme", "billing"), "ops", "", None)
        ids = [j.id for j in paused]
        before = {
            r.id: dataclasses.astuple(r)
            for r in await h.engine.run_store(h.engine.store.job_get_many, ids)
        }
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
        after = {
            r.id: dataclasses.astuple(r)
            for r in await h.engine.run_store(h.engine.store.job_get_many, ids)
        }
        assert after == before, "a paused row was touched"
        await h.engine.unpause(PauseScope(PauseKind.DEFINITION, "acme", "billing"), "ops")
        leased = await h.lease(500)
        assert len(leased) == 500
        assert {row.status for row, _ in leased} == {JobStatus.RUNNING}

    run(store_url, scenario)


# -- the cluster view: workers on other replicas, drained workers, gone lease holders -------


def _replica(h: Harness, coordinator_id: str = "c2") -> Engine:
    return Engine(
        open_store(h.engine.store.url), EngineConfig(), clock=h.clock, coordinator_id=coordinator_id
    )


def test_explain_sees_workers_of_other_replicas(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        other = _replica(h)
        try:
            worker = WorkerSession("on-a", frozenset({"noop"}))
            h.engine.open_session(worker)
            await h.chores.cluster_sync.run_once()
            job_id = await h.enqueue()
            for engine in (h.engine, other):
                _, reasons = await explain(engine, job_id)
                assert "NO_WORKER" not in kinds(reasons), engine.coordinator_id
            # The worker leaves: every replica says so once its row is gone.
            h.engine.close_session(worker)
            await h.chores.cluster_sync.run_once()
            for engine in (h.engine, other):
                _, reasons = await explain(engine, job_id)
                [no_worker] = [r for r in reasons if r.kind == "NO_WORKER"]
                assert "on any coordinator serves job type 'noop'" in no_worker.message
        finally:
            await other.stop()

    run(store_url, scenario)


def test_explain_names_drained_workers_and_undrain_by_id(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        other = _replica(h)
        try:
            local = WorkerSession("w-local", frozenset({"noop"}))
            remote = WorkerSession("w-remote", frozenset({"noop", "x"}))
            h.engine.open_session(local)
            other.open_session(remote)
            for engine in (h.engine, other):
                await chores_of(engine).cluster_sync.run_once()
            job_id = await h.enqueue()
            await h.engine.ops.drain(cluster=False, worker_id="w-local")
            _, reasons = await explain(h.engine, job_id)
            assert "DRAINING" not in kinds(reasons)  # w-remote still serves it
            await h.engine.ops.drain(cluster=False, worker_id="w-remote")
            await chores_of(other).cluster_sync.run_once()  # applies the request, records it
            await chores_of(other).cluster_sync.run_once()
            await h.chores.cluster_sync.run_once()
            for engine in (h.engine, other):
                _, reasons = await explain(engine, job_id)
                [drained] = [r for r in reasons if r.kind == "DRAINING"]
                assert "every worker serving job type 'noop' is drained" in drained.message
                assert f"w-local (coordinator {h.engine.coordinator_id})" in drained.message
                assert "w-remote (coordinator c2)" in drained.message
                assert "wfjobs undrain --worker w-local" in drained.message
                assert drained.count == 2
                views = {w.worker_id: w.draining for w in await engine.ops.list_workers()}
                assert views == {"w-local": True, "w-remote": True}
            # Undrain by id, local and across replicas: the drained streams close,
            # so the workers reconnect and grant credit again.
            await other.ops.undrain(cluster=False, worker_id="w-local")
            await h.chores.cluster_sync.run_once()
            assert local.closed
            await h.engine.ops.undrain(cluster=False, worker_id="w-remote")
            assert not remote.closed
            await chores_of(other).cluster_sync.run_once()
            assert remote.closed
            with pytest.raises(NotFound, match="not connected to any coordinator"):
                await h.engine.ops.undrain(cluster=False, worker_id="nobody")
            again = WorkerSession("w-local", frozenset({"noop"}))
            h.engine.open_session(again)
            with pytest.raises(FailedPrecondition, match="'w-local' is not drained"):
                await h.engine.ops.undrain(cluster=False, worker_id="w-local")
            with pytest.raises(InvalidArgument, match="either cluster or worker_id"):
                await h.engine.ops.undrain(cluster=True, worker_id="w-local")
            _, reasons = await explain(h.engine, job_id)
            assert "DRAINING" not in kinds(reasons)
            # Drained with its coordinator: undrain the coordinator, not the worker.
            await h.engine.ops.drain(cluster=False, worker_id="")
            with pytest.raises(FailedPrecondition, match="coordinator drained by an operator"):
                await h.engine.ops.undrain(cluster=False, worker_id="w-local")
        finally:
            await other.stop()

    run(store_url, scenario)


def test_explain_says_when_a_gone_holders_lease_is_reclaimed(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        other = _replica(h)
        try:
            job_id = await h.enqueue(heartbeat_timeout_ms=30_000)
            [(row, _)] = await h.lease(1, worker="w-gone")  # the session closes after leasing
            expires = row.lease_expires_at
            _, [reason] = await explain(other, job_id)
            assert reason.kind == "LEASED" and reason.until == expires
            assert "w-gone, which is no longer connected to any coordinator" in reason.message
            assert f"reclaimed when it expires at {_when(expires)}" in reason.message
            assert "retried or faulted by its retry policy" in reason.message
            assert f"wfjobs jobs unlock {job_id}" in reason.message
            # Connected again (through the other replica): an ordinary lease.
            back = WorkerSession("w-gone", frozenset({"noop"}))
            other.open_session(back)
            await chores_of(other).cluster_sync.run_once()
            for engine in (h.engine, other):
                _, [reason] = await explain(engine, job_id)
                assert reason.message == f"running: leased by worker w-gone until {_when(expires)}"
            other.close_session(back)
            await chores_of(other).cluster_sync.run_once()
            await h.engine.ops.cancel_job(job_id, "")
            h.clock.advance(31)
            _, [reason] = await explain(h.engine, job_id)
            assert "by the next lease reaper run (it expired at" in reason.message
            assert "ends CANCELLED" in reason.message
        finally:
            await other.stop()

    run(store_url, scenario)


def test_last_seen_is_the_registrys_on_every_replica(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        other = _replica(h)
        try:
            worker = WorkerSession("idle", frozenset({"noop"}))
            h.engine.open_session(worker)  # connects at T0, never heartbeats
            await h.chores.cluster_sync.run_once()
            refresh = h.chores.cluster_sync.config.refresh_s
            h.clock.advance(refresh + 1)
            # Heartbeats and credit between refreshes write nothing.
            await h.engine.heartbeat("idle", [])
            h.engine.grant(worker, 1)
            seen = [
                {w.worker_id: w.last_seen_at for w in await e.ops.list_workers()}["idle"]
                for e in (h.engine, other)
            ]
            assert seen == [T0, T0]
            # The refresh vouches for the open stream: both replicas see it move.
            await h.chores.cluster_sync.run_once()
            seen = [
                {w.worker_id: w.last_seen_at for w in await e.ops.list_workers()}["idle"]
                for e in (h.engine, other)
            ]
            assert seen == [T0 + int((refresh + 1) * SECOND)] * 2
        finally:
            await other.stop()

    run(store_url, scenario)


def test_no_worker_when_the_workers_of_the_type_serve_other_tenants(store_url: str) -> None:
    """A worker whose credential covers tenant a never gets tenant b's job:
    ExplainJob says no worker serves it, on this replica and on another."""

    async def scenario(h: Harness) -> None:
        other = _replica(h)
        try:
            scoped = WorkerSession("only-a", frozenset({"noop"}), tenants=frozenset({"a"}))
            h.engine.open_session(scoped)
            await h.chores.cluster_sync.run_once()
            job_id = await h.enqueue(tenant_id="b")
            for engine in (h.engine, other):
                _, reasons = await explain(engine, job_id)
                [no_worker] = [r for r in reasons if r.kind == "NO_WORKER"]
                assert "serves job type 'noop' for tenant 'b'" in no_worker.message
                assert "only-a (tenants a)" in no_worker.message, engine.coordinator_id
            # A caller scoped to tenant b learns the worker, not the tenants it serves.
            _, reasons = await explain(h.engine, job_id, frozenset({"b"}))
            [no_worker] = [r for r in reasons if r.kind == "NO_WORKER"]
            assert "scoped to other tenants (only-a);" in no_worker.message
            # A's job is served by the same worker.
            job_a = await h.enqueue(tenant_id="a")
            for engine in (h.engine, other):
                _, reasons = await explain(engine, job_a)
                assert "NO_WORKER" not in kinds(reasons), engine.coordinator_id
            # A worker covering b, on the other replica, serves b's job everywhere.
            for_b = WorkerSession("for-b", frozenset({"noop"}), tenants=frozenset({"b", "c"}))
            other.open_session(for_b)
            await chores_of(other).cluster_sync.run_once()
            for engine in (h.engine, other):
                _, reasons = await explain(engine, job_id)
                assert "NO_WORKER" not in kinds(reasons), engine.coordinator_id
        finally:
            await other.stop()

    run(store_url, scenario)


def test_explain_gives_the_last_failure_a_retry_waits_after(store_url: str) -> None:
    from coordinator.engine.explain import last_failure
    from coordinator.model import AttemptOutcome, Failure

    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(tenant_id="t-fail", max_attempts=3)
        row, _ = await h.engine.get_job(job_id)
        assert await last_failure(h.engine, row) is None  # never ran
        [(leased, token)] = await h.lease(1)
        trace = 'Traceback (most recent call last):\n  File "app.py", line 9\nIOError: disk full\n'
        await h.engine.report(
            [
                Failure(
                    job_id,
                    token,
                    "IOError: disk full",
                    "IOError",
                    retry_at=T0 + 600 * SECOND,
                    traceback=trace,
                )
            ]
        )
        row, reasons = await explain(h.engine, job_id)
        assert JobStatus(row.status) == JobStatus.PENDING
        assert "NOT_DUE" in kinds(reasons)
        failure = await last_failure(h.engine, row)
        assert failure is not None
        assert (failure.number, failure.outcome) == (1, AttemptOutcome.FAILED)
        assert (failure.error, failure.traceback) == ("IOError: disk full", trace)

        # Once it runs again, the failure is no longer what it waits after.
        h.clock.advance(601)
        [(again, token2)] = await h.lease(1)
        row, _ = await h.engine.get_job(job_id)
        assert await last_failure(h.engine, row) is None

    run(store_url, scenario)


def test_queued_behind_counts_only_jobs_acquisition_would_take_first(store_url: str) -> None:
    """QUEUED_BEHIND counts the jobs ahead of this one that acquisition would
    take before it: each exclusion (a paused definition or instance, a job type
    no worker serves, a job held behind its ordering key, a throttled rate
    limit, a full concurrency limit) takes its jobs out of the count."""
    from coordinator.model import RateLimit

    async def scenario(h: Harness) -> None:
        serving = WorkerSession("w-explain", frozenset({"noop", "mail", "report"}))
        h.engine.open_session(serving)

        def jobs(n: int, **fields) -> list:
            return [make_job(tenant_id="t", **fields) for _ in range(n)]

        await h.engine.enqueue(
            jobs(2)
            + jobs(3, definition_id="paused-def")
            + jobs(2, job_type="nobody")  # no worker serves it
            + jobs(2, ordering_key="k")  # the second is held behind the first
            + jobs(3, job_type="mail")
            + jobs(1, instance_id="paused-inst")
            + jobs(2, job_type="report")
        )
        h.clock.advance(1)
        target = await h.enqueue(tenant_id="t")

        async def ahead() -> int:
            _, reasons = await explain(h.engine, target)
            queued = [r for r in reasons if r.kind == "QUEUED_BEHIND"]
            return queued[0].count if queued else 0

        # 2 plain, 3 of the definition, the key's head, 3 mail, 1 of the instance, 2 report.
        assert await ahead() == 12
        await h.engine.pause(PauseScope(PauseKind.DEFINITION, "", "paused-def"), "op", "", None)
        assert await ahead() == 9
        await h.engine.pause(PauseScope(PauseKind.INSTANCE, "t", "paused-inst"), "op", "", None)
        assert await ahead() == 8
        # One start of mail per hour: once one started, the other two wait.
        await h.engine.set_rate_limit(RateLimit(LimitKind.JOB_TYPE, "mail", 1, 3_600_000, 1))
        assert len(await h.lease(1, types=("mail",))) == 1
        assert await ahead() == 5
        # One report at a time: with one running, the other waits.
        await h.engine.set_limit(ConcurrencyLimit(LimitKind.JOB_TYPE, "report", 1))
        assert len(await h.lease(1, types=("report",))) == 1
        assert await ahead() == 3
        _, reasons = await explain(h.engine, target)
        [queued] = [r for r in reasons if r.kind == "QUEUED_BEHIND"]
        assert queued.message == "3 eligible job(s) of tenant t are ahead of it in its share"

    run(store_url, scenario)


def test_a_worker_that_reconnected_from_a_dead_replica_is_listed_once(store_url: str) -> None:
    """The replica it left was killed before its registry rows went: the worker
    process (same id, host and pid) is listed under the replica it is connected
    to now, not under both; another process announcing the same id still is."""

    async def scenario(h: Harness) -> None:
        announced = WorkerRecord("w-1", "host-a", 4242, "1.0", ["noop"], 4, T0)
        twin = WorkerRecord("w-1", "host-b", 7, "1.0", ["noop"], 4, T0)
        await h.engine.run_store(h.engine.store.worker_sync, "dead-replica", [announced], T0)
        await h.engine.run_store(h.engine.store.worker_sync, "other-replica", [twin], T0)
        h.clock.advance(1)
        session = WorkerSession("w-1", frozenset({"noop"}), hostname="host-a", pid=4242)
        h.engine.open_session(session)
        listed = [
            (w.worker_id, w.hostname, w.coordinator_id) for w in await h.engine.ops.list_workers()
        ]
        me = h.engine.ops._coordinator_id  # noqa: SLF001 - the replica's own id
        assert sorted(listed) == sorted([("w-1", "host-a", me), ("w-1", "host-b", "other-replica")])

    run(store_url, scenario)


def test_a_worker_of_a_replica_that_stopped_refreshing_is_listed_stale(store_url: str) -> None:
    """Another replica's worker whose row that replica has not refreshed for
    quiet_after_s (the replica died) is listed with stale set; a worker of a
    replica that keeps refreshing, and this replica's own, are not."""

    async def scenario(h: Harness) -> None:
        quiet = h.engine.config.operations.quiet_after_s
        start = h.clock.now_us()
        dead = WorkerRecord("w-dead", "host-a", 11, "1.0", ["noop"], 4, start)
        live = WorkerRecord("w-live", "host-b", 12, "1.0", ["noop"], 4, start)
        await h.engine.run_store(h.engine.store.worker_sync, "dead-replica", [dead], start)
        await h.engine.run_store(h.engine.store.worker_sync, "live-replica", [live], start)
        h.engine.open_session(WorkerSession("w-here", frozenset({"noop"}), hostname="c", pid=13))

        def stale() -> dict[str, bool]:
            return {w.worker_id: w.stale for w in listed}

        listed = await h.engine.ops.list_workers()
        assert stale() == {"w-dead": False, "w-live": False, "w-here": False}
        h.clock.advance(quiet - 1)
        now = h.clock.now_us()
        await h.engine.run_store(h.engine.store.worker_sync, "live-replica", [live], now)
        listed = await h.engine.ops.list_workers()
        assert stale() == {"w-dead": False, "w-live": False, "w-here": False}
        h.clock.advance(2)
        listed = await h.engine.ops.list_workers()
        assert stale() == {"w-dead": True, "w-live": False, "w-here": False}

    run(store_url, scenario)
