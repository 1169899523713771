"""ctx.enqueue / ctx.enqueue_async: what a child job inherits and how it is keyed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from worker_sdk import WorkflowRef
from worker_sdk.testing import make_job_context

PARENT = "0190b6e2-5c1a-7d3e-8f00-123456789abc"


class Recorder:
    """Stands in for AsyncSchedulerClient: records every enqueue."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def enqueue(self, job_type: str, payload: Any = None, **options: Any) -> Any:
        self.calls.append({"job_type": job_type, "payload": payload, **options})
        return len(self.calls)


def _context(recorder: Recorder, attempt: int = 1, **kwargs: Any) -> Any:
    return make_job_context(
        {"order": 7},
        job_type="parent",
        job_id=PARENT,
        attempt=attempt,
        tenant_id="acme",
        workflow=WorkflowRef(definition_id="orders", instance_id="inst-7"),
        children=recorder,
        **kwargs,
    )


def test_children_inherit_tenant_and_workflow_and_record_their_parent() -> None:
    recorder = Recorder()

    async def handler() -> None:
        ctx = _context(recorder)
        await ctx.enqueue_async("ship", {"n": 1}, delay=5)
        await ctx.enqueue_async(
            "bill", tenant_id="finance", workflow=WorkflowRef(definition_id="billing")
        )

    asyncio.run(handler())
    first, second = recorder.calls
    assert first["tenant_id"] == "acme"
    assert first["workflow"].instance_id == "inst-7"
    assert first["parent_job_id"] == PARENT
    assert first["delay"] == 5 and first["payload"] == {"n": 1}
    assert second["tenant_id"] == "finance"
    assert second["workflow"].definition_id == "billing"
    assert second["parent_job_id"] == PARENT


def test_child_keys_do_not_depend_on_the_attempt() -> None:
    def keys_of(attempt: int) -> list[str]:
        recorder = Recorder()

        async def handler() -> None:
            ctx = _context(recorder, attempt=attempt)
            await ctx.enqueue_async("a")
            await ctx.enqueue_async("b", key="invoice-7")
            await ctx.enqueue_async("c")

        asyncio.run(handler())
        return [call["idempotency_key"] for call in recorder.calls]

    first = keys_of(1)
    assert first == [f"child:{PARENT}:#0", f"child:{PARENT}:invoice-7", f"child:{PARENT}:#1"]
    assert keys_of(2) == first


def test_reserved_options_and_a_context_without_scheduler_are_refused() -> None:
    recorder = Recorder()

    async def handler() -> None:
        ctx = _context(recorder)
        with pytest.raises(TypeError, match="idempotency_key is set by ctx.enqueue"):
            await ctx.enqueue_async("a", idempotency_key="mine")
        with pytest.raises(TypeError, match="parent_job_id is set by ctx.enqueue"):
            await ctx.enqueue_async("a", parent_job_id=PARENT)
        with pytest.raises(ValueError, match="must not be empty"):
            await ctx.enqueue_async("a", key="")
        bare = make_job_context(None)
        with pytest.raises(RuntimeError, match="cannot enqueue child jobs"):
            await bare.enqueue_async("a")

    asyncio.run(handler())
    assert recorder.calls == []


def test_the_blocking_form_runs_on_the_loop_and_refuses_to_block_it() -> None:
    recorder = Recorder()

    async def main() -> None:
        ctx = _context(recorder, loop=asyncio.get_running_loop())
        with pytest.raises(RuntimeError, match="await ctx.enqueue_async"):
            ctx.enqueue("a")
        # From a thread (a blocking handler), the call waits for the loop's answer.
        answer = await asyncio.to_thread(ctx.enqueue, "a", {"x": 1})
        assert answer == 1

    asyncio.run(main())
    [call] = recorder.calls
    assert call["idempotency_key"] == f"child:{PARENT}:#0"
