"""What the dashboard asks the coordinator, through the SDK's :class:`AdminClient` only.

The blocking client runs in the dashboard's own few threads, so the web
server's event loop never waits on a call and the dashboard never takes
threads from the process it runs in. Every session has its own client over one shared
channel: calls carry the session's token, so the coordinator applies that
token's role and tenant scope to everything the dashboard shows and does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import grpc

from worker_sdk import (
    AdminClient,
    AsyncSchedulerClient,
    JobEvent,
    JobEventFilter,
    JobFilter,
    JobStats,
    JobView,
    PauseRecord,
    WindowCounts,
    WorkflowJobsError,
)

T = TypeVar("T")

# The overview's charts: the last hour in twelve five-minute buckets.
BUCKETS = 12
BUCKET = timedelta(minutes=5)
# Completed jobs read per bucket for the latency chart.
LATENCY_SAMPLE = 100
# How long the chart figures are reused before they are asked for again.
HISTORY_TTL_S = 15.0
# Calls to the coordinator in flight at once; more wait their turn.
THREADS = 8
# Deadline of the calls a page makes: a hung coordinator shows as one in seconds.
PAGE_TIMEOUT_S = 5.0
# The codes that say the coordinator is not answering (not that it refused).
OUTAGE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


@dataclasses.dataclass(frozen=True, slots=True)
class Bucket:
    """Five minutes of the overview's charts."""

    start: datetime
    completed: int
    failed: int
    retried: int
    # Due-to-finish seconds of the completed jobs created in the bucket (p50, p95); None: none.
    latency_p50: float | None
    latency_p95: float | None
    latency_samples: int


@dataclasses.dataclass(frozen=True, slots=True)
class Overview:
    stats: JobStats
    pauses: list[PauseRecord]
    history: list[Bucket]
    read_at: datetime
    # The coordinator did not answer: these figures are the last it gave.
    stale: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Outage:
    """The coordinator stopped answering: since when, and what the last call said."""

    target: str
    since: datetime
    error: str


def _percentile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


class Backend:
    """The coordinator as the dashboard sees it: one channel, one client per token.

    Args:
        channel: A blocking gRPC channel to the coordinator (owned by the caller).
        timeout: Deadline of each call, in seconds.
        events_channel: An asyncio channel to the same coordinator for the
            job event stream (owned by the caller); None: pages only poll.
    """

    def __init__(
        self,
        channel: grpc.Channel,
        *,
        timeout: float = 30.0,
        events_channel: grpc.aio.Channel | None = None,
        page_timeout: float = PAGE_TIMEOUT_S,
        target: str = "",
    ) -> None:
        self._channel = channel
        self._events_channel = events_channel
        self._timeout = timeout
        self._page_timeout = min(page_timeout, timeout)
        self.target = target
        self._clients: dict[tuple[str, bool], AdminClient] = {}
        self._history: dict[tuple[str, str], tuple[float, list[Bucket]]] = {}
        self._overviews: dict[tuple[str, str], Overview] = {}
        self._executor = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="wfj-dashboard")
        # Set while the coordinator does not answer; cleared by the next answer.
        self.outage: Outage | None = None

    def close(self) -> None:
        """Let the calls in flight finish; start no more."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def client(self, token: str, *, action: bool = False) -> AdminClient:
        """The admin client calling with ``token`` (empty: no token); a page's
        calls have a short deadline, an action's the full one."""
        client = self._clients.get((token, action))
        if client is None:
            # token="" (not None): never fall back to the WFJOBS_TOKEN variable.
            timeout = self._timeout if action else self._page_timeout
            client = AdminClient(channel=self._channel, token=token, timeout=timeout)
            self._clients[(token, action)] = client
        return client

    def forget(self, token: str) -> None:
        """Drop the clients of a token no session uses any more."""
        self._clients.pop((token, False), None)
        self._clients.pop((token, True), None)
        for key in [k for k in self._overviews if k[0] == token]:
            del self._overviews[key]

    async def call(
        self,
        token: str,
        method: Callable[..., T],
        *args: Any,
        action: bool = False,
        **kwargs: Any,
    ) -> T:
        """Run ``AdminClient.<method>`` for ``token`` in a worker thread (``action``:
        with the full deadline, for what changes something)."""
        client = self.client(token, action=action)
        bound: Callable[..., T] = getattr(client, method.__name__)
        return await self._observed(self._run(bound, *args, **kwargs))

    async def _observed(self, call: Awaitable[T]) -> T:
        """``call``'s answer, noting whether the coordinator answered at all."""
        try:
            result = await call
        except WorkflowJobsError as exc:
            if exc.code in OUTAGE_CODES:
                since = self.outage.since if self.outage is not None else datetime.now(UTC)
                self.outage = Outage(self.target, since, f"{exc.message} ({exc.code.name})")
            else:
                self.outage = None  # it answered, if only to refuse
            raise
        self.outage = None
        return result

    @property
    def watches_events(self) -> bool:
        """Whether pages can follow the job event stream (else they only poll)."""
        return self._events_channel is not None

    async def watch(
        self, token: str, event_filter: JobEventFilter, placed: asyncio.Event | None = None
    ) -> AsyncIterator[JobEvent]:
        """Job events from now on (``WatchJobEvents``, reconnecting after restarts).

        ``placed`` is set once the coordinator has placed the watch: every event
        committed after that is delivered.

        Raises:
            WorkflowJobsError: The coordinator refuses the watch (a token without
                the scheduler role gets PERMISSION_DENIED).
        """
        if self._events_channel is None:
            raise RuntimeError("this dashboard has no event channel")
        client = AsyncSchedulerClient(channel=self._events_channel, token=token, timeout=None)
        watch = client.watch_events(event_filter)
        await watch.start()
        if placed is not None:
            placed.set()
        async for event in watch:
            yield event

    async def overview(self, token: str, tenant_id: str) -> Overview:
        """Backlog, pauses and the last hour's charts, for one tenant or all ("").

        The calls go out at once: one ``GetStats`` (with the charts' twelve
        windows when they are due again), ``ListPauses`` and, with the windows,
        the twelve latency samples. While the coordinator does not answer: the
        last overview it gave, marked stale (the error itself when there is none).
        """
        key = (token, tenant_id)
        try:
            stats, pauses, history = await self._stats_and_history(token, tenant_id)
        except WorkflowJobsError as exc:
            last = self._overviews.get(key)
            if exc.code not in OUTAGE_CODES or last is None:
                raise
            return dataclasses.replace(last, stale=True)
        view = Overview(stats=stats, pauses=pauses, history=history, read_at=datetime.now(UTC))
        self._overviews[key] = view
        return view

    async def _stats_and_history(
        self, token: str, tenant_id: str
    ) -> tuple[Any, list[Any], list[Bucket]]:
        """GetStats and ListPauses, and the last hour's buckets (completions,
        failures, retries and latency per five minutes), reused for
        :data:`HISTORY_TTL_S` seconds.

        Counts come from ``GetStats`` windows of 5, 10, ... 60 minutes (the
        difference of two neighbours is one bucket); latency from the
        completed jobs ``ListJobs`` returns per bucket (up to :data:`LATENCY_SAMPLE`).
        """
        key = (token, tenant_id)
        cached = self._history.get(key)
        fresh = cached is not None and time.monotonic() - cached[0] < HISTORY_TTL_S
        now = datetime.now(UTC)
        starts = [now - BUCKET * k for k in range(BUCKETS, 0, -1)]  # oldest first
        windows = [] if fresh else [BUCKET * k for k in range(1, BUCKETS + 1)]
        samples = (
            []
            if fresh
            else [
                self.call(
                    token,
                    AdminClient.list_jobs,
                    JobFilter(
                        statuses=["COMPLETED"],
                        tenant_id=tenant_id,
                        created_after=start,
                        created_before=start + BUCKET,
                    ),
                    page_size=LATENCY_SAMPLE,
                )
                for start in starts
            ]
        )
        answers: list[Any] = await asyncio.gather(
            self.call(
                token,
                AdminClient.get_stats,
                tenant_id=tenant_id,
                window=BUCKET,
                windows=windows,
            ),
            self.call(token, AdminClient.list_pauses, tenant_id=tenant_id),
            *samples,
        )
        stats, pauses, pages = answers[0], answers[1], answers[2:]
        if fresh:
            assert cached is not None
            return stats, pauses, cached[1]
        buckets = _buckets(starts, list(stats.windows), [page.jobs for page in pages])
        self._history[key] = (time.monotonic(), buckets)
        return stats, pauses, buckets


def _buckets(
    starts: list[datetime], windows: list[WindowCounts], samples: list[list[JobView]]
) -> list[Bucket]:
    """Buckets from the windows' counts (GetStats windows of 5, 10, ... 60 minutes) and each bucket's sample."""
    totals = [(0, 0, 0)] + [(w.completions, w.failures, w.retries) for w in windows]
    buckets = []
    for i, start in enumerate(starts):
        # starts are oldest first: bucket i lies between windows k and k-1.
        k = BUCKETS - i
        newer, older = totals[k - 1], totals[k]
        latencies = sorted(v for v in map(_latency, samples[i]) if v is not None)
        buckets.append(
            Bucket(
                start=start,
                completed=max(0, older[0] - newer[0]),
                failed=max(0, older[1] - newer[1]),
                retried=max(0, older[2] - newer[2]),
                latency_p50=_percentile(latencies, 50) if latencies else None,
                latency_p95=_percentile(latencies, 95) if latencies else None,
                latency_samples=len(latencies),
            )
        )
    return buckets


def _latency(job: JobView) -> float | None:
    start = job.due_time or job.create_time
    if start is None or job.finish_time is None:
        return None
    return max(0.0, (job.finish_time - start).total_seconds())
