"""A worker that resends an outcome after a lost answer gets "already recorded";
a stale or different report under a token that no longer holds the job is
still refused (lease lost). Both stores."""

from __future__ import annotations

import pytest

from coordinator.errors import InvalidArgument, LeaseLost
from coordinator.model import AttemptOutcome, Completion, Failure, JobStatus, Release
from wfj_engine import Harness, run


def test_a_resent_completion_is_already_recorded(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, token)] = await h.lease()
        first = await h.engine.report_one(Completion(job_id, token, b"first"))
        again = await h.engine.report_one(Completion(job_id, token, b"second"))
        assert (first.accepted, first.already_recorded) == (True, False)
        assert (again.accepted, again.already_recorded) == (True, True)
        assert again.status == JobStatus.COMPLETED
        job, attempts = await h.job(job_id)
        assert job.result == b"first"
        assert [a.outcome for a in attempts] == [AttemptOutcome.COMPLETED]

    run(store_url, scenario)


def test_a_resent_failure_and_release_are_already_recorded(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, token)] = await h.lease()
        await h.engine.report_one(Failure(job_id, token, "boom"))
        again = await h.engine.report_one(Failure(job_id, token, "boom"))
        assert again.already_recorded and again.status == JobStatus.PENDING
        h.clock.advance(600)
        [(_, token)] = await h.lease()
        await h.engine.report_one(Release(job_id, token, "bye"))
        [again] = await h.engine.report([Release(job_id, token, "bye")])
        assert (again.accepted, again.already_recorded) == (True, True)
        _, attempts = await h.job(job_id)
        assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED, AttemptOutcome.RELEASED]

    run(store_url, scenario)


def test_a_different_outcome_under_the_recorded_token_is_refused(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, token)] = await h.lease()
        await h.engine.report_one(Completion(job_id, token))
        with pytest.raises(LeaseLost):
            await h.engine.report_one(Failure(job_id, token, "late"))
        [result] = await h.engine.report([Release(job_id, token)])
        assert not result.accepted and isinstance(result.error, LeaseLost)

    run(store_url, scenario)


def test_a_token_whose_lease_expired_is_still_refused(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(heartbeat_timeout_ms=1_000)
        [(_, token)] = await h.lease()
        h.clock.advance(5)
        await h.chores.lease_reaper.run_once(h.clock.now_us())
        # The reaper ended the attempt as failed; the worker's failure report
        # was never recorded, so it is stale, not a resend.
        with pytest.raises(LeaseLost):
            await h.engine.report_one(Failure(job_id, token, "late"))
        with pytest.raises(LeaseLost):
            await h.engine.report_one(Completion(job_id, token))

    run(store_url, scenario)


def test_an_unlocked_attempt_s_token_is_refused(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, token)] = await h.lease()
        await h.engine.ops.unlock_job(job_id)
        with pytest.raises(LeaseLost):
            await h.engine.report_one(Failure(job_id, token, "late"))

    run(store_url, scenario)


def test_a_job_named_twice_in_one_report_is_recorded_once(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, token)] = await h.lease()
        first, second = await h.engine.report(
            [Completion(job_id, token, b"a"), Completion(job_id, token, b"b")]
        )
        assert first.accepted and not first.already_recorded
        assert not second.accepted and isinstance(second.error, InvalidArgument)
        assert "named more than once" in str(second.error)
        job, _ = await h.job(job_id)
        assert job.result == b"a"

    run(store_url, scenario)


@pytest.mark.parametrize("path", ["report", "report_each"])
def test_of_several_mentions_of_a_job_the_first_is_recorded_and_answered(
    store_url: str, path: str
) -> None:
    """docs/design.md: the first mention is recorded and answered with the
    outcome recorded; the others are refused and change nothing (completions
    are recorded before other kinds, which once made a later complete win)."""

    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue(max_attempts=3)
        [(_, token)] = await h.lease()
        report = getattr(h.engine, path)
        fail, complete, release = await report(
            [
                Failure(job_id, token, "bad input", "ValueError", non_retryable=True),
                Completion(job_id, token, b'{"ok": true}'),
                Release(job_id, token, "bye"),
            ]
        )
        assert (fail.accepted, fail.status) == (True, JobStatus.FAULTED)
        for later in (complete, release):
            assert not later.accepted and isinstance(later.error, InvalidArgument)
            assert "only its first mention (outcome 0) was considered" in str(later.error)
        job, attempts = await h.job(job_id)
        assert job.status == JobStatus.FAULTED and job.result is None
        assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED]
        assert attempts[0].error == "bad input"

    run(store_url, scenario)


def test_a_heartbeat_naming_an_old_and_the_current_lease_of_a_job_answers_each(
    store_url: str,
) -> None:
    """An unlock may re-lease the job to the very worker that still runs the
    old attempt: its next heartbeat names both leases, and only the current
    one is extended."""

    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, old)] = await h.lease()
        await h.engine.ops.unlock_job(job_id)
        [(_, current)] = await h.lease()
        assert current != old
        answers = await h.engine.heartbeat("w1", [(job_id, old), (job_id, current)])
        assert [a.state for a in answers] == ["lost", "extended"]
        answers = await h.engine.heartbeat("w1", [(job_id, current), (job_id, old)])
        assert [a.state for a in answers] == ["extended", "lost"]

    run(store_url, scenario)


@pytest.mark.parametrize("old_first", [True, False])
def test_a_report_naming_an_old_and_the_current_lease_of_a_job_records_the_current(
    store_url: str, old_first: bool
) -> None:
    """Both attempts of a job re-leased to the same worker may end together, so
    one report names both leases: the current one is recorded, the old one is
    refused as lease lost; neither is "named more than once"."""

    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, old)] = await h.lease()
        await h.engine.ops.unlock_job(job_id)
        [(_, current)] = await h.lease()
        mentions = [Completion(job_id, old, b"old"), Completion(job_id, current, b"current")]
        if not old_first:
            mentions.reverse()
        answers = await h.engine.report(mentions)
        by_token = dict(zip([m.lease_token for m in mentions], answers, strict=True))
        assert by_token[current].accepted and not by_token[current].already_recorded
        assert not by_token[old].accepted and isinstance(by_token[old].error, LeaseLost)
        job, attempts = await h.job(job_id)
        assert (job.status, job.result) == (JobStatus.COMPLETED, b"current")
        assert [a.outcome for a in attempts] == [
            AttemptOutcome.UNLOCKED,
            AttemptOutcome.COMPLETED,
        ]

    run(store_url, scenario)
