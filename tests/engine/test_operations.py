"""Operator actions on both stores, with a manual clock (engine/operations.py and its chores)."""

from __future__ import annotations

import time

import pytest

from coordinator.chores.retention import (
    RetentionConfig,
    parse_event_retention,
    parse_pause_retention,
    parse_retention,
)
from coordinator.engine import DrainSignal, Engine, EngineConfig, LeaseBatch, WorkerSession
from coordinator.errors import FailedPrecondition, InvalidArgument, LeaseLost, NotFound
from coordinator.model import (
    AttemptOutcome,
    Completion,
    EventFilter,
    Failure,
    JobFilter,
    JobStatus,
    PauseKind,
    PauseScope,
    Release,
)
from coordinator.store import open_store
from wfj_engine import Harness, chores_of, run
from wfj_testing import SECOND

UNKNOWN = "0190b6e2-5c1a-7d3e-8f00-123456789abc"


def open_worker(h: Harness, worker: str = "w1", credits: int = 10) -> WorkerSession:
    session = WorkerSession(worker, frozenset({"noop"}), slots=credits, hostname="box", pid=7)
    h.engine.open_session(session)
    h.engine.grant(session, credits)
    return session


def drain_outbox(session: WorkerSession) -> list[object]:
    items = []
    while not session.outbox.empty():
        items.append(session.outbox.get_nowait())
    return items


def test_cancel_pending_ends_it_at_once(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        row = await h.engine.ops.cancel_job(job_id, "duplicate")
        assert row.status == JobStatus.CANCELLED
        assert await h.lease() == []
        with pytest.raises(FailedPrecondition, match=r"is CANCELLED; only PENDING or RUNNING"):
            await h.engine.ops.cancel_job(job_id, "")
        with pytest.raises(NotFound):
            await h.engine.ops.cancel_job(UNKNOWN, "")
        with pytest.raises(InvalidArgument, match="malformed"):
            await h.engine.ops.cancel_job("nope", "")

    run(store_url, scenario)


@pytest.mark.parametrize("how", ["fail", "release", "lease-expiry"])
def test_cancel_running_signals_the_heartbeat_and_records_cancelled(
    store_url: str, how: str
) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=5)
        [(_, token)] = await h.lease()
        row = await h.engine.ops.cancel_job(job_id, "stop it")
        assert (row.status, row.cancel_requested) == (JobStatus.RUNNING, True)
        [answer] = await h.engine.heartbeat("w1", [(job_id, token)])
        assert answer.state == "cancel_requested"
        if how == "fail":
            await h.engine.report(
                [Failure(job_id, token, "JobCancelledError", "JobCancelledError")]
            )
        elif how == "release":
            await h.engine.report([Release(job_id, token, "worker shutting down")])
        else:
            h.clock.advance(120)
            await h.chores.lease_reaper.run_once(h.clock.now_us())
        job, attempts = await h.job(job_id)
        assert job.status == JobStatus.CANCELLED
        assert [a.outcome for a in attempts] == [AttemptOutcome.CANCELLED]

    run(store_url, scenario)


def test_completion_after_cancel_request_ends_cancelled(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=5)
        [(_, token)] = await h.lease()
        await h.engine.ops.cancel_job(job_id, "stop it")
        [answer] = await h.engine.heartbeat("w1", [(job_id, token)])
        assert answer.state == "cancel_requested"
        # The handler noticed the cancel and returned normally anyway.
        [result] = await h.engine.report([Completion(job_id, token, b"partial")])
        assert (result.accepted, result.status) == (True, JobStatus.CANCELLED)
        job, attempts = await h.job(job_id)
        assert job.status == JobStatus.CANCELLED
        assert job.result == b"partial"
        assert [a.outcome for a in attempts] == [AttemptOutcome.COMPLETED]

    run(store_url, scenario)


def test_retry_a_faulted_job_runs_it_again(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=1)
        [(_, token)] = await h.lease()
        await h.engine.report([Failure(job_id, token, "boom", "IOError")])
        assert (await h.job(job_id))[0].status == JobStatus.FAULTED
        row = await h.engine.ops.retry_job(job_id, keep_attempts=False)
        assert (row.status, row.attempt, row.max_attempts) == (JobStatus.PENDING, 1, 2)
        [(leased, token2)] = await h.lease()
        assert leased.id == job_id and leased.attempt == 2
        await h.engine.report([Completion(job_id, token2, b"ok")])
        job, attempts = await h.job(job_id)
        assert job.status == JobStatus.COMPLETED
        assert [(a.number, a.outcome) for a in attempts] == [(1, 2), (2, 1)]
        with pytest.raises(FailedPrecondition, match="is COMPLETED; only FAULTED or CANCELLED"):
            await h.engine.ops.retry_job(job_id, False)

    run(store_url, scenario)


def test_unlock_fences_the_old_holder(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, stale)] = await h.lease(worker="gone")
        row = await h.engine.ops.unlock_job(job_id)
        assert row.status == JobStatus.PENDING
        with pytest.raises(LeaseLost):
            await h.engine.report_one(Completion(job_id, stale, b"late"))
        [answer] = await h.engine.heartbeat("gone", [(job_id, stale)])
        assert answer.state == "lost"
        [(_, fresh)] = await h.lease(worker="w2")
        await h.engine.report([Completion(job_id, fresh, b"ok")])
        job, attempts = await h.job(job_id)
        assert job.status == JobStatus.COMPLETED
        assert [(a.worker_id, a.outcome) for a in attempts] == [
            ("gone", AttemptOutcome.UNLOCKED),
            ("w2", AttemptOutcome.COMPLETED),
        ]
        with pytest.raises(FailedPrecondition, match="is COMPLETED; only RUNNING"):
            await h.engine.ops.unlock_job(job_id)

    run(store_url, scenario)


def test_replay_makes_a_linked_copy(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(payload=b'{"n": 1}', correlation_id="order-1")
        copy = await h.engine.ops.replay_job(job_id)
        assert copy.id != job_id and copy.replay_of == job_id
        assert (copy.payload, copy.correlation_id) == (b'{"n": 1}', "order-1")
        assert {row.id for row, _ in await h.lease()} == {job_id, copy.id}
        with pytest.raises(NotFound):
            await h.engine.ops.replay_job(UNKNOWN)

    run(store_url, scenario)


def test_bulk_retry_dry_run_then_real(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        for tenant in ("x", "x", "x", "y"):
            await h.enqueue(tenant_id=tenant, max_attempts=1)
        for row, token in await h.lease():
            await h.engine.report([Failure(row.id, token, "boom")])
        flt = JobFilter(tenant_id="x", statuses=(JobStatus.FAULTED,))
        dry = await h.engine.ops.bulk_retry(flt, dry_run=True, keep_attempts=False)
        assert (dry.matched, dry.changed) == (3, 0)
        real = await h.engine.ops.bulk_retry(flt, dry_run=False, keep_attempts=False)
        assert (real.matched, real.changed) == (3, 3)
        assert len(await h.lease()) == 3
        with pytest.raises(InvalidArgument, match="only FAULTED or CANCELLED"):
            await h.engine.ops.bulk_retry(
                JobFilter(statuses=(JobStatus.PENDING,)), dry_run=True, keep_attempts=False
            )

    run(store_url, scenario)


def test_bulk_cancel_dry_run_then_real(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        for _ in range(4):
            await h.enqueue(tenant_id="z")
        dry = await h.engine.ops.bulk_cancel(JobFilter(tenant_id="z"), True, "")
        real = await h.engine.ops.bulk_cancel(JobFilter(tenant_id="z"), False, "cleanup")
        assert (dry.matched, dry.changed, real.matched, real.changed) == (4, 0, 4, 4)
        assert await h.lease() == []

    run(store_url, scenario)


@pytest.mark.parametrize("max_attempts", [1, 2])
def test_execution_timeout_ends_the_attempt(store_url: str, max_attempts: int) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(execution_timeout_ms=1000, max_attempts=max_attempts)
        [(_, token)] = await h.lease()
        chore = h.chores.execution_timeouts
        h.clock.advance(1 + chore.config.grace_s - 0.1)
        result = await chore.run_once()
        assert result.ended == 0 and result.next_deadline is not None
        h.clock.advance(0.2)
        assert (await chore.run_once()).ended == 1
        job, [attempt] = await h.job(job_id)
        assert attempt.outcome == AttemptOutcome.TIMED_OUT
        assert job.status == (JobStatus.FAULTED if max_attempts == 1 else JobStatus.PENDING)
        [answer] = await h.engine.heartbeat("w1", [(job_id, token)])
        assert answer.state == "lost"

    run(store_url, scenario)


def test_drain_stops_acquisition_and_undrain_resumes(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        ops = h.engine.ops
        running = await h.enqueue()
        first = open_worker(h)
        await h.engine.dispatcher.run_pass()
        [batch] = drain_outbox(first)
        assert isinstance(batch, LeaseBatch) and batch.jobs[0].id == running
        await ops.drain(cluster=False, worker_id="")
        assert h.engine.draining and (await ops.stats("", 60 * SECOND)).draining
        [signal] = drain_outbox(first)
        assert isinstance(signal, DrainSignal)
        late = open_worker(h, "w2")  # connecting while drained: told at once
        assert isinstance(drain_outbox(late)[0], DrainSignal)
        waiting = await h.enqueue()
        assert await h.engine.dispatcher.run_pass() is False
        assert drain_outbox(first) == drain_outbox(late) == []
        # The running job still finishes.
        await h.engine.report([Completion(running, batch.lease_token, b"ok")])
        assert (await h.job(running))[0].status == JobStatus.COMPLETED
        await ops.undrain(cluster=False)
        assert not h.engine.draining
        # Drained streams are closed so the workers reconnect and grant again.
        assert first.closed and late.closed
        again = open_worker(h, "w1")
        await h.engine.dispatcher.run_pass()
        [batch2] = drain_outbox(again)
        assert batch2.jobs[0].id == waiting

    run(store_url, scenario)


def test_cluster_drain_reaches_another_coordinator(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        other = Engine(open_store(store_url), EngineConfig(), clock=h.clock, coordinator_id="c2")
        try:
            await h.engine.ops.drain(cluster=True, worker_id="")
            assert h.engine.draining
            assert not other.draining
            await chores_of(other).cluster_sync.run_once()
            assert other.draining and not other.dispatcher.leasing
            await other.ops.undrain(cluster=True)
            await h.chores.cluster_sync.run_once()
            assert not h.engine.draining
        finally:
            await other.stop()

    run(store_url, scenario)


def test_workers_with_one_id_on_two_coordinators_are_each_listed(store_url: str) -> None:
    """The registry is keyed by (coordinator, worker id): two replicas' workers
    that announce the same id do not overwrite each other's row."""

    async def scenario(h: Harness) -> None:
        other = Engine(open_store(store_url), EngineConfig(), clock=h.clock, coordinator_id="c2")
        try:
            mine = WorkerSession("same", frozenset({"noop"}), slots=2, hostname="host-1")
            theirs = WorkerSession("same", frozenset({"x"}), slots=5, hostname="host-2")
            h.engine.open_session(mine)
            other.open_session(theirs)
            await h.chores.cluster_sync.run_once()
            await chores_of(other).cluster_sync.run_once()
            # Each replica's sync rewrote only its own row.
            await h.chores.cluster_sync.run_once()
            for engine in (h.engine, other):
                listed = [
                    (w.worker_id, w.coordinator_id, w.hostname, w.job_types, w.slots)
                    for w in await engine.ops.list_workers()
                ]
                assert listed == sorted(
                    [
                        ("same", h.engine.coordinator_id, "host-1", ("noop",), 2),
                        ("same", "c2", "host-2", ("x",), 5),
                    ]
                ), engine.coordinator_id
            # One leaving removes only its own row.
            other.close_session(theirs)
            await chores_of(other).cluster_sync.run_once()
            for engine in (h.engine, other):
                assert [
                    (w.worker_id, w.coordinator_id) for w in await engine.ops.list_workers()
                ] == [("same", h.engine.coordinator_id)]
        finally:
            await other.stop()

    run(store_url, scenario)


def test_list_workers_across_coordinators_and_drain_one_by_id(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        other = Engine(open_store(store_url), EngineConfig(), clock=h.clock, coordinator_id="c2")
        try:
            job_id = await h.enqueue()
            mine = open_worker(h, "local-1", credits=3)
            await h.engine.dispatcher.run_pass()
            theirs = WorkerSession("remote-1", frozenset({"noop", "x"}), slots=4)
            other.open_session(theirs)
            await chores_of(other).cluster_sync.run_once()
            await h.chores.cluster_sync.run_once()
            workers = {w.worker_id: w for w in await h.engine.ops.list_workers()}
            assert workers["local-1"].in_flight == (job_id,)
            assert workers["local-1"].coordinator_id == h.engine.coordinator_id
            assert (workers["local-1"].hostname, workers["local-1"].pid) == ("box", 7)
            remote = workers["remote-1"]
            assert (remote.coordinator_id, remote.job_types, remote.slots) == (
                "c2",
                ("noop", "x"),
                4,
            )
            assert (await h.engine.ops.stats("", SECOND)).connected_workers == 2
            scoped = WorkerSession(
                "scoped-b", frozenset({"noop"}), slots=1, tenants=frozenset({"b"})
            )
            h.engine.open_session(scoped)
            # One tenant's stats count only the workers that may serve it.
            assert (await h.engine.ops.stats("", SECOND)).connected_workers == 3
            assert (await h.engine.ops.stats("a", SECOND)).connected_workers == 2
            assert (await h.engine.ops.stats("b", SECOND)).connected_workers == 3
            h.engine.close_session(scoped)
            # Drain one worker by id: local at once, remote through the cluster sync.
            await h.engine.ops.drain(cluster=False, worker_id="local-1")
            assert mine.draining and isinstance(drain_outbox(mine)[-1], DrainSignal)
            await h.engine.ops.drain(cluster=False, worker_id="remote-1")
            assert not theirs.draining
            await chores_of(other).cluster_sync.run_once()
            assert theirs.draining and isinstance(drain_outbox(theirs)[-1], DrainSignal)
            assert not h.engine.draining  # only the workers were drained
            with pytest.raises(NotFound, match="not connected"):
                await h.engine.ops.drain(cluster=False, worker_id="nobody")
            # A worker that leaves disappears from the registry.
            other.close_session(theirs)
            await chores_of(other).cluster_sync.run_once()
            assert "remote-1" not in {w.worker_id for w in await h.engine.ops.list_workers()}
        finally:
            await other.stop()

    run(store_url, scenario)


def test_stats_count_retries_apart_from_final_failures(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        retried = await h.enqueue(max_attempts=3)
        final = await h.enqueue(max_attempts=1)
        tokens = {row.id: token for row, token in await h.lease()}
        await h.engine.report([Failure(j, tokens[j], "boom") for j in (retried, final)])
        stats = await h.engine.ops.stats("", 60 * SECOND)
        assert (stats.failures, stats.retries) == (2, 1)
        assert stats.totals[JobStatus.FAULTED] == 1

    run(store_url, scenario)


def test_stats_of_a_tenant_count_only_its_own_completions(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        mine = await h.enqueue(tenant_id="a")
        theirs = await h.enqueue(tenant_id="b")
        tokens = {row.id: token for row, token in await h.lease()}
        await h.engine.report(
            [Completion(mine, tokens[mine], b"{}"), Completion(theirs, tokens[theirs], b"{}")]
        )
        faulted = await h.enqueue(tenant_id="b", max_attempts=1)
        ((_, token),) = await h.lease()
        await h.engine.report([Failure(faulted, token, "boom")])
        a = await h.engine.ops.stats("a", 60 * SECOND)
        b = await h.engine.ops.stats("b", 60 * SECOND)
        everyone = await h.engine.ops.stats("", 60 * SECOND)
        assert (a.completions, a.failures) == (1, 0)
        assert (b.completions, b.failures) == (1, 1)
        assert (everyone.completions, everyone.failures) == (2, 1)

    run(store_url, scenario)


DAY = 86_400


async def _finish_one_of_each(h: Harness) -> dict[JobStatus, str]:
    """A COMPLETED, a FAULTED and a CANCELLED job, all finished now."""
    completed, faulted = await h.enqueue(), await h.enqueue(max_attempts=1)
    cancelled = await h.enqueue()
    await h.engine.ops.cancel_job(cancelled, "")
    tokens = {row.id: token for row, token in await h.lease()}
    await h.engine.report(
        [Completion(completed, tokens[completed], b"{}"), Failure(faulted, tokens[faulted], "x")]
    )
    return {
        JobStatus.COMPLETED: completed,
        JobStatus.FAULTED: faulted,
        JobStatus.CANCELLED: cancelled,
    }


async def _exists(h: Harness, job_id: str) -> bool:
    try:
        await h.job(job_id)
    except NotFound:
        return False
    return True


def test_retention_keeps_finished_jobs_seven_days_by_default(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        jobs = await _finish_one_of_each(h)
        retention = h.chores.retention
        assert retention.enabled
        now = h.clock.now_us()
        assert (await retention.run_once(now + (7 * DAY - 1) * SECOND)).purged == 0
        assert all([await _exists(h, j) for j in jobs.values()])
        assert (await retention.run_once(now + (7 * DAY + 1) * SECOND)).purged == 3
        assert not any([await _exists(h, j) for j in jobs.values()])

    run(store_url, scenario)


def test_retention_per_status_in_bounded_batches(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        first = await _finish_one_of_each(h)
        h.clock.advance(2 * DAY)
        later = await _finish_one_of_each(h)
        start = h.clock.now_us() - 2 * DAY * SECOND
        retention = h.chores.retention
        retention.config = RetentionConfig(
            keep_s=parse_retention("completed=1d,cancelled=forever,faulted=3d"),
            batch_size=1,
            keep_events_s=None,
        )

        async def purge_all(now: int) -> list[int]:
            runs = [await retention.run_once(now)]
            while runs[-1].full_batch:
                runs.append(await retention.run_once(now))
            return [r.purged for r in runs]

        # 1.5 days in: only the first COMPLETED job is past its day.
        assert await purge_all(start + int(1.5 * DAY) * SECOND) == [1, 0]
        assert not await _exists(h, first[JobStatus.COMPLETED])
        # 3.5 days in: the second COMPLETED and the first FAULTED, one per batch.
        assert await purge_all(start + int(3.5 * DAY) * SECOND) == [1, 1, 0]
        assert not await _exists(h, later[JobStatus.COMPLETED])
        assert not await _exists(h, first[JobStatus.FAULTED])
        assert await _exists(h, later[JobStatus.FAULTED])
        # CANCELLED is kept forever.
        assert await purge_all(start + 400 * DAY * SECOND) == [1, 0]
        assert await _exists(h, first[JobStatus.CANCELLED])
        assert await _exists(h, later[JobStatus.CANCELLED])

    run(store_url, scenario)


def _released_events(store) -> list:
    """Every event, once none is held back (PostgreSQL: by a transaction open anywhere)."""
    deadline = time.monotonic() + 30
    while True:
        page = store.event_read(EventFilter(), None, 1000)
        if not page.held_back or time.monotonic() > deadline:
            return page.events
        time.sleep(0.01)


def test_retention_purges_job_events_older_than_their_keep_time(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        jobs = await _finish_one_of_each(h)
        retention = h.chores.retention
        retention.config = RetentionConfig(
            keep_s=parse_retention("off"), keep_events_s=parse_event_retention("1d"), batch_size=2
        )
        assert retention.enabled
        store = h.engine.store
        written = len(_released_events(store))
        assert written >= 3
        now = h.clock.now_us()
        assert (await retention.run_once(now)).events_purged == 0
        runs = [await retention.run_once(now + 2 * DAY * SECOND)]
        while runs[-1].full_batch:
            runs.append(await retention.run_once(now + 2 * DAY * SECOND))
        assert sum(r.events_purged for r in runs) == written
        # Batches of at least batch_size events (whole log rows), but the last.
        assert all(r.events_purged >= 2 for r in runs[:-1])
        assert len(runs) > 1
        assert _released_events(store) == []
        # The jobs themselves are kept (their own retention is off).
        assert all([await _exists(h, j) for j in jobs.values()])

    run(store_url, scenario)


def test_retention_off_keeps_everything(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        jobs = await _finish_one_of_each(h)
        retention = h.chores.retention
        retention.config = RetentionConfig(
            keep_s=parse_retention("off"), keep_events_s=None, keep_pauses_s=None
        )
        assert not retention.enabled
        assert (await retention.run_once(h.clock.now_us() + 400 * DAY * SECOND)).purged == 0
        assert all([await _exists(h, j) for j in jobs.values()])

    run(store_url, scenario)


def test_retention_purges_pauses_lifted_or_expired_before_their_keep_time(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        engine = h.engine
        now = h.clock.now_us()
        lifted = PauseScope(PauseKind.JOB_TYPE, "t", "lifted")
        await engine.pause(lifted, "ops", "", None)
        await engine.unpause(lifted, "ops")
        await engine.pause(PauseScope(PauseKind.JOB_TYPE, "t", "expiring"), "ops", "", now + SECOND)
        await engine.pause(PauseScope(PauseKind.JOB_TYPE, "t", "in-force"), "ops", "", None)
        far = now + 400 * DAY * SECOND
        await engine.pause(PauseScope(PauseKind.JOB_TYPE, "t", "timed"), "ops", "", far)
        retention = h.chores.retention
        retention.config = RetentionConfig(
            keep_s=parse_retention("off"),
            keep_events_s=None,
            keep_pauses_s=parse_pause_retention("1d"),
            batch_size=1,
        )
        assert (await retention.run_once(now + DAY * SECOND - SECOND)).pauses_purged == 0
        later = now + 2 * DAY * SECOND
        first = await retention.run_once(later)
        assert (first.pauses_purged, first.full_batch) == (1, True)
        assert (await retention.run_once(later)).pauses_purged == 1
        assert (await retention.run_once(later)).pauses_purged == 0
        left, _ = await engine.list_pauses(True, "")
        # A pause in force stays, however old, and so does one that expires later.
        assert sorted(p.value for p in left) == ["in-force", "timed"]

    run(store_url, scenario)


def test_unlock_runs_the_job_again_even_with_its_budget_spent(store_url: str) -> None:
    """An unlock asks for another attempt whatever the retry policy: a job of
    max_attempts=1 goes back to PENDING with one attempt more, and that
    attempt's failure faults it (the budget is spent again)."""

    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=1)
        [(_, _)] = await h.lease(worker="hung")
        row = await h.engine.ops.unlock_job(job_id)
        assert (row.status, row.attempt, row.max_attempts) == (JobStatus.PENDING, 1, 2)
        assert row.due_at <= h.clock.now_us()  # at once, no backoff
        [(again, token)] = await h.lease(worker="w2")
        assert (again.id, again.attempt) == (job_id, 2)
        await h.engine.report([Failure(job_id, token, "boom")])
        job, attempts = await h.job(job_id)
        assert (job.status, job.max_attempts) == (JobStatus.FAULTED, 2)
        assert [a.outcome for a in attempts] == [AttemptOutcome.UNLOCKED, AttemptOutcome.FAILED]
        # A job with attempts left keeps its budget as it was.
        other = await h.enqueue(max_attempts=3)
        await h.lease(worker="hung")
        assert (await h.engine.ops.unlock_job(other)).max_attempts == 3

    run(store_url, scenario)
