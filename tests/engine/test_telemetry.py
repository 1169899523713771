"""Engine telemetry on both stores: counters by tenant and job type, the backlog
gauges from one grouped query, acquisition spans. Metrics are read with the
OpenTelemetry SDK's in-memory reader; the clock is manual."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from coordinator.model import (
    Completion,
    Failure,
    JobStatus,
    PauseKind,
    PauseScope,
    RetryPolicy,
)
from coordinator.telemetry import install
from coordinator.telemetry.instruments import MAX_SCALING_TYPES, OtelEngineTelemetry
from wfj_engine import Harness, run
from wfj_testing import SECOND, T0, make_job

NO_JITTER = RetryPolicy(initial_backoff_ms=10_000, backoff_multiplier=2.0, jitter=0.0).to_json()


class Observed:
    """An engine's telemetry wired to in-memory readers."""

    def __init__(self, h: Harness) -> None:
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        self.spans = InMemorySpanExporter()
        self.tracers = TracerProvider()
        self.tracers.add_span_processor(SimpleSpanProcessor(self.spans))
        install(
            h.engine,
            OtelEngineTelemetry(
                h.engine,
                meter=self.meters.get_meter("test"),
                tracer=self.tracers.get_tracer("test"),
                backlog_refresh_s=0,
            ),
        )

    def data_points(self, name: str) -> Iterator[Any]:
        """Data points of metric ``name``."""
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        yield from metric.data.data_points

    def points(self, name: str) -> dict[tuple[str, str], Any]:
        """Data points of metric ``name`` by (tenant, job type); histograms give their count."""
        out: dict[tuple[str, str], Any] = {}
        for point in self.data_points(name):
            key = (point.attributes.get("tenant", ""), point.attributes.get("job_type", ""))
            out[key] = getattr(point, "value", None)
            if out[key] is None:
                out[key] = point.count
        return out

    def labelled(self, name: str) -> dict[tuple[tuple[str, str], ...], Any]:
        """Data points of gauge ``name`` by their sorted attributes."""
        return {tuple(sorted(p.attributes.items())): p.value for p in self.data_points(name)}

    def close(self) -> None:
        self.meters.shutdown()
        self.tracers.shutdown()


def test_counters_follow_a_known_workload(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        seen = Observed(h)
        try:
            a1 = await h.enqueue(tenant_id="tenant-a")
            a2 = await h.enqueue(tenant_id="tenant-a")
            b1 = await h.enqueue(
                tenant_id="tenant-b", job_type="other", max_attempts=2, retry_policy=NO_JITTER
            )
            assert seen.points("wfjobs.jobs.enqueued") == {
                ("tenant-a", "noop"): 2,
                ("tenant-b", "other"): 1,
            }
            h.clock.advance(3)
            assert seen.points("wfjobs.queue.depth") == {
                ("tenant-a", "noop"): 2,
                ("tenant-b", "other"): 1,
            }
            assert seen.points("wfjobs.queue.oldest_age") == {
                ("tenant-a", "noop"): 3.0,
                ("tenant-b", "other"): 3.0,
            }

            leased = dict((row.id, token) for row, token in await h.lease(types=("noop", "other")))
            assert set(leased) == {a1, a2, b1}
            assert seen.points("wfjobs.jobs.started") == {
                ("tenant-a", "noop"): 2,
                ("tenant-b", "other"): 1,
            }
            assert seen.points("wfjobs.job.start_latency") == {
                ("tenant-a", "noop"): 2,
                ("tenant-b", "other"): 1,
            }
            assert seen.points("wfjobs.queue.depth") == {}

            await h.engine.report(
                [Completion(a1, leased[a1]), Failure(b1, leased[b1], "boom", "IOError")]
            )
            # a2's lease runs out: the reaper ends the attempt and the job is retried.
            h.clock.advance(31)
            reaped = await h.chores.lease_reaper.run_once(h.clock.now_us())
            assert reaped.reclaimed == 1
            assert seen.points("wfjobs.jobs.completed") == {("tenant-a", "noop"): 1}
            assert seen.points("wfjobs.leases.expired") == {("tenant-a", "noop"): 1}
            assert seen.points("wfjobs.jobs.retried") == {
                ("tenant-a", "noop"): 1,
                ("tenant-b", "other"): 1,
            }

            [(row, token)] = await h.lease(types=("other",))
            [result] = await h.engine.report([Failure(b1, token, "again", "IOError")])
            assert result.status == JobStatus.FAULTED
            assert seen.points("wfjobs.jobs.failed") == {("tenant-b", "other"): 1}
            assert seen.points("wfjobs.jobs.started")[("tenant-b", "other")] == 2

            acquisitions = [s for s in seen.spans.get_finished_spans() if s.name == "acquire"]
            assert sum(s.attributes["wfjobs.leased"] for s in acquisitions) == 4
            assert all(s.end_time >= s.start_time for s in acquisitions)
        finally:
            seen.close()

    run(store_url, scenario)


def test_outcome_of_a_job_leased_elsewhere_is_counted_as_unknown(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        job_id = await h.enqueue()
        [(_, token)] = await h.lease()
        seen = Observed(h)  # attached after the lease: the job's labels are not known
        try:
            await h.engine.report([Completion(job_id, token)])
            assert seen.points("wfjobs.jobs.completed") == {("unknown", "unknown"): 1}
        finally:
            seen.close()

    run(store_url, scenario)


def test_workers_and_free_slots_gauges(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        from coordinator.engine import WorkerSession

        seen = Observed(h)
        try:
            session = WorkerSession("w1", frozenset({"noop"}))
            h.engine.open_session(session)
            h.engine.grant(session, 7)
            assert seen.points("wfjobs.workers.connected") == {("", ""): 1}
            assert seen.points("wfjobs.workers.free_slots") == {("", ""): 7}
            h.engine.close_session(session)
            assert seen.points("wfjobs.workers.connected") == {("", ""): 0}
        finally:
            seen.close()

    run(store_url, scenario)


def test_single_enqueues_committed_together_are_counted(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        import asyncio

        from wfj_testing import make_job

        seen = Observed(h)
        try:
            await asyncio.gather(*(h.engine.enqueue_one(make_job()) for _ in range(3)))
            assert seen.points("wfjobs.jobs.enqueued") == {("tenant-a", "noop"): 3}
        finally:
            seen.close()

    run(store_url, scenario)


def test_job_series_carry_the_category_label(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        seen = Observed(h)
        try:
            job_id = await h.enqueue(category=3)
            await h.enqueue(category=4)
            await h.enqueue()

            def by_category(name: str) -> dict[str, Any]:
                out: dict[str, Any] = {}
                data = seen.reader.get_metrics_data()
                for resource in data.resource_metrics if data else ():
                    for scope in resource.scope_metrics:
                        for metric in scope.metrics:
                            if metric.name == name:
                                for point in metric.data.data_points:
                                    out[point.attributes["category"]] = point.value
                return out

            expected = {"integration": 1, "maintenance": 1, "unspecified": 1}
            assert by_category("wfjobs.jobs.enqueued") == expected
            assert by_category("wfjobs.queue.depth") == expected
            leased = dict((row.id, token) for row, token in await h.lease())
            assert by_category("wfjobs.jobs.started") == expected
            await h.engine.report([Completion(job_id, leased[job_id])])
            assert by_category("wfjobs.jobs.completed") == {"integration": 1}
        finally:
            seen.close()

    run(store_url, scenario)


def test_throttled_time_is_counted_per_rate_limit_once(store_url: str) -> None:
    """Each moment a rate limit holds starts back is counted once for that
    limit, however many passes see it throttled."""

    async def scenario(h: Harness) -> None:
        from coordinator.model import LimitKind, RateLimit
        from wfj_testing import make_job

        seen = Observed(h)
        try:
            await h.engine.set_rate_limit(RateLimit(LimitKind.JOB_TYPE, "noop", 2, 1000, 1))
            await h.engine.set_rate_limit(RateLimit(LimitKind.TENANT, "*", 1, 4000, 1))
            await h.engine.enqueue([make_job() for _ in range(5)])
            assert len(await h.lease(5)) == 1
            await h.lease(5)  # a second pass sees the same hold: not counted again
            h.clock.advance(0.5)
            # The job type admits again; the tenant limit still holds until 4 s.
            assert await h.lease(5) == []

            def throttled() -> dict[str, float]:
                out: dict[str, float] = {}
                data = seen.reader.get_metrics_data()
                for resource in data.resource_metrics if data else ():
                    for scope in resource.scope_metrics:
                        for metric in scope.metrics:
                            if metric.name == "wfjobs.rate_limit.throttled":
                                for point in metric.data.data_points:
                                    out[point.attributes["limit"]] = point.value
                return out

            counted = throttled()
            assert counted.keys() == {"job_type:noop", "tenant:*"}
            assert abs(counted["job_type:noop"] - 0.5) < 1e-9
            assert abs(counted["tenant:*"] - 4.0) < 1e-9
        finally:
            seen.close()

    run(store_url, scenario)


def test_a_category_rate_limit_is_labelled_by_the_category_name(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        from coordinator.model import JobCategory, LimitKind, RateLimit
        from wfj_testing import make_job

        seen = Observed(h)
        try:
            await h.engine.set_rate_limit(RateLimit(LimitKind.CATEGORY, "maintenance", 1, 2000, 1))
            await h.engine.enqueue(
                [make_job(category=int(JobCategory.MAINTENANCE)) for _ in range(2)]
            )
            assert len(await h.lease(5)) == 1
            assert await h.lease(5) == []
            counted: dict[str, float] = {}
            data = seen.reader.get_metrics_data()
            for resource in data.resource_metrics if data else ():
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        if metric.name == "wfjobs.rate_limit.throttled":
                            for point in metric.data.data_points:
                                counted[point.attributes["limit"]] = point.value
            assert counted.keys() == {"category:maintenance"}
            assert abs(counted["category:maintenance"] - 2.0) < 1e-9
        finally:
            seen.close()

    run(store_url, scenario)


def test_a_row_set_aside_is_counted_by_chore(store_url: str) -> None:
    async def scenario(h: Harness) -> None:
        seen = Observed(h)
        try:
            ids = [await h.enqueue(max_attempts=5) for _ in range(2)]
            assert len(await h.lease(2)) == 2
            # A stored retry policy that does not parse: deciding its expiry raises.
            with h.engine.store.engine.begin() as conn:
                conn.execute(
                    sa.text("UPDATE wfj_jobs SET retry_policy = :p WHERE id = :id"),
                    {
                        "p": '{"backoff_multiplier": 2.0, "written_by": "an old release"}',
                        "id": ids[0],
                    },
                )
            h.clock.advance(120)
            assert (await h.chores.lease_reaper.run_once(h.clock.now_us())).reclaimed == 1
            counted = {
                point.attributes["chore"]: point.value
                for resource in seen.reader.get_metrics_data().resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
                if metric.name == "wfjobs.rows.set_aside"
                for point in metric.data.data_points
            }
            assert counted == {"lease-reaper": 1}
        finally:
            seen.close()

    run(store_url, scenario)


def test_scaling_gauges_count_ready_scheduled_paused_and_in_flight_per_job_type(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        seen = Observed(h)
        try:
            for _ in range(3):
                await h.enqueue(job_type="noop")
            await h.enqueue(job_type="noop", due_at=T0 + 3600 * SECOND)
            await h.enqueue(job_type="other", definition_id="frozen")
            await h.engine.pause(PauseScope(PauseKind.DEFINITION, value="frozen"), "ops", "", None)
            leased = await h.lease(1, types=("noop",))
            assert len(leased) == 1
            h.clock.advance(2)
            # No worker is connected: the two that could start wait for one.
            assert seen.points("wfjobs.scaling.ready") == {("", "noop"): 0, ("", "other"): 0}
            assert seen.points("wfjobs.scaling.scheduled") == {("", "noop"): 1, ("", "other"): 0}
            assert seen.points("wfjobs.scaling.paused") == {("", "noop"): 0, ("", "other"): 1}
            assert seen.points("wfjobs.scaling.in_flight") == {("", "noop"): 1, ("", "other"): 0}
            assert seen.points("wfjobs.scaling.demand") == {("", "noop"): 3, ("", "other"): 0}
            held = seen.labelled("wfjobs.scaling.held")
            assert held[(("job_type", "noop"), ("reason", "no_worker"))] == 2
            assert held[(("job_type", "other"), ("reason", "paused"))] == 1
            assert sum(held.values()) == 3
            assert seen.points("wfjobs.scaling.oldest_ready_age") == {
                ("", "noop"): 0.0,
                ("", "other"): 0.0,
            }
        finally:
            seen.close()

    run(store_url, scenario)


def test_a_job_type_named_other_keeps_its_own_series_beside_the_overflow(
    store_url: str,
) -> None:
    async def scenario(h: Harness) -> None:
        seen = Observed(h)
        try:
            await h.engine.enqueue(
                [make_job(job_type="other", due_at=T0) for _ in range(500)]
                + [make_job(job_type=f"type-{i:03d}", due_at=T0) for i in range(150)]
            )
            h.clock.advance(1)
            demand = seen.labelled("wfjobs.scaling.demand")
            assert len(demand) == MAX_SCALING_TYPES
            # The busiest type keeps its series; the overflow is labelled apart.
            assert demand[(("job_type", "other"),)] == 500
            assert demand[(("overflow", "true"),)] == 150 - (MAX_SCALING_TYPES - 2)
            assert sum(demand.values()) == 650
        finally:
            seen.close()

    run(store_url, scenario)
