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
from collections.abc import AsyncIterator, Callable
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
    JobView,
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
    stats: Any  # workflowjobs.v1.GetStatsResponse
    pauses: list[Any]  # workflowjobs.v1.PauseRecord
    history: list[Bucket]
    read_at: datetime


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
    ) -> None:
        self._channel = channel
        self._events_channel = events_channel
        self._timeout = timeout
        self._clients: dict[str, AdminClient] = {}
        self._history: dict[tuple[str, str], tuple[float, list[Bucket]]] = {}
        self._executor = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="wfj-dashboard")

    def close(self) -> None:
        """Let the calls in flight finish; start no more."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def client(self, token: str) -> AdminClient:
        """The admin client calling with ``token`` (empty: no token)."""
        client = self._clients.get(token)
        if client is None:
            # token="" (not None): never fall back to the WFJOBS_TOKEN variable.
            client = AdminClient(channel=self._channel, token=token, timeout=self._timeout)
            self._clients[token] = client
        return client

    def forget(self, token: str) -> None:
        """Drop the client of a token no session uses any more."""
        self._clients.pop(token, None)

    async def call(self, token: str, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``AdminClient.<method>`` for ``token`` in a worker thread."""
        client = self.client(token)
        bound: Callable[..., T] = getattr(client, method.__name__)
        return await self._run(bound, *args, **kwargs)

    @property
    def watches_events(self) -> bool:
        """Whether pages can follow the job event stream (else they only poll)."""
        return self._events_channel is not None

    async def watch(self, token: str, event_filter: JobEventFilter) -> AsyncIterator[JobEvent]:
        """Job events from now on (``WatchJobEvents``, reconnecting after restarts).

        Raises:
            WorkflowJobsError: The coordinator refuses the watch (a token without
                the scheduler role gets PERMISSION_DENIED).
        """
        if self._events_channel is None:
            raise RuntimeError("this dashboard has no event channel")
        client = AsyncSchedulerClient(channel=self._events_channel, token=token, timeout=None)
        async for event in client.watch_events(event_filter):
            yield event

    async def overview(self, token: str, tenant_id: str) -> Overview:
        """Backlog, pauses and the last hour's charts, for one tenant or all ("")."""
        stats, pauses, history = await asyncio.gather(
            self.call(token, AdminClient.get_stats, tenant_id=tenant_id),
            self.call(token, AdminClient.list_pauses, tenant_id=tenant_id),
            self.history(token, tenant_id),
        )
        return Overview(stats=stats, pauses=pauses, history=history, read_at=datetime.now(UTC))

    async def history(self, token: str, tenant_id: str) -> list[Bucket]:
        """Completions, failures, retries and latency per five minutes over the last hour.

        Counts come from ``GetStats`` windows of 5, 10, ... 60 minutes (the
        difference of two neighbours is one bucket); latency from the
        completed jobs ``ListJobs`` returns per bucket (up to
        :data:`LATENCY_SAMPLE`). Reused for :data:`HISTORY_TTL_S` seconds.
        """
        key = (token, tenant_id)
        cached = self._history.get(key)
        if cached is not None and time.monotonic() - cached[0] < HISTORY_TTL_S:
            return cached[1]
        buckets = await self._run(self._read_history, self.client(token), tenant_id)
        self._history[key] = (time.monotonic(), buckets)
        return buckets

    def _read_history(self, client: AdminClient, tenant_id: str) -> list[Bucket]:
        now = datetime.now(UTC)
        totals = [(0, 0, 0)]
        for k in range(1, BUCKETS + 1):
            s = client.get_stats(tenant_id=tenant_id, window=BUCKET * k)
            totals.append((s.completions_in_window, s.failures_in_window, s.retries_in_window))
        buckets = []
        for k in range(BUCKETS, 0, -1):  # oldest first
            start = now - BUCKET * k
            newer, older = totals[k - 1], totals[k]
            page = client.list_jobs(
                JobFilter(
                    statuses=["COMPLETED"],
                    tenant_id=tenant_id,
                    created_after=start,
                    created_before=start + BUCKET,
                ),
                page_size=LATENCY_SAMPLE,
            )
            latencies = sorted(v for v in map(_latency, page.jobs) if v is not None)
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
