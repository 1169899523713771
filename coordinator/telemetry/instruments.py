"""OpenTelemetry-backed engine hooks: the coordinator's metric instruments and chore spans.

Design note. Counters are labelled by ``tenant``, ``job_type`` and ``category``
(the job category's lower-case name) only, so the number of series is bounded
by the lanes in use times the six categories, never by jobs. Outcomes are
reported by job id; the tenant and type of a job are remembered when it is
leased here (a bounded map, oldest entries dropped first) and looked up when
its outcome arrives. An outcome for a job leased by another replica, or before
a restart, is counted with ``tenant``, ``job_type`` and ``category`` "unknown".

Queue depth and oldest pending age come from one grouped query over PENDING
rows (``job_backlog_by_tenant_type``), run by the scrape or export thread at
most once per ``backlog_refresh_s``; between refreshes the cached snapshot is
served. Acquisition and reaper spans are recorded after the fact with their
real start time, and only when they did something or were slow, so an idle
coordinator exports nothing.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from coordinator.engine.operations import registered_worker
from coordinator.engine.scaling import by_job_type, summed
from coordinator.model import (
    AttemptEnd,
    AttemptOutcome,
    JobRow,
    JobStatus,
    LimitKind,
    NewJob,
    ScalingFigures,
    category_label,
)
from coordinator.telemetry.hooks import EngineTelemetry

# The labels of a job's series: (tenant, job type, category name).
Lane = tuple[str, str, str]

log = logging.getLogger(__name__)

UNKNOWN = "unknown"
# Jobs whose labels are remembered between lease and outcome.
MAX_REMEMBERED = 100_000
# Acquisitions and reaper runs slower than this get a span even when empty.
SLOW_NS = 100_000_000

# Histogram buckets, in seconds, for short durations (acquisition, start latency).
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
)
BATCH_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


class OtelEngineTelemetry(EngineTelemetry):
    """Counts, times and traces the engine's work for one engine."""

    enabled = True

    def __init__(
        self,
        engine: Any,
        *,
        meter: Meter | None,
        tracer: trace.Tracer | None,
        backlog_refresh_s: float = 10.0,
    ) -> None:
        self._engine = engine
        self._tracer = tracer
        self._meter = meter
        self._labels: dict[str, Lane] = {}
        self._backlog_refresh_s = backlog_refresh_s
        self._backlog: list[Any] = []
        self._backlog_at = 0.0
        self._backlog_lock = threading.Lock()
        self._scaling: list[ScalingFigures] = []
        self._scaling_at = 0.0
        # Per rate limit label: until when its throttled time is already counted.
        self._throttled_until: dict[str, int] = {}
        if meter is not None:
            self._create_instruments(meter)

    def _create_instruments(self, meter: Meter) -> None:
        def counter(name: str, description: str) -> Any:
            return meter.create_counter(name, unit="{job}", description=description)

        self.enqueued_total = counter("wfjobs.jobs.enqueued", "Jobs stored (not deduplicated).")
        self.started_total = counter("wfjobs.jobs.started", "Attempts started (jobs leased).")
        self.completed_total = counter("wfjobs.jobs.completed", "Jobs completed.")
        self.failed_total = counter(
            "wfjobs.jobs.failed", "Jobs faulted: an attempt failed with no retry left."
        )
        self.retried_total = counter(
            "wfjobs.jobs.retried",
            "Failed, expired, timed-out or unlocked attempts scheduled for another try.",
        )
        self.cancelled_total = counter("wfjobs.jobs.cancelled", "Running jobs ended by a cancel.")
        self.released_total = counter(
            "wfjobs.jobs.released",
            "Attempts handed back unfinished (by the worker, or when their stream ended).",
        )
        self.lease_expired_total = counter(
            "wfjobs.leases.expired", "Attempts ended by the reaper because their lease expired."
        )
        self.set_aside_total = meter.create_counter(
            "wfjobs.rows.set_aside",
            unit="{row}",
            description="Rows a chore or outcome report could not process and set aside.",
        )
        self.rate_throttled_total = meter.create_counter(
            "wfjobs.rate_limit.throttled",
            unit="s",
            description=(
                "Time a rate limit held starts back (from when acquisition found it "
                "throttled to when it next admits a start), per limit."
            ),
        )
        self.acquisition_duration = meter.create_histogram(
            "wfjobs.acquisition.duration",
            unit="s",
            description="Time of one acquisition: read candidates, pick fairly, lease.",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self.acquisition_batch = meter.create_histogram(
            "wfjobs.acquisition.batch_size",
            unit="{job}",
            description="Jobs leased by one acquisition.",
            explicit_bucket_boundaries_advisory=BATCH_BUCKETS,
        )
        self.start_latency = meter.create_histogram(
            "wfjobs.job.start_latency",
            unit="s",
            description="From when a job became eligible (enqueued or due) to its lease.",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        meter.create_observable_gauge(
            "wfjobs.queue.depth",
            callbacks=[self._observe_depth],
            unit="{job}",
            description="PENDING jobs that are due (paused ones included).",
        )
        meter.create_observable_gauge(
            "wfjobs.queue.oldest_age",
            callbacks=[self._observe_oldest_age],
            unit="s",
            description="Age of the oldest due PENDING job, from its due time.",
        )
        for name, figure, text in _SCALING_GAUGES:
            meter.create_observable_gauge(
                name,
                callbacks=[self._scaling_observer(figure)],
                unit="s" if figure == "oldest_ready_age" else "{job}",
                description=text,
            )
        meter.create_observable_gauge(
            "wfjobs.workers.connected",
            callbacks=[self._observe_workers],
            unit="{worker}",
            description="Workers with an open job stream to this coordinator.",
        )
        meter.create_observable_gauge(
            "wfjobs.workers.free_slots",
            callbacks=[self._observe_free_slots],
            unit="{slot}",
            description="Credit granted by connected workers and not yet used.",
        )

    # -- labels ----------------------------------------------------------------------------

    def _remember(self, job_id: str, lane: Lane) -> None:
        labels = self._labels
        if len(labels) >= MAX_REMEMBERED:
            del labels[next(iter(labels))]
        labels[job_id] = lane

    def _lane(self, job_id: str, keep: bool = False) -> Lane:
        labels = self._labels.get(job_id) if keep else self._labels.pop(job_id, None)
        return labels or (UNKNOWN, UNKNOWN, UNKNOWN)

    # -- hooks -----------------------------------------------------------------------------

    def enqueued(self, jobs: Sequence[NewJob], results: Sequence[tuple[str, bool, int]]) -> None:
        if self._meter is None:
            return
        counts: dict[Lane, int] = {}
        for job, (_, deduplicated, _) in zip(jobs, results, strict=False):
            if not deduplicated:
                key = (job.tenant_id, job.job_type, category_label(job.category))
                counts[key] = counts.get(key, 0) + 1
        for lane, n in counts.items():
            self.enqueued_total.add(n, _attributes(lane))

    def leased(self, rows: Sequence[JobRow], now: int) -> None:
        if self._meter is None:
            return
        counts: dict[Lane, int] = {}
        for row in rows:
            key = (row.tenant_id, row.job_type, category_label(row.category))
            counts[key] = counts.get(key, 0) + 1
            self._remember(row.id, key)
            eligible = max(row.created_at or 0, row.due_at or 0)
            if eligible:
                self.start_latency.record(max(0, now - eligible) / 1_000_000, _attributes(key))
        for lane, n in counts.items():
            self.started_total.add(n, _attributes(lane))

    def outcomes(self, completed: Collection[str], ends: Mapping[str, AttemptEnd]) -> None:
        if self._meter is None:
            return
        # One add per counter and lane per batch: the SDK's add costs microseconds.
        counts: dict[tuple[Any, Lane], int] = {}
        for job_id in completed:
            key = (self.completed_total, self._lane(job_id))
            counts[key] = counts.get(key, 0) + 1
        for end in ends.values():
            key = (self._counter_for(end), self._lane(end.job_id))
            counts[key] = counts.get(key, 0) + 1
        _add_all(counts)

    def reaped(self, ends: Sequence[AttemptEnd]) -> None:
        if self._meter is None:
            return
        counts: dict[tuple[Any, Lane], int] = {}
        for end in ends:
            lane = self._lane(end.job_id)
            for counter in (self.lease_expired_total, self._counter_for(end)):
                counts[(counter, lane)] = counts.get((counter, lane), 0) + 1
        _add_all(counts)

    def _counter_for(self, end: AttemptEnd) -> Any:
        if end.new_status == JobStatus.CANCELLED:
            return self.cancelled_total
        if end.new_status == JobStatus.FAULTED:
            return self.failed_total
        if end.new_status == JobStatus.COMPLETED:
            return self.completed_total
        if end.outcome == AttemptOutcome.RELEASED:
            return self.released_total
        return self.retried_total

    def acquired(self, job_types: Collection[str], result: Any, started_ns: int) -> None:
        ended_ns = time.time_ns()
        leased = int(getattr(result, "leased", 0))
        if self._meter is not None:
            self.acquisition_duration.record((ended_ns - started_ns) / 1e9)
            self.acquisition_batch.record(leased)
        if self._tracer is not None and (leased or ended_ns - started_ns >= SLOW_NS):
            span = self._tracer.start_span(
                "acquire",
                start_time=started_ns,
                attributes={
                    "wfjobs.job_types": sorted(job_types),
                    "wfjobs.wanted": int(getattr(result, "wanted", 0)),
                    "wfjobs.leased": leased,
                    "wfjobs.dropped": int(getattr(result, "dropped", 0)),
                },
            )
            span.end(end_time=ended_ns)

    def reaper_ran(self, reclaimed: int, started_ns: int) -> None:
        ended_ns = time.time_ns()
        if self._tracer is not None and (reclaimed or ended_ns - started_ns >= SLOW_NS):
            span = self._tracer.start_span(
                "reap expired leases",
                start_time=started_ns,
                attributes={"wfjobs.reclaimed": reclaimed},
            )
            span.end(end_time=ended_ns)

    def rows_set_aside(self, chore: str, count: int) -> None:
        if self._meter is not None and count:
            self.set_aside_total.add(count, {"chore": chore})

    def rate_throttled(
        self, throttled: Mapping[tuple[int, str], tuple[Any, int]], now: int
    ) -> None:
        if self._meter is None:
            return
        for (kind, value), (limit, until) in throttled.items():
            label = _limit_label(kind, limit.value if limit is not None else value)
            counted = self._throttled_until.get(label, 0)
            start = max(now, counted)
            if until > start:
                self.rate_throttled_total.add((until - start) / 1_000_000, {"limit": label})
                self._throttled_until[label] = until

    # -- observable gauges ---------------------------------------------------------------------

    def _backlog_rows(self) -> list[Any]:
        with self._backlog_lock:
            if time.monotonic() - self._backlog_at >= self._backlog_refresh_s:
                try:
                    now = self._engine.clock.now_us()
                    self._backlog = self._engine.store.job_backlog_by_tenant_type(now)
                except Exception as exc:  # noqa: BLE001 - a failed refresh keeps the old figures
                    log.warning("cannot refresh the queue depth for metrics: %s", exc)
                self._backlog_at = time.monotonic()
            return self._backlog

    def _observe_depth(self, options: CallbackOptions) -> Iterable[Observation]:
        for row in self._backlog_rows():
            yield Observation(row.n, _attributes(_backlog_lane(row)))

    def _observe_oldest_age(self, options: CallbackOptions) -> Iterable[Observation]:
        now = self._engine.clock.now_us()
        for row in self._backlog_rows():
            age = max(0, now - row.oldest_due_at) / 1_000_000
            yield Observation(age, _attributes(_backlog_lane(row)))

    def _scaling_rows(self) -> list[ScalingFigures]:
        """The backlog figures per job type (engine/scaling.py: the numbers KEDA
        and GetStats read), refreshed as the backlog is."""
        with self._backlog_lock:
            if time.monotonic() - self._scaling_at >= self._backlog_refresh_s:
                try:
                    engine = self._engine
                    now = engine.clock.now_us()
                    ops = engine.ops
                    # The scrape thread reads the worker registry every replica writes.
                    workers = [
                        registered_worker(r) for r in engine.store.worker_list(now - ops.stale_us())
                    ]
                    figures = engine.scaling.compute(now, (), "", 0, workers, ops.draining)
                    self._scaling = bounded_by_type(by_job_type(figures))
                except Exception as exc:  # noqa: BLE001 - a failed refresh keeps the old figures
                    log.warning("cannot refresh the scaling figures for metrics: %s", exc)
                self._scaling_at = time.monotonic()
            return self._scaling

    def _scaling_observer(self, figure: str) -> Any:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            now = self._engine.clock.now_us()
            for row in self._scaling_rows():
                labels = _scaling_labels(row)
                if figure == "held":
                    for reason in HELD_REASONS:
                        yield Observation(getattr(row, reason), {**labels, "reason": reason})
                    continue
                if figure == "oldest_ready_age":
                    due = row.oldest_ready_due_at
                    value: float = max(0, now - due) / 1_000_000 if due is not None else 0.0
                else:
                    value = getattr(row, figure)
                yield Observation(value, labels)

        return observe

    def _sessions(self) -> list[Any]:
        # Read from the scrape thread while the event loop may change the dict.
        for _ in range(10):
            try:
                return list(self._engine.dispatcher.sessions.values())
            except RuntimeError:
                continue
        return []

    def _observe_workers(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(len(self._sessions()))

    def _observe_free_slots(self, options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(sum(s.credits for s in self._sessions() if not s.closed))


# The autoscaling gauges (docs/autoscaling.md): one series per job type.
_SCALING_GAUGES = (
    (
        "wfjobs.scaling.ready",
        "ready",
        "PENDING jobs a connected worker could start now (due, not paused, not held).",
    ),
    ("wfjobs.scaling.scheduled", "scheduled", "PENDING jobs not due yet (not paused)."),
    ("wfjobs.scaling.paused", "paused", "PENDING jobs a pause holds."),
    (
        "wfjobs.scaling.held",
        "held",
        "PENDING jobs held, by reason (paused, limit, rate, ordering, no_worker, drained).",
    ),
    ("wfjobs.scaling.in_flight", "running", "RUNNING jobs."),
    (
        "wfjobs.scaling.demand",
        "demand",
        "What the KEDA scaler serves: ready, waiting only for a worker, and in flight.",
    ),
    (
        "wfjobs.scaling.oldest_ready_age",
        "oldest_ready_age",
        "Age of the oldest ready job, from its due time (0: none).",
    ),
)
HELD_REASONS = ("paused", "limit", "rate", "ordering", "no_worker", "drained")
# Job types with their own series; the rest are summed into one series labelled
# overflow="true" and no job type (no job type is named "": enqueue refuses it),
# so a deployment with unbounded job type names keeps a bounded series count.
MAX_SCALING_TYPES = 100
OTHER_JOB_TYPES = ""


def _scaling_labels(row: ScalingFigures) -> dict[str, str]:
    if row.job_type == OTHER_JOB_TYPES:
        return {"overflow": "true"}
    return {"job_type": row.job_type}


def bounded_by_type(rows: Sequence[ScalingFigures]) -> list[ScalingFigures]:
    """``rows`` (one per job type) with at most ``MAX_SCALING_TYPES``: the
    busiest keep their own, the rest are summed into one row named
    ``OTHER_JOB_TYPES``."""
    if len(rows) <= MAX_SCALING_TYPES:
        return list(rows)
    ranked = sorted(rows, key=lambda r: (-r.demand, r.job_type))
    kept, rest = ranked[: MAX_SCALING_TYPES - 1], ranked[MAX_SCALING_TYPES - 1 :]
    return [*kept, functools.reduce(lambda a, b: summed(a, b, OTHER_JOB_TYPES), rest)]


def _attributes(lane: Lane) -> dict[str, str]:
    tenant, job_type, category = lane
    return {"tenant": tenant, "job_type": job_type, "category": category}


def _backlog_lane(row: Any) -> Lane:
    return (row.tenant_id, row.job_type, category_label(row.category))


def _add_all(counts: Mapping[tuple[Any, Lane], int]) -> None:
    for (counter, lane), n in counts.items():
        counter.add(n, _attributes(lane))


def _limit_label(kind: int, value: str) -> str:
    """The ``limit`` label of a rate limit: ``<kind>:<value>``, a category by its name."""
    if kind == LimitKind.CATEGORY and value.isdigit():
        value = category_label(int(value))
    return f"{LimitKind(kind).name.lower()}:{value}"


__all__ = ["OtelEngineTelemetry"]
