"""worker_sdk.testing: running handlers without a coordinator."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from worker_sdk import (
    CancelReason,
    JobContext,
    NonRetryableError,
    PayloadDecodeError,
    PayloadEncodeError,
    WorkflowRef,
    current_job,
)
from worker_sdk.testing import arun_handler, make_job_context, run_handler


@dataclasses.dataclass
class Resize:
    url: str
    width: int


def resize_sync(request: Resize, ctx: JobContext) -> dict:
    assert current_job() is ctx
    return {"url": request.url, "width": request.width * 2, "attempt": ctx.attempt}


async def resize_async(request: Resize) -> dict:
    await asyncio.sleep(0)
    return {"url": request.url, "job_type": current_job().job_type}


def test_sync_handler_receives_decoded_dataclass_and_context() -> None:
    result = run_handler(resize_sync, Resize("s3://a", 10), attempt=2)

    assert result == {"url": "s3://a", "width": 20, "attempt": 2}


def test_async_handler_reaches_context_through_contextvar() -> None:
    result = run_handler(resize_async, {"url": "s3://b", "width": 1}, job_type="resize")

    assert result == {"url": "s3://b", "job_type": "resize"}


def test_invalid_payload_raises_non_retryable_decode_error() -> None:
    with pytest.raises(PayloadDecodeError, match="payload.width: expected int") as info:
        run_handler(resize_sync, {"url": "s3://a", "width": "wide"})

    assert isinstance(info.value, NonRetryableError)


def test_workflow_refs_and_tenant_reach_the_context() -> None:
    def handler(ctx: JobContext) -> list[str]:
        return [ctx.tenant_id, ctx.definition_id, ctx.instance_id, ctx.correlation_id]

    result = run_handler(
        handler,
        tenant_id="acme",
        workflow=WorkflowRef(definition_id="d", instance_id="i", correlation_id="c"),
    )

    assert result == ["acme", "d", "i", "c"]


def test_simulated_cancel_reaches_async_handler() -> None:
    async def wait_for_cancel(ctx: JobContext) -> str | None:
        await ctx.cancelled.wait()
        return ctx.cancel_reason

    assert run_handler(wait_for_cancel, cancel_after=0.01) == CancelReason.CANCEL_REQUESTED


def test_simulated_cancel_reaches_blocking_handler() -> None:
    def wait_for_cancel(ctx: JobContext) -> bool:
        return ctx.cancelled.wait_blocking(timeout=5) and ctx.is_cancelled()

    assert run_handler(wait_for_cancel, cancel_after=0.01) is True


def test_cancel_before_start() -> None:
    def check(ctx: JobContext) -> bool:
        return ctx.is_cancelled()

    assert run_handler(check, cancel_after=0) is True
    assert run_handler(check) is False


def test_handler_exception_propagates() -> None:
    def failing(payload: dict) -> None:
        raise NonRetryableError("card declined", kind="CardDeclined")

    with pytest.raises(NonRetryableError, match="card declined"):
        run_handler(failing, {})


def test_heartbeat_details_are_recorded() -> None:
    seen: list[object] = []
    ctx = make_job_context({"n": 1}, on_heartbeat=seen.append)

    def handler(payload: dict, ctx: JobContext) -> int:
        ctx.heartbeat({"progress": 0.5})
        return payload["n"]

    assert run_handler(handler, context=ctx) == 1
    assert seen == [{"progress": 0.5}]
    assert ctx.heartbeat_details == {"progress": 0.5}


def test_arun_handler_runs_blocking_handler_in_a_thread_with_context() -> None:
    async def main() -> dict:
        return await arun_handler(resize_sync, Resize("u", 1))

    assert asyncio.run(main()) == {"url": "u", "width": 2, "attempt": 1}


def test_current_job_outside_a_handler_raises() -> None:
    with pytest.raises(RuntimeError, match="outside a job handler"):
        current_job()


def test_execution_timeout_of_the_context_bounds_an_async_handler() -> None:
    async def slow(ctx: JobContext) -> None:
        await asyncio.sleep(60)

    ctx = make_job_context(execution_timeout=0.05)

    with pytest.raises(TimeoutError):
        run_handler(slow, context=ctx)
    assert ctx.cancel_reason == CancelReason.DEADLINE_EXCEEDED


def test_unencodable_result_fails_as_on_a_worker() -> None:
    def handler() -> object:
        return object()

    with pytest.raises(PayloadEncodeError):
        run_handler(handler)
