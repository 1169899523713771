"""Per-job-type defaults on both stores: applied when a job leaves a setting unset."""

from __future__ import annotations

import pytest

from coordinator.errors import InvalidArgument
from coordinator.model import JobFilter, JobTypeDefaults, RetryPolicy
from wfj_engine import Harness, run
from wfj_testing import make_job

EMAIL = JobTypeDefaults(
    retry_policy=RetryPolicy(max_attempts=7, initial_backoff_ms=250),
    execution_timeout_ms=60_000,
    heartbeat_timeout_ms=5_000,
)


def test_type_defaults_fill_unset_settings(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_job_type_defaults("email", EMAIL)
        [(plain, _, _)] = await h.engine.enqueue([make_job(job_type="email", max_attempts=0)])
        own = make_job(
            job_type="email",
            max_attempts=2,
            retry_policy=RetryPolicy(max_attempts=2).to_json(),
            heartbeat_timeout_ms=1_000,
        )
        [(overridden, _, _)] = await h.engine.enqueue([own])
        [(other_type, _, _)] = await h.engine.enqueue([make_job(job_type="sms", max_attempts=0)])
        job, _ = await h.job(plain)
        assert (job.max_attempts, job.execution_timeout_ms, job.heartbeat_timeout_ms) == (
            7,
            60_000,
            5_000,
        )
        assert RetryPolicy.from_json(job.retry_policy).initial_backoff_ms == 250
        job, _ = await h.job(overridden)
        assert (job.max_attempts, job.heartbeat_timeout_ms, job.execution_timeout_ms) == (
            2,
            1_000,
            60_000,
        )
        job, _ = await h.job(other_type)
        assert (job.max_attempts, job.execution_timeout_ms) == (3, None)

    run(store_url, scenario)


def test_type_defaults_are_replaced_and_removed(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.engine.set_job_type_defaults("email", EMAIL)
        await h.engine.set_job_type_defaults("email", JobTypeDefaults())
        assert h.engine.type_defaults == {}
        [(job_id, _, _)] = await h.engine.enqueue([make_job(job_type="email", max_attempts=0)])
        job, _ = await h.job(job_id)
        assert job.max_attempts == 3
        with pytest.raises(InvalidArgument, match="execution_timeout must be positive"):
            await h.engine.set_job_type_defaults("email", JobTypeDefaults(execution_timeout_ms=0))

    run(store_url, scenario)


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        (RetryPolicy(backoff_multiplier=float("nan")), "backoff_multiplier"),
        (RetryPolicy(backoff_multiplier=1e308), "backoff_multiplier"),
        (RetryPolicy(max_attempts=2**31 - 1), "max_attempts"),
        (RetryPolicy(max_backoff_ms=10**15), "max_backoff"),
    ],
    ids=["nan-multiplier", "huge-multiplier", "int32-max-attempts", "huge-max-backoff"],
)
def test_unbounded_policies_are_refused_by_the_engine(
    store_url: str, policy: RetryPolicy, field: str
) -> None:
    async def scenario(h: Harness) -> None:
        with pytest.raises(InvalidArgument, match=f"defaults.retry_policy.{field}"):
            await h.engine.set_job_type_defaults("email", JobTypeDefaults(retry_policy=policy))
        assert h.engine.type_defaults == {}
        with pytest.raises(InvalidArgument, match=f"retry_policy.{field}"):
            await h.engine.enqueue([make_job(retry_policy=policy.to_json())])
        with pytest.raises(InvalidArgument, match=r"jobs\[1\]: execution_timeout"):
            await h.engine.enqueue([make_job(), make_job(execution_timeout_ms=-5)])
        page = await h.engine.list_jobs(JobFilter(), 10, "")
        assert page.jobs == []

    run(store_url, scenario)


@pytest.mark.parametrize(
    ("name", "why"),
    [("mail,sms", "contains ','"), ("mail ", "starts or ends with whitespace")],
    ids=["comma", "trailing-space"],
)
def test_job_type_names_no_list_could_name_are_refused_and_store_nothing(
    store_url: str, name: str, why: str
) -> None:
    async def scenario(h: Harness) -> None:
        with pytest.raises(InvalidArgument, match=f"defaults.job_type '{name}' {why}"):
            await h.engine.set_job_type_defaults(
                name, JobTypeDefaults(retry_policy=RetryPolicy(max_attempts=2))
            )
        assert h.engine.type_defaults == {}
        # One bad job refuses its whole batch: nothing is stored.
        with pytest.raises(InvalidArgument, match=rf"jobs\[1\]: job_type '{name}' {why}"):
            await h.engine.enqueue([make_job(), make_job(job_type=name)])
        assert (await h.engine.list_jobs(JobFilter(), 10, "")).jobs == []

    run(store_url, scenario)
