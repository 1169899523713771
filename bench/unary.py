"""Figure: one unary `Enqueue` round trip into an idle coordinator, beside a plain insert.

A coordinator on a fresh database, no worker connected. The bench sends
`Enqueue` of a one-job spec through the raw generated stubs, one call at a time
paced `PACE_S` apart (an idle coordinator: nothing else in flight), and times
each from just before the send to the answer. In the same run, on the same
server, the comparison is what the database itself costs: a plain psycopg
`INSERT` of a similar row (id, tenant, type, payload, status, times) and
`COMMIT` on one connection, paced the same way. Runs alternate the two.

After the measured runs, one more run of the coordinator logs its stages
(`bench.anatomy`) and the per-statement cost of the last measured run is
written under the table (`bench.statements`).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import grpc
import psycopg

from bench import anatomy, statements, wfjobs
from bench.config import BenchConfig
from bench.latency import STAGE_ENV, percentile
from bench.processes import LOG_DIR
from bench.results import Row, Target, add_section
from workflowjobs.v1 import scheduler_service_pb2, scheduler_service_pb2_grpc

PACE_S = 0.01
_PLAIN_TABLE = """
CREATE TABLE IF NOT EXISTS bench_plain_insert (
    id text PRIMARY KEY, tenant_id text NOT NULL, job_type text NOT NULL,
    payload bytea NOT NULL, status smallint NOT NULL, created_at bigint NOT NULL,
    due_at bigint NOT NULL)
"""
_PLAIN_INSERT = (
    "INSERT INTO bench_plain_insert (id, tenant_id, job_type, payload, status, "
    "created_at, due_at) VALUES (%s, %s, %s, %s, 0, %s, %s)"
)


async def _paced(calls: int, once) -> list[float]:  # type: ignore[no-untyped-def]
    """`calls` awaited calls of `once`, PACE_S apart; their durations in ms, sorted."""
    times: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        await once()
        elapsed = time.perf_counter() - started
        times.append(elapsed * 1000)
        if elapsed < PACE_S:
            await asyncio.sleep(PACE_S - elapsed)
    return sorted(times)


async def measure_enqueue(
    config: BenchConfig,
    calls: int,
    *,
    stage_log: str | None = None,
    statements_title: str | None = None,
) -> list[float]:
    """Round-trip times (ms) of `calls` paced unary Enqueues; see the module doc."""
    clock = anatomy.StageClock() if stage_log else None
    if stage_log:
        os.environ[STAGE_ENV] = stage_log
    try:
        started = wfjobs.start_coordinators(config.server, 1, deadline_s=calls * PACE_S * 4 + 300)
    finally:
        if stage_log:
            os.environ.pop(STAGE_ENV, None)
    spec = wfjobs.job_spec(data=b'{"n": 1}')
    request = scheduler_service_pb2.EnqueueRequest(job=spec)
    try:
        async with grpc.aio.insecure_channel(started[0].target) as channel:
            stub = scheduler_service_pb2_grpc.JobSchedulerServiceStub(channel)
            for _ in range(20):  # connection, first statements prepared
                await stub.Enqueue(request, timeout=30)
            if statements_title:
                statements.reset(config.server)

            async def once() -> None:
                sent = time.time_ns()
                answer = await stub.Enqueue(request, timeout=30)
                if clock is not None:
                    clock.note(answer.job.id, sent)

            times = await _paced(calls, once)
            if statements_title:
                add_section(
                    statements.render(
                        statements_title, statements.top(config.server, wfjobs.DATABASE), jobs=calls
                    )
                )
            if clock is not None:
                await asyncio.sleep(3 * anatomy.FLUSH_WAIT_S)
    finally:
        wfjobs.stop_coordinators(started)
    if clock is not None and stage_log:
        jobs = anatomy.merge(clock, anatomy.read_stage_files(Path(stage_log)), [])
        add_section(
            anatomy.render(
                [anatomy.step_percentiles(jobs)],
                f"Anatomy of a unary Enqueue into an idle coordinator ({calls} calls, "
                f"{PACE_S * 1000:.0f} ms apart, one instrumented run)",
            )
        )
    return times


async def measure_plain(config: BenchConfig, calls: int) -> list[float]:
    """Round-trip times (ms) of `calls` paced plain INSERT + COMMIT on the same server."""
    async with await psycopg.AsyncConnection.connect(config.server.dsn(wfjobs.DATABASE)) as conn:
        await conn.execute(_PLAIN_TABLE)
        await conn.commit()
        payload = b'{"n": 1}'

        async def once() -> None:
            now = time.time_ns() // 1000
            await conn.execute(
                _PLAIN_INSERT, (str(uuid.uuid4()), "bench", wfjobs.JOB_TYPE, payload, now, now)
            )
            await conn.commit()

        for _ in range(20):
            await once()
        return await _paced(calls, once)


def run(config: BenchConfig) -> list[Row]:
    return asyncio.run(_run(config))


async def _run(config: BenchConfig) -> list[Row]:
    calls = 300 if config.quick else 1000
    ours: dict[str, list[float]] = {"p50": [], "p99": []}
    plain: dict[str, list[float]] = {"p50": [], "p99": []}
    errors: list[str] = []
    for run_index in range(config.runs):
        title = (
            f"Per-statement cost: unary Enqueue, idle coordinator (run {run_index + 1})"
            if run_index == config.runs - 1
            else None
        )
        try:
            ours_times = await measure_enqueue(config, calls, statements_title=title)
            plain_times = await measure_plain(config, calls)
        except Exception as exc:  # reported in the table
            errors.append(f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}")
            print(f"  unary failed: {errors[-1]}", flush=True)
            continue
        for name, fraction in (("p50", 0.5), ("p99", 0.99)):
            ours[name].append(percentile(ours_times, fraction))
            plain[name].append(percentile(plain_times, fraction))
        print(
            f"  unary run {run_index + 1}: Enqueue p50 {ours['p50'][-1]:.2f} ms, "
            f"p99 {ours['p99'][-1]:.2f} ms; plain insert + commit p50 {plain['p50'][-1]:.2f} ms, "
            f"p99 {plain['p99'][-1]:.2f} ms",
            flush=True,
        )
    try:
        await measure_enqueue(
            config, calls, stage_log=str(LOG_DIR / f"unary-stages-{time.monotonic_ns()}")
        )
    except Exception as exc:  # the anatomy is a section; its failure is printed
        print(f"  unary anatomy failed: {type(exc).__name__}: {exc}", flush=True)
    label = (
        f"unary Enqueue round trip, idle coordinator, no worker, {calls:,} calls "
        f"{PACE_S * 1000:.0f} ms apart"
    )
    target = Target.all_of(
        "p50 ≤ 1.5 ms and ≤ 2× the plain insert",
        Target.at_most(1.5, ""),
        Target.ratio_at_most(2.0, ""),
    )
    return [
        Row(
            figure=f"{label}, p50",
            unit="ms",
            ours=ours["p50"],
            comparison=plain["p50"],
            comparison_name="plain psycopg INSERT + COMMIT",
            target=target,
            higher_is_better=False,
            note="; ".join(errors),
        ),
        Row(
            figure=f"{label}, p99",
            unit="ms",
            ours=ours["p99"],
            comparison=plain["p99"],
            comparison_name="plain psycopg INSERT + COMMIT",
            higher_is_better=False,
        ),
    ]
