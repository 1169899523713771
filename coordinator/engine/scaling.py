"""The backlog: what workers could start now, what is held and why, what is
scheduled (docs/autoscaling.md). KEDA's external scaler, GetStats and the
scaling gauges all read it from ``Scaling``, so they cannot disagree.

Design note. The store counts PENDING and RUNNING jobs by state (running,
paused, not due, held behind its ordering key, else startable; the first that
applies) per tenant, job type and category, told apart by definition and
concurrency key only when a limit names those kinds (``job_backlog_groups``).
The startable ones are then held against the rules acquisition applies, in
this order, each job counted once:

* every limited scope contributes at most its free slots: a concurrency limit
  its ``max_running`` minus the jobs running in the scope (of every job type),
  a rate limit the starts it admits now (0 while throttled). Groups are served
  in the order: a worker is there to take them, then oldest first; what a scope
  cannot admit is held by its rate limit (when that is the tighter bound) or by
  its concurrency limit;
* of what fits, a job whose job type no connected worker serves for its tenant
  waits for a worker (``no_worker``), one whose serving workers are all drained,
  or whose coordinator is drained, waits for them (``drained``); the rest are
  ``ready``.

KEDA scales by ``demand``: ready, waiting only for a worker (a Deployment
scaled to zero has none, and a new pod takes them), plus running.

The scaler is open to callers without a token (docs/autoscaling.md), so it
must cost nothing to flood: ``Scaling.scaler_figures`` answers every caller
from one cached figure per query shape (job types, tenant, category),
refreshed at most once per ``refresh_s``, and concurrent callers of a stale
shape await the one refresh in progress (single flight). At most
``MAX_SHAPES`` shapes are kept (the least recently refreshed go first).
GetStats reads ``backlog`` fresh: it is authenticated and charged per
credential.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from coordinator.clock import Clock
from coordinator.engine.concurrency_limits import LimitBook, ScopeKey
from coordinator.engine.limit_settings import LimitSettings
from coordinator.engine.operations import Operations
from coordinator.engine.rate_limits import RateBook, RateBucket, starts_admitted
from coordinator.engine.runner import StoreRunner
from coordinator.errors import InvalidArgument
from coordinator.model import (
    BacklogGroup,
    BacklogState,
    Candidate,
    ScalingFigures,
    parse_category,
    shown,
)
from coordinator.store import Store

DEFAULT_TARGET_PER_REPLICA = 10.0
# The scaler answers without a token, so its metadata is bounded like every string
# of the API (docs/limits.md), and a target must fit KEDA's int64 target size.
MAX_METADATA_VALUE = 512
MAX_TARGET_PER_REPLICA = 1e9
METRIC_NAME = "wfjobs_backlog"
# How old a cached scaler figure may be, and how many query shapes are kept.
SCALER_REFRESH_S = 1.0
MAX_SHAPES = 1_000


@dataclass(frozen=True, slots=True)
class ScalerQuery:
    """What one ScaledObject scales by, read from its scaler metadata."""

    job_types: tuple[str, ...]
    tenant_id: str = ""
    category: int = 0
    target_per_replica: float = DEFAULT_TARGET_PER_REPLICA

    @property
    def shape(self) -> tuple[tuple[str, ...], str, int]:
        """What the figures depend on (the target does not change them)."""
        return (tuple(sorted(set(self.job_types))), self.tenant_id, self.category)

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, str]) -> ScalerQuery:
        """Raises ``InvalidArgument`` naming the key a person must fix."""
        for key, value in metadata.items():
            if len(key) > MAX_METADATA_VALUE:
                raise InvalidArgument(
                    f"scalerMetadata key {shown(key)} is {len(key):,} characters long; "
                    f"the limit is {MAX_METADATA_VALUE} (docs/limits.md)"
                )
            if len(value) > MAX_METADATA_VALUE:
                raise InvalidArgument(
                    f"scalerMetadata key {shown(key)}: value is {len(value):,} characters long; "
                    f"the limit is {MAX_METADATA_VALUE} (docs/limits.md)"
                )
        types = tuple(t.strip() for t in metadata.get("jobTypes", "").split(",") if t.strip())
        if not types:
            raise InvalidArgument(
                "scalerMetadata.jobTypes is required: the job types the workers serve, "
                "comma-separated (e.g. 'send-email,render-pdf')"
            )
        category = 0
        if metadata.get("category", "").strip():
            parsed = parse_category(metadata["category"])
            if parsed is None:
                raise InvalidArgument(
                    f"scalerMetadata.category {shown(metadata['category'])} is not a job category "
                    "(continuation, activity_work, integration, maintenance, custom)"
                )
            category = int(parsed)
        target = DEFAULT_TARGET_PER_REPLICA
        if metadata.get("targetPerReplica", "").strip():
            try:
                target = float(metadata["targetPerReplica"])
            except ValueError:
                target = 0.0
            if not 0 < target <= MAX_TARGET_PER_REPLICA:
                raise InvalidArgument(
                    f"scalerMetadata.targetPerReplica must be a number above 0 and at most "
                    f"{MAX_TARGET_PER_REPLICA:.0e}, got {shown(metadata['targetPerReplica'])}"
                )
        return cls(types, metadata.get("tenant", "").strip(), category, target)


class Serving(Protocol):
    """A connected worker as the backlog judges it (``WorkerView``)."""

    @property
    def draining(self) -> bool: ...

    def takes(self, job_type: str, tenant_id: str) -> bool: ...


# Whether a tenant's job type has a worker: one not drained, only drained ones, none.
_SERVED, _DRAINED, _UNSERVED = 0, 1, 2


def _served(workers: Sequence[Serving], job_type: str, tenant_id: str, drained: bool) -> int:
    serving = [w for w in workers if w.takes(job_type, tenant_id)]
    if not serving:
        return _UNSERVED
    if drained or all(w.draining for w in serving):
        return _DRAINED
    return _SERVED


def backlog_figures(
    groups: Iterable[BacklogGroup],
    *,
    limits: LimitBook,
    running: Mapping[ScopeKey, int],
    rates: RateBook,
    buckets: Mapping[ScopeKey, tuple[int, int, int]],
    workers: Sequence[Serving],
    drained: bool,
    now: int,
) -> list[ScalingFigures]:
    """Figures per (tenant, job type) from the store's groups (see the note).

    ``running``: RUNNING jobs per concurrency-limited scope, of every job type;
    ``buckets``: the stored rate buckets; ``drained``: this coordinator hands
    out no jobs."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    oldest: dict[tuple[str, str], int] = {}
    served: dict[tuple[str, str], int] = {}
    startable: list[tuple[int, int, BacklogGroup]] = []
    named = {
        BacklogState.RUNNING: "running",
        BacklogState.PAUSED: "paused",
        BacklogState.SCHEDULED: "scheduled",
        BacklogState.ORDERING: "ordering",
    }
    for g in groups:
        key = (g.tenant_id, g.job_type)
        figure = counts.setdefault(key, {})
        if g.state != BacklogState.STARTABLE:
            figure[named[g.state]] = figure.get(named[g.state], 0) + g.n
            continue
        if key not in served:
            served[key] = _served(workers, g.job_type, g.tenant_id, drained)
        due = g.oldest_due_at if g.oldest_due_at is not None else now
        startable.append((served[key], due, g))
    # Room left in each limited scope: a concurrency limit's free slots, the
    # starts a rate limit admits now.
    free_slots: dict[ScopeKey, int] = {}
    free_starts: dict[ScopeKey, int] = {}
    startable.sort(key=lambda s: (s[0], s[1], s[2].tenant_id, s[2].job_type, s[2].definition_id))
    for how, due, g in startable:
        job = Candidate(
            "", g.tenant_id, 0, due, g.job_type, g.definition_id, g.concurrency_key, g.category
        )
        slot_scopes = limits.scopes_of(job)
        rate_scopes = rates.scopes_of(job)
        for scope, max_running in slot_scopes:
            if scope not in free_slots:
                free_slots[scope] = max(0, max_running - running.get(scope, 0))
        for scope, rate in rate_scopes:
            if scope not in free_starts:
                bucket = RateBucket(*buckets.get(scope, (0, 0, 0)))
                free_starts[scope] = starts_admitted(rate, bucket, now)
        room_limit = min([g.n, *(free_slots[s] for s, _ in slot_scopes)])
        room_rate = min([g.n, *(free_starts[s] for s, _ in rate_scopes)])
        taken = min(room_limit, room_rate)
        for scope, _ in slot_scopes:
            free_slots[scope] -= taken
        for scope, _ in rate_scopes:
            free_starts[scope] -= taken
        key = (g.tenant_id, g.job_type)
        figure = counts[key]
        if g.n > taken:
            held = "rate" if room_rate <= room_limit else "limit"
            figure[held] = figure.get(held, 0) + g.n - taken
        if taken:
            kind = ("ready", "drained", "no_worker")[how]
            figure[kind] = figure.get(kind, 0) + taken
            if how == _SERVED:
                oldest[key] = min(oldest.get(key, due), due)
    return [
        ScalingFigures(
            job_type, oldest_ready_due_at=oldest.get((tenant, job_type)), tenant_id=tenant, **figure
        )
        for (tenant, job_type), figure in sorted(counts.items())
    ]


def by_job_type(rows: Iterable[ScalingFigures]) -> list[ScalingFigures]:
    """The figures summed over tenants, one row per job type (``tenant_id`` empty)."""
    out: dict[str, ScalingFigures] = {}
    for r in rows:
        have = out.get(r.job_type)
        out[r.job_type] = replace(r, tenant_id="") if have is None else summed(have, r)
    return [out[t] for t in sorted(out)]


def summed(a: ScalingFigures, b: ScalingFigures, job_type: str | None = None) -> ScalingFigures:
    """``a`` and ``b`` counted together (named ``job_type``, else ``a``'s)."""
    dues = [d for d in (a.oldest_ready_due_at, b.oldest_ready_due_at) if d is not None]
    return ScalingFigures(
        a.job_type if job_type is None else job_type,
        ready=a.ready + b.ready,
        scheduled=a.scheduled + b.scheduled,
        running=a.running + b.running,
        oldest_ready_due_at=min(dues) if dues else None,
        paused=a.paused + b.paused,
        limit=a.limit + b.limit,
        rate=a.rate + b.rate,
        ordering=a.ordering + b.ordering,
        no_worker=a.no_worker + b.no_worker,
        drained=a.drained + b.drained,
        tenant_id=a.tenant_id if a.tenant_id == b.tenant_id else "",
    )


def demand(rows: Iterable[ScalingFigures]) -> int:
    """What KEDA scales by (``ScalingFigures.demand``), summed."""
    return sum(r.demand for r in rows)


Shape = tuple[tuple[str, ...], str, int]


class Scaling:
    """The backlog figures, fresh (GetStats, the gauges) or cached per query
    shape for the scaler (see the note)."""

    def __init__(
        self,
        *,
        store: Store,
        run_store: StoreRunner,
        clock: Clock,
        settings: LimitSettings,
        operations: Operations,
        refresh_s: float = SCALER_REFRESH_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._run = run_store
        self._clock = clock
        # Limits as this replica loaded them (acquisition reads the same).
        self._settings = settings
        # The cluster's workers and the drain state.
        self._operations = operations
        self.refresh_s = refresh_s
        self._monotonic = monotonic
        self._cached: OrderedDict[Shape, tuple[float, list[ScalingFigures]]] = OrderedDict()
        self._refreshing: dict[Shape, asyncio.Task[list[ScalingFigures]]] = {}

    def compute(
        self,
        now: int,
        job_types: Sequence[str],
        tenant_id: str,
        category: int,
        workers: Sequence[Serving],
        drained: bool,
    ) -> list[ScalingFigures]:
        """The figures per (tenant, job type), reading the store here (call it
        from a store thread)."""
        limits, rates = self._settings.limits, self._settings.rates
        kinds: Collection[int] = set(limits.kinds) | set(rates.kinds)
        groups = self._store.job_backlog_groups(now, job_types, tenant_id, category, kinds)
        running = self._store.job_running_counts(limits.kinds) if limits else {}
        buckets = self._store.rate_bucket_list(rates.kinds) if rates else {}
        return backlog_figures(
            groups,
            limits=limits,
            running=running,
            rates=rates,
            buckets=buckets,
            workers=workers,
            drained=drained,
            now=now,
        )

    async def backlog(
        self, job_types: Sequence[str] = (), tenant_id: str = "", category: int = 0
    ) -> list[ScalingFigures]:
        """The figures per (tenant, job type), read now."""
        workers = await self._operations.list_workers()
        return await self._run(
            self.compute,
            self._clock.now_us(),
            job_types,
            tenant_id,
            category,
            workers,
            self._operations.draining,
        )

    async def scaler_figures(self, query: ScalerQuery) -> list[ScalingFigures]:
        """The figures per job type of ``query``, at most ``refresh_s`` old."""
        shape = query.shape
        cached = self._cached.get(shape)
        if cached is not None and self._monotonic() - cached[0] < self.refresh_s:
            return cached[1]
        task = self._refreshing.get(shape)
        if task is None:
            task = asyncio.ensure_future(self._refresh(shape))
            self._refreshing[shape] = task
            task.add_done_callback(lambda done: self._refreshed(shape, done))
        # Shielded: one caller going away does not cancel the others' refresh.
        return await asyncio.shield(task)

    def _refreshed(self, shape: Shape, done: asyncio.Task[list[ScalingFigures]]) -> None:
        self._refreshing.pop(shape, None)
        # Its callers may all have gone away: its failure is theirs, not the loop's
        # to report as never retrieved.
        if not done.cancelled():
            done.exception()

    async def _refresh(self, shape: Shape) -> list[ScalingFigures]:
        job_types, tenant_id, category = shape
        figures = by_job_type(await self.backlog(job_types, tenant_id, category))
        self._cached.pop(shape, None)
        self._cached[shape] = (self._monotonic(), figures)
        while len(self._cached) > MAX_SHAPES:
            self._cached.popitem(last=False)
        return figures


__all__ = [
    "METRIC_NAME",
    "Scaling",
    "ScalerQuery",
    "backlog_figures",
    "by_job_type",
    "demand",
    "summed",
]
