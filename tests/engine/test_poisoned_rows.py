"""Rows stored with values no caller can send today (policies written before
validation, or by hand) never break a job's lifecycle, on both stores."""

from __future__ import annotations

import json
import logging

import pytest
import sqlalchemy as sa

from coordinator.engine import WorkerSession
from coordinator.engine.retries import BACKOFF_CEILING_MS
from coordinator.errors import FailedPrecondition, InvalidArgument
from coordinator.model import (
    ATTEMPT_CEILING,
    AttemptOutcome,
    Completion,
    Failure,
    JobFilter,
    JobStatus,
    Release,
)
from coordinator.telemetry.hooks import EngineTelemetry
from wfj_engine import Harness, run
from wfj_testing import T0


def _poison(h: Harness, job_id: str, **columns: object) -> None:
    """Write columns of a stored job directly, as an old or hand-edited row."""
    sets = ", ".join(f"{name} = :{name}" for name in columns)
    with h.engine.store.engine.begin() as conn:
        conn.execute(
            sa.text(f"UPDATE wfj_jobs SET {sets} WHERE id = :id"), {**columns, "id": job_id}
        )


POISONED_POLICIES = {
    "nan-multiplier": {"backoff_multiplier": float("nan")},
    "huge-multiplier": {"backoff_multiplier": 1e308, "initial_backoff_ms": 1000},
    "infinite-cap": {"max_backoff_ms": float("inf"), "backoff_multiplier": 2.0},
    "huge-cap": {"max_backoff_ms": 10**30},
    "nan-everything": {
        "initial_backoff_ms": float("nan"),
        "backoff_multiplier": float("nan"),
        "max_backoff_ms": float("nan"),
        "jitter": float("nan"),
    },
}


@pytest.mark.parametrize("policy", sorted(POISONED_POLICIES))
def test_fail_job_with_a_poisoned_policy_is_retried_within_the_cap(
    store_url: str, policy: str
) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=100)
        [(_, token)] = await h.lease()
        # The 70th attempt: 2 ** 69 times the initial backoff fits no column.
        _poison(h, job_id, retry_policy=json.dumps(POISONED_POLICIES[policy]), attempt=70)
        h.clock.advance(1)
        result = await h.engine.report_one(Failure(job_id, token, "boom", "IOError"))
        assert result.accepted and result.status == JobStatus.PENDING
        job, _ = await h.job(job_id)
        now = h.clock.now_us()
        assert now <= job.due_at <= now + BACKOFF_CEILING_MS * 1000

    run(store_url, scenario)


def test_fail_job_on_a_huge_attempt_number_is_retried_within_the_cap(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=5)
        [(_, token)] = await h.lease()
        # 2 ** attempt overflows any float; one attempt number is left below the ceiling.
        _poison(h, job_id, attempt=ATTEMPT_CEILING - 2, max_attempts=ATTEMPT_CEILING)
        result = await h.engine.report_one(Failure(job_id, token, "boom", "IOError"))
        assert result.accepted and result.status == JobStatus.PENDING
        job, _ = await h.job(job_id)
        # The default cap (300 s, jitter 20 %) is reached, never exceeded.
        assert T0 + 240 * 1_000_000 <= job.due_at <= T0 + 300 * 1_000_000

    run(store_url, scenario)


@pytest.mark.parametrize("ending", ["failure", "lease-expiry"])
def test_an_attempt_failing_at_the_ceiling_faults_even_with_budget_left(
    store_url: str, ending: str
) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=5, heartbeat_timeout_ms=2_000)
        [(_, token)] = await h.lease()
        # Released attempts do not count against the budget, so a job released
        # many times can reach the ceiling with attempts left in it.
        _poison(h, job_id, attempt=ATTEMPT_CEILING, released_attempts=ATTEMPT_CEILING - 2)
        if ending == "failure":
            result = await h.engine.report_one(Failure(job_id, token, "boom", "IOError"))
            assert result.accepted and result.status == JobStatus.FAULTED
        else:
            h.clock.advance(3)
            assert (await h.chores.lease_reaper.run_once(h.clock.now_us())).reclaimed == 1
        assert _columns(h, job_id) == (JobStatus.FAULTED, ATTEMPT_CEILING, 5)
        assert await h.lease() == []

    run(store_url, scenario)


# A stored policy that does not parse into a RetryPolicy: deciding its job's
# failure raises. Chores and outcome reports must set the row aside and go on.
UNREADABLE_POLICY = '{"backoff_multiplier": 2.0, "written_by": "an old release"}'


class CountingTelemetry(EngineTelemetry):
    def __init__(self) -> None:
        self.set_aside: dict[str, int] = {}

    def rows_set_aside(self, chore: str, count: int) -> None:
        self.set_aside[chore] = self.set_aside.get(chore, 0) + count


def test_reaper_sets_a_poisoned_row_aside_and_reclaims_the_rest(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(h: Harness) -> None:
        h.engine.telemetry = telemetry = CountingTelemetry()
        ids = [await h.enqueue(max_attempts=5) for _ in range(3)]
        assert len(await h.lease(3)) == 3
        poisoned, healthy = ids[1], [ids[0], ids[2]]
        _poison(h, poisoned, retry_policy=UNREADABLE_POLICY)
        h.clock.advance(120)
        with caplog.at_level(logging.ERROR, logger="coordinator.engine.set_aside"):
            result = await h.chores.lease_reaper.run_once(h.clock.now_us())
        assert result.reclaimed == 2
        for job_id in healthy:
            job, [attempt] = await h.job(job_id)
            assert (job.status, attempt.outcome) == (
                JobStatus.PENDING,
                AttemptOutcome.LEASE_EXPIRED,
            )
        assert (await h.job(poisoned))[0].status == JobStatus.RUNNING
        assert telemetry.set_aside == {"lease-reaper": 1}
        assert f"lease-reaper: job {poisoned} set aside" in caplog.text
        # Set aside: the next run neither retries it nor wakes for its past expiry.
        again = await h.chores.lease_reaper.run_once(h.clock.now_us())
        assert (again.reclaimed, again.next_expiry) == (0, None)
        assert telemetry.set_aside == {"lease-reaper": 1}
        # An operator cancels it; once the recheck time has passed the reaper ends it.
        await h.engine.ops.cancel_job(poisoned, "unreadable policy")
        h.clock.advance(h.engine.set_aside.recheck_s)
        assert (await h.chores.lease_reaper.run_once(h.clock.now_us())).reclaimed == 1
        assert (await h.job(poisoned))[0].status == JobStatus.CANCELLED

    run(store_url, scenario)


INT4_MAX = 2**31 - 1


def _columns(h: Harness, job_id: str) -> tuple[int, int, int]:
    with h.engine.store.engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT status, attempt, max_attempts FROM wfj_jobs WHERE id = :id"),
            {"id": job_id},
        ).one()
    return row.status, row.attempt, row.max_attempts


def test_release_refund_never_overflows_the_attempt_budget(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=5)
        [(_, token)] = await h.lease()
        # A budget stored before bounds existed: one more refunded attempt overflows int4.
        _poison(h, job_id, max_attempts=INT4_MAX)
        [result] = await h.engine.report([Release(job_id, token, "shutting down")])
        assert result.accepted and result.status == JobStatus.PENDING
        status, attempt, max_attempts = _columns(h, job_id)
        assert (status, attempt) == (JobStatus.PENDING, 1)
        assert max_attempts <= INT4_MAX
        job, _ = await h.job(job_id)  # still readable, as the wire's int32 needs
        assert job.max_attempts == max_attempts

    run(store_url, scenario)


def test_release_at_the_ceiling_consumes_the_attempt_and_faults_when_none_are_left(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=5)
        [(_, token)] = await h.lease()
        _poison(h, job_id, attempt=ATTEMPT_CEILING - 1, max_attempts=ATTEMPT_CEILING)
        [result] = await h.engine.report([Release(job_id, token)])
        assert result.status == JobStatus.PENDING  # one attempt number is left below the ceiling
        assert _columns(h, job_id) == (JobStatus.PENDING, ATTEMPT_CEILING - 1, ATTEMPT_CEILING)
        [(row, token)] = await h.lease()
        assert row.attempt == ATTEMPT_CEILING
        [result] = await h.engine.report([Release(job_id, token)])
        assert result.accepted and result.status == JobStatus.FAULTED
        job, _ = await h.job(job_id)
        assert "the most one job may run" in (job.last_error or "")
        assert _columns(h, job_id) == (JobStatus.FAULTED, ATTEMPT_CEILING, ATTEMPT_CEILING)

    run(store_url, scenario)


def test_unlock_at_the_ceiling_faults_instead_of_running_past_it(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=5)
        await h.lease()
        _poison(h, job_id, attempt=ATTEMPT_CEILING - 1, max_attempts=ATTEMPT_CEILING)
        row = await h.engine.ops.unlock_job(job_id)
        assert row.status == JobStatus.PENDING  # one attempt number is left below the ceiling
        [(row, _)] = await h.lease()
        assert row.attempt == ATTEMPT_CEILING
        row = await h.engine.ops.unlock_job(job_id)
        assert row.status == JobStatus.FAULTED
        assert "the most one job may run" in (row.last_error or "")
        assert await h.lease() == []
        assert _columns(h, job_id) == (JobStatus.FAULTED, ATTEMPT_CEILING, ATTEMPT_CEILING)
        _, attempts = await h.job(job_id)
        assert [(a.number, a.outcome) for a in attempts][-1] == (
            ATTEMPT_CEILING,
            AttemptOutcome.UNLOCKED,
        )

    run(store_url, scenario)


def test_execution_timeouts_set_a_poisoned_row_aside_and_end_the_rest(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        h.engine.telemetry = telemetry = CountingTelemetry()
        healthy = await h.enqueue(execution_timeout_ms=1000, max_attempts=5)
        poisoned = await h.enqueue(execution_timeout_ms=1000, max_attempts=5)
        # A timeout so long that deadline arithmetic in 64 bits would overflow.
        endless = await h.enqueue(execution_timeout_ms=1000, max_attempts=5)
        assert len(await h.lease(3)) == 3
        _poison(h, poisoned, retry_policy=UNREADABLE_POLICY)
        _poison(h, endless, execution_timeout_ms=2**62)
        chore = h.chores.execution_timeouts
        h.clock.advance(60)
        result = await chore.run_once()
        assert result.ended == 1
        job, [attempt] = await h.job(healthy)
        assert attempt.outcome == AttemptOutcome.TIMED_OUT and job.status == JobStatus.PENDING
        assert (await h.job(poisoned))[0].status == JobStatus.RUNNING
        assert (await h.job(endless))[0].status == JobStatus.RUNNING
        assert telemetry.set_aside == {"execution-timeouts": 1}
        assert (await chore.run_once()).ended == 0
        assert telemetry.set_aside == {"execution-timeouts": 1}

    run(store_url, scenario)


def test_report_outcomes_answers_each_outcome_beside_a_poisoned_one(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        ids = [await h.enqueue(max_attempts=5) for _ in range(3)]
        tokens = {row.id: token for row, token in await h.lease(3)}
        poisoned, completed, failed = ids
        _poison(h, poisoned, retry_policy=UNREADABLE_POLICY)
        results = await h.engine.report(
            [
                Failure(poisoned, tokens[poisoned], "boom", "IOError"),
                Completion(completed, tokens[completed], b"ok"),
                Failure(failed, tokens[failed], "boom", "IOError"),
            ]
        )
        assert [(r.job_id, r.accepted, r.status) for r in results] == [
            (poisoned, False, None),
            (completed, True, JobStatus.COMPLETED),
            (failed, True, JobStatus.PENDING),
        ]
        assert isinstance(results[0].error, FailedPrecondition)
        assert "could not be recorded" in str(results[0].error)
        assert (await h.job(poisoned))[0].status == JobStatus.RUNNING
        # FailJob on it answers the same deliberate error, not an internal one.
        with pytest.raises(FailedPrecondition, match="stored data is unusable"):
            await h.engine.report_one(Failure(poisoned, tokens[poisoned], "boom", "IOError"))

    run(store_url, scenario)


async def _faulted_pair(h: Harness) -> tuple[str, str]:
    """Two FAULTED jobs: one for a single retry, one (tenant "bulk") for a bulk retry."""
    single = await h.enqueue(max_attempts=1)
    bulk = await h.enqueue(max_attempts=1, tenant_id="bulk")
    for _ in range(2):
        [(row, token)] = await h.lease(n=1)
        await h.engine.report([Failure(row.id, token, "boom", "IOError")])
    return single, bulk


@pytest.mark.parametrize("keep_attempts", [False, True])
def test_operator_retry_budget_never_overflows(store_url: str, keep_attempts: bool) -> None:
    async def scenario(h: Harness) -> None:
        single, bulk = await _faulted_pair(h)
        for job_id in (single, bulk):
            # attempt + a budget of 2**31 - 1 does not fit a 32-bit column.
            _poison(h, job_id, attempt=1000, max_attempts=INT4_MAX, retry_policy=None)
        row = await h.engine.ops.retry_job(single, keep_attempts=keep_attempts)
        assert row.status == JobStatus.PENDING
        result = await h.engine.ops.bulk_retry(
            JobFilter(tenant_id="bulk"), dry_run=False, keep_attempts=keep_attempts
        )
        assert (result.matched, result.changed) == (1, 1)
        for job_id in (single, bulk):
            status, attempt, max_attempts = _columns(h, job_id)
            assert (status, attempt) == (JobStatus.PENDING, 1000)
            assert 1000 < max_attempts <= ATTEMPT_CEILING

    run(store_url, scenario)


def test_a_write_the_database_refuses_is_set_aside_from_its_batch(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        h.engine.telemetry = telemetry = CountingTelemetry()
        refused, small = await h.enqueue(), await h.enqueue()
        tokens = {row.id: token for row, token in await h.lease(2)}
        # The release reason becomes the job's last error: PostgreSQL text cannot hold NUL.
        results = await h.engine.report(
            [
                Release(refused, tokens[refused], "shut\x00down"),
                Release(small, tokens[small], "shutdown"),
            ]
        )
        assert (results[1].accepted, results[1].status) == (True, JobStatus.PENDING)
        assert (await h.job(small))[0].status == JobStatus.PENDING
        if h.engine.store.is_sqlite:  # stores NUL in text: nothing to refuse
            assert results[0].accepted
        else:
            assert not results[0].accepted
            assert isinstance(results[0].error, FailedPrecondition)
            assert (await h.job(refused))[0].status == JobStatus.RUNNING
            assert telemetry.set_aside == {"outcomes": 1}

    run(store_url, scenario)


def test_cluster_sync_writes_every_worker_but_one_the_database_refuses(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        h.engine.telemetry = telemetry = CountingTelemetry()
        for worker_id, hostname in (("good-1", "box"), ("odd", "bad\x00host"), ("good-2", "box")):
            h.engine.open_session(WorkerSession(worker_id, frozenset({"noop"}), hostname=hostname))
        await h.chores.cluster_sync.run_once(h.clock.now_us())
        stored = {w.worker_id for w in h.engine.store.worker_list(0)}
        assert {"good-1", "good-2"} <= stored
        if h.engine.store.is_postgres:  # its text cannot hold NUL
            assert "odd" not in stored
            assert telemetry.set_aside == {"cluster-sync": 1}
        else:
            assert "odd" in stored

    run(store_url, scenario)


def test_a_completion_the_database_refuses_is_answered_alone(store_url: str) -> None:
    """One completion whose content type the database cannot store (a lone
    surrogate: no valid text on either store) is refused on its own; the other
    outcomes of the report are recorded and answered accepted."""

    async def scenario(h: Harness) -> None:
        h.engine.telemetry = telemetry = CountingTelemetry()
        refused, completed, failed = [await h.enqueue(max_attempts=5) for _ in range(3)]
        tokens = {row.id: token for row, token in await h.lease(3)}
        results = await h.engine.report(
            [
                Completion(completed, tokens[completed], b"ok", "application/json"),
                Completion(refused, tokens[refused], b"ok", "text/\ud800"),
                Failure(failed, tokens[failed], "boom", "IOError"),
            ]
        )
        assert [(r.job_id, r.accepted, r.status) for r in results] == [
            (completed, True, JobStatus.COMPLETED),
            (refused, False, None),
            (failed, True, JobStatus.PENDING),
        ]
        assert isinstance(results[1].error, InvalidArgument)
        assert "the database refused a value" in str(results[1].error)
        assert (await h.job(refused))[0].status == JobStatus.RUNNING
        assert (await h.job(completed))[0].status == JobStatus.COMPLETED
        assert telemetry.set_aside == {"outcomes": 1}
        # CompleteJob with it answers the same deliberate error.
        with pytest.raises(InvalidArgument, match="lease is still held"):
            await h.engine.report_one(Completion(refused, tokens[refused], b"ok", "text/\ud800"))

    run(store_url, scenario)


def test_operator_retry_past_the_attempt_ceiling_is_refused(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        single, bulk = await _faulted_pair(h)
        for job_id in (single, bulk):
            _poison(h, job_id, attempt=INT4_MAX - 1, max_attempts=INT4_MAX - 1)
        with pytest.raises(FailedPrecondition, match="replay it"):
            await h.engine.ops.retry_job(single, keep_attempts=True)
        result = await h.engine.ops.bulk_retry(
            JobFilter(tenant_id="bulk"), dry_run=False, keep_attempts=True
        )
        assert (result.matched, result.changed) == (1, 0)
        for job_id in (single, bulk):
            assert _columns(h, job_id) == (JobStatus.FAULTED, INT4_MAX - 1, INT4_MAX - 1)
        copy = await h.engine.ops.replay_job(single)
        assert copy.status == JobStatus.PENDING and copy.attempt == 0

    run(store_url, scenario)
