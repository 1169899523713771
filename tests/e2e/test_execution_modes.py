"""Execution modes end to end: inline, mixed hand-offs, transactional enqueue, wait for result.

A real coordinator subprocess on each store; remote workers and inline callers
that get killed are subprocesses of ``modes_app.py``; the inline runner and the
outbox relay under test otherwise run in this process.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from wfj_testing import REPO, Coordinator, ManagedProcess, subprocess_env, wait_until
from worker_sdk import (
    AdminClient,
    AsyncSchedulerClient,
    CancelReason,
    DeadlineExceededError,
    InlineRunner,
    InlineStatus,
    JobCategory,
    JobContext,
    JobFailedError,
    JobFilter,
    JobPausedError,
    JobStatus,
    SchedulerClient,
    WorkflowRef,
    aenqueue_and_wait,
    enqueue_and_wait,
)
from worker_sdk.outbox import OutboxRelay, create_outbox_table, enqueue_in_transaction

APP = REPO / "tests" / "e2e" / "modes_app.py"
_spec = importlib.util.spec_from_file_location("modes_app", APP)
assert _spec is not None and _spec.loader is not None
modes_app = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(modes_app)
register = modes_app.register
WAIT = 60.0
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class ModesProcess(ManagedProcess):
    """``modes_app.py`` in a subprocess, killed at teardown."""

    def __init__(self, mode: str, log: Path, *args: str) -> None:
        self._spawn([sys.executable, str(APP), mode, *args], log)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[dict[str, Callable[..., Any]]]:
    started: list[Any] = []
    counter = {"n": 0}

    def coordinator(database_url: str, port: int | None = None) -> Coordinator:
        counter["n"] += 1
        log = tmp_path / f"coordinator-{counter['n']}.log"
        listen = f"127.0.0.1:{port or 0}"
        c = Coordinator(database_url, log, listen=listen)
        started.append(c)
        return c

    def modes(mode: str, *args: str) -> ModesProcess:
        counter["n"] += 1
        p = ModesProcess(mode, tmp_path / f"{mode}-{counter['n']}.log", *args)
        started.append(p)
        return p

    def worker(target: str, who: str = "remote-1") -> tuple[ModesProcess, Path]:
        record = tmp_path / f"{who}.txt"
        return modes("worker", "--target", target, "--record", str(record), "--who", who), record

    yield {"coordinator": coordinator, "modes": modes, "worker": worker}
    for proc in reversed(started):
        proc.stop()


def records(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


# -- inline ------------------------------------------------------------------------------------


def test_inline_jobs_are_recorded_and_leased_like_any_other(e2e_database, spawn, tmp_path) -> None:
    coordinator = spawn["coordinator"](e2e_database)
    _, remote_record = spawn["worker"](coordinator.target)

    async def from_asyncio(runner: InlineRunner) -> Any:
        return await runner.run("modes.echo", {"caller": "async"}, tenant_id="shop")

    with InlineRunner(coordinator.target, worker_id="web-sync") as sync_runner:
        register(sync_runner, tmp_path / "inline.txt", "web-sync")
        sync = sync_runner.run_sync(
            "modes.echo", {"caller": "sync"}, tenant_id="shop", workflow=WorkflowRef("orders")
        )
    async_runner = InlineRunner(coordinator.target, worker_id="web-async")
    register(async_runner, tmp_path / "inline.txt", "web-async")

    async def main() -> Any:
        async with async_runner:
            return await from_asyncio(async_runner)

    in_loop = asyncio.run(main())

    assert sync.status == in_loop.status == InlineStatus.COMPLETED
    assert sync.value == {"echo": {"caller": "sync"}, "inline": True, "attempt": 1}
    assert in_loop.value == {"echo": {"caller": "async"}, "inline": True, "attempt": 1}
    with AdminClient(coordinator.target) as admin:
        listed = admin.list_jobs(JobFilter(tenant_id="shop", job_type="modes.echo")).jobs
        assert {j.id for j in listed} == {sync.job_id, in_loop.job_id}
        for result, owner in ((sync, "web-sync"), (in_loop, "web-async")):
            job = admin.get_job(result.job_id)
            assert job.status == JobStatus.COMPLETED
            assert [(a.number, a.worker_id, a.outcome) for a in job.attempts] == [
                (1, owner, "COMPLETED")
            ]
            assert job.result_value() == result.value
        assert admin.get_job(sync.job_id).workflow.definition_id == "orders"
    assert records(remote_record) == [], "an inline job never reaches a remote worker"


def test_inline_caller_killed_mid_run_is_finished_by_a_remote_worker(e2e_database, spawn, tmp_path):
    coordinator = spawn["coordinator"](e2e_database)
    _, remote_record = spawn["worker"](coordinator.target, "remote-1")
    inline_record = tmp_path / "inline.txt"
    caller = spawn["modes"](
        "inline", "--target", coordinator.target, "--record", str(inline_record), "--who", "web-1"
    )
    [(_, job_id, _, attempt)] = wait_until(
        lambda: records(inline_record), WAIT, "the inline caller to start the job"
    )
    assert attempt == "1"
    with SchedulerClient(coordinator.target) as scheduler:
        assert scheduler.get_job(job_id).status == JobStatus.RUNNING
        caller.kill()
        done = scheduler.wait_for_job(job_id, timeout=WAIT)
    assert done.status == JobStatus.COMPLETED
    assert done.result_value() == {"finished_by": "remote-1", "inline": False}
    assert [r[1:] for r in records(remote_record)] == [[job_id, "remote-1", "2"]]
    with AdminClient(coordinator.target) as admin:
        attempts = admin.get_job(job_id).attempts
    assert [(a.worker_id, a.outcome) for a in attempts] == [
        ("web-1", "LEASE_EXPIRED"),
        ("remote-1", "COMPLETED"),
    ]


@pytest.mark.parametrize("blocking", [False, True], ids=["enqueue_async", "enqueue"])
def test_an_inline_handler_enqueues_child_jobs_like_a_worker(e2e_database, spawn, blocking) -> None:
    coordinator = spawn["coordinator"](e2e_database)
    workflow = WorkflowRef(definition_id="orders", instance_id="order-9", correlation_id="c9")
    with InlineRunner(coordinator.target, worker_id="web-1") as runner:
        if blocking:

            @runner.handler("inline.spawn")
            def spawn_sync(payload: Any, ctx: JobContext) -> dict:
                first = [ctx.enqueue("inline.child", {"n": n}) for n in range(2)]
                summary = ctx.enqueue("inline.child", {"n": "s"}, key="summary")
                again = ctx.enqueue("inline.child", {"n": "s"}, key="summary")
                other = ctx.enqueue("inline.child", None, key="elsewhere", tenant_id="globex")
                return _spawned(first, summary, again, other)

        else:

            @runner.handler("inline.spawn")
            async def spawn_async(payload: Any, ctx: JobContext) -> dict:
                first = [await ctx.enqueue_async("inline.child", {"n": n}) for n in range(2)]
                summary = await ctx.enqueue_async("inline.child", {"n": "s"}, key="summary")
                again = await ctx.enqueue_async("inline.child", {"n": "s"}, key="summary")
                other = await ctx.enqueue_async(
                    "inline.child", None, key="elsewhere", tenant_id="globex"
                )
                return _spawned(first, summary, again, other)

        result = runner.run_sync("inline.spawn", None, tenant_id="shop", workflow=workflow)
    assert result.status == InlineStatus.COMPLETED, result.error
    parent = result.job_id
    assert result.value["again"] == [result.value["summary"], True]
    with AdminClient(coordinator.target) as admin:
        children = admin.list_jobs(JobFilter(parent_job_id=parent)).jobs
    assert sorted(c.id for c in children) == sorted(result.value["ids"])
    by_key = {c.idempotency_key: c for c in children}
    assert sorted(by_key) == [
        f"child:{parent}:#0",
        f"child:{parent}:#1",
        f"child:{parent}:elsewhere",
        f"child:{parent}:summary",
    ]
    for child in children:
        assert child.parent_job_id == parent
        assert child.status == JobStatus.PENDING
        assert (child.workflow.definition_id, child.workflow.instance_id) == ("orders", "order-9")
    assert by_key[f"child:{parent}:summary"].id == result.value["summary"]
    assert by_key[f"child:{parent}:elsewhere"].tenant_id == "globex"
    assert {by_key[f"child:{parent}:#{n}"].tenant_id for n in range(2)} == {"shop"}


def _spawned(first: list[Any], summary: Any, again: Any, other: Any) -> dict:
    return {
        "ids": [j.id for j in first] + [summary.id, other.id],
        "summary": summary.id,
        "again": [again.id, again.deduplicated],
    }


# -- mixed mode --------------------------------------------------------------------------------


def test_hand_off_by_release_and_by_time_budget(e2e_database, spawn) -> None:
    coordinator = spawn["coordinator"](e2e_database)
    spawn["worker"](coordinator.target, "remote-1")
    with InlineRunner(coordinator.target, worker_id="web-1") as runner:
        register(runner, None, "web-1")
        released = runner.run_sync("modes.steps", {"done": 0, "total": 6, "hand_off_at": 3})
        budgeted = runner.run_sync(
            "modes.steps", {"done": 0, "total": 6, "hang_at": 2}, budget=timedelta(seconds=0.5)
        )
        assert (released.status, released.reason) == ("handed_off", "handed off at step 3")
        assert (budgeted.status, budgeted.reason) == ("handed_off", CancelReason.BUDGET_EXHAUSTED)
        assert released.job_status == budgeted.job_status == JobStatus.PENDING
        assert runner.wait_sync(released, timeout=WAIT) == {
            "done": 6,
            "resumed_from": 3,
            "by": "remote-1",
        }
        assert runner.wait_sync(budgeted, timeout=WAIT)["resumed_from"] == 2
    with AdminClient(coordinator.target) as admin:
        for result in (released, budgeted):
            attempts = admin.get_job(result.job_id).attempts
            assert [(a.worker_id, a.outcome) for a in attempts] == [
                ("web-1", "RELEASED"),
                ("remote-1", "COMPLETED"),
            ]


def test_hand_off_by_continuation_carries_workflow_and_trace_context(e2e_database, spawn) -> None:
    coordinator = spawn["coordinator"](e2e_database)
    spawn["worker"](coordinator.target, "remote-1")
    workflow = WorkflowRef(definition_id="checkout", instance_id="checkout-7", correlation_id="c7")

    async def main() -> None:
        async with InlineRunner(coordinator.target, worker_id="web-1") as runner:
            register(runner, None, "web-1")
            result = await runner.run(
                "modes.checkout",
                {"id": "o-7"},
                workflow=workflow,
                traceparent=TRACEPARENT,
                tracestate="shop=1",
            )
            assert result.status == InlineStatus.HANDED_OFF
            assert result.job_status == JobStatus.COMPLETED
            shipped = await runner.wait(result, timeout=WAIT)
        assert shipped == {
            "shipped": "o-7",
            "by": "remote-1",
            "traceparent": TRACEPARENT,
            "tracestate": "shop=1",
            "instance_id": "checkout-7",
        }
        async with AsyncSchedulerClient(coordinator.target) as scheduler:
            original = await scheduler.get_job(result.job_id)
            continuation = await scheduler.get_job(result.continuation_job_id)
        assert original.result_value() == {"continued_as": continuation.id}
        assert continuation.category == JobCategory.CONTINUATION
        assert continuation.workflow == workflow
        assert continuation.idempotency_key == f"{result.job_id}/continuation"

    asyncio.run(main())


def test_paused_scope_is_refused_or_queued_for_later(e2e_database, spawn) -> None:
    coordinator = spawn["coordinator"](e2e_database)
    spawn["worker"](coordinator.target, "remote-1")
    with (
        AdminClient(coordinator.target) as admin,
        InlineRunner(coordinator.target, worker_id="web-1") as runner,
    ):
        register(runner, None, "web-1")
        admin.pause("definition", "reports", tenant_id="default", actor="ops", reason="migration")
        options = {"workflow": WorkflowRef(definition_id="reports")}
        with pytest.raises(JobPausedError, match="paused"):
            runner.run_sync("modes.echo", {"n": 1}, **options)
        assert admin.list_jobs(JobFilter(definition_id="reports")).jobs == []
        queued = runner.run_sync("modes.echo", {"n": 2}, if_paused="queue", **options)
        assert (queued.status, queued.job_status) == ("queued", JobStatus.PENDING)
        admin.unpause("definition", "reports", tenant_id="default")
        assert runner.wait_sync(queued, timeout=WAIT) == {
            "echo": {"n": 2},
            "inline": False,
            "attempt": 1,
        }


# -- wait for result ---------------------------------------------------------------------------


def test_enqueue_and_wait_for_the_result(e2e_database, spawn) -> None:
    coordinator = spawn["coordinator"](e2e_database)
    with SchedulerClient(coordinator.target) as scheduler:
        with pytest.raises(DeadlineExceededError) as late:
            enqueue_and_wait(scheduler, "modes.echo", {"n": 0}, timeout=0.5)
        spawn["worker"](coordinator.target, "remote-1")
        assert enqueue_and_wait(scheduler, "modes.echo", {"n": 1}, timeout=WAIT)["echo"] == {"n": 1}
        with pytest.raises(JobFailedError, match="this job always fails") as failed:
            enqueue_and_wait(scheduler, "modes.fail", timeout=WAIT)
        assert failed.value.status == JobStatus.FAULTED
        # The timed-out job was not lost: it ran once a worker came.
        assert scheduler.wait_for_job(late.value.job_id, timeout=WAIT).status == "COMPLETED"  # type: ignore[attr-defined]

    async def main() -> None:
        async with AsyncSchedulerClient(coordinator.target) as scheduler:
            value = await aenqueue_and_wait(scheduler, "modes.echo", "async", timeout=WAIT)
            assert value["echo"] == "async"

    asyncio.run(main())


# -- transactional enqueue (outbox) ------------------------------------------------------------


@pytest.fixture
def caller_database(e2e_database: str, tmp_path: Path) -> Iterator[sa.Engine]:
    """The application's own database, on the same dialect as the coordinator's store."""
    if e2e_database.startswith("sqlite"):
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
        drop = None
    else:
        from conftest import new_pg_database

        url, drop = new_pg_database("wfj_app")
        engine = sa.create_engine(url)
    create_outbox_table(engine)
    try:
        yield engine
    finally:
        engine.dispose()
        if drop is not None:
            drop()  # type: ignore[operator]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _jobs(target: str, job_type: str) -> list[Any]:
    with AdminClient(target) as admin:
        return admin.list_jobs(JobFilter(job_type=job_type)).jobs


def test_outbox_job_exists_iff_the_transaction_commits_even_with_the_coordinator_down(
    e2e_database, caller_database, spawn
) -> None:
    port = _free_port()
    relay = OutboxRelay(caller_database, f"127.0.0.1:{port}", poll_interval=0.05, max_backoff=0.5)
    relay.start()
    try:
        with caller_database.begin() as conn:
            committed = enqueue_in_transaction(conn, "modes.echo", {"order": 1}, tenant_id="shop")
        with pytest.raises(RuntimeError), caller_database.begin() as conn:
            enqueue_in_transaction(conn, "modes.echo", {"order": 2}, tenant_id="shop")
            raise RuntimeError("roll back")
        wait_until(lambda: relay.failures >= 2, WAIT, "the relay to fail against no coordinator")
        coordinator = spawn["coordinator"](e2e_database, port)
        [job] = wait_until(lambda: _jobs(coordinator.target, "modes.echo"), WAIT, "the job")
        assert job.payload_value() == {"order": 1} and job.tenant_id == "shop"
        assert job.idempotency_key == committed.idempotency_key
        wait_until(lambda: relay.forwarded_total == 1, WAIT, "the row to be settled")
        relay.wake()
        with caller_database.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM wfjobs_outbox")).scalar() == 0
        # Delivered once: the relay stays idle and nothing else appears.
        assert relay.run_once().forwarded == 0
        assert len(_jobs(coordinator.target, "modes.echo")) == 1
    finally:
        relay.stop()


def test_outbox_relay_killed_between_forward_and_delete_duplicates_nothing(
    e2e_database, caller_database, spawn, tmp_path
) -> None:
    coordinator = spawn["coordinator"](e2e_database)
    with caller_database.begin() as conn:
        for n in range(3):
            enqueue_in_transaction(conn, "modes.echo", {"n": n})
    marker = tmp_path / "forwarded.txt"
    doomed = spawn["modes"](
        "relay",
        "--target",
        coordinator.target,
        "--database-url",
        caller_database.url.render_as_string(hide_password=False),
        "--marker",
        str(marker),
    )
    wait_until(marker.exists, WAIT, "the relay to forward the batch")
    doomed.kill()
    first_ids = marker.read_text().split()
    assert len(first_ids) == 3
    with caller_database.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM wfjobs_outbox")).scalar() == 3
    with OutboxRelay(caller_database, coordinator.target) as relay:
        assert relay.run_once().forwarded == 3
    jobs = _jobs(coordinator.target, "modes.echo")
    assert sorted(j.id for j in jobs) == sorted(first_ids), "the same three jobs, no new ones"
    assert sorted(j.payload_value()["n"] for j in jobs) == [0, 1, 2]
    with caller_database.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM wfjobs_outbox")).scalar() == 0


# -- the documented HTTP example ---------------------------------------------------------------


def test_http_example_answers_from_an_inline_job_and_hands_big_ones_off(spawn, tmp_path) -> None:
    import json
    import re
    import urllib.request

    coordinator = spawn["coordinator"](f"sqlite:///{tmp_path / 'http.db'}")
    example = str(REPO / "examples" / "inline_http.py")
    log = tmp_path / "http.log"
    with log.open("ab") as out:
        server = subprocess.Popen(
            [sys.executable, example, "--target", coordinator.target, "--port", "0"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=subprocess_env(),
        )
    worker = subprocess.Popen(
        [sys.executable, example, "--target", coordinator.target, "--worker"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=subprocess_env(),
    )
    try:
        port = wait_until(
            lambda: re.search(r"serving on http://127.0.0.1:(\d+)", log.read_text()),
            WAIT,
            "the example to serve",
        ).group(1)

        def get(items: int) -> tuple[int, dict]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/quote?items={items}") as r:
                return r.status, json.loads(r.read())

        assert get(3) == (200, {"items": 3, "total_cents": 2970, "priced_inline": True})
        status, accepted = get(5000)
        assert (status, accepted["status"]) == (202, "handed_off")
        with SchedulerClient(coordinator.target) as scheduler:
            done = scheduler.wait_for_job(accepted["job_id"], timeout=WAIT)
        assert done.result_value() == {
            "items": 5000,
            "total_cents": 100 * 990 + 4900 * 890,
            "priced_inline": False,
        }
    finally:
        for proc in (server, worker):
            proc.terminate()
            proc.wait(20)
