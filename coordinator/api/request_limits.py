"""Limits the API layer enforces: request rate per credential, open streams.

Design note. Sizes (payload, batch, string lengths) are the engine's to check
(``EngineConfig``); credit per stream is checked by the WorkerService
servicer. This interceptor holds what depends on who calls and how many calls
are open:

* a token bucket per credential (requests per second with a burst): every
  unary call and every stream opened takes one token; when none is left the
  call fails with RESOURCE_EXHAUSTED and says when to retry. Buckets exist only
  for authenticated credentials: with authentication off there is no
  credential to charge.
* open ``AcquireJobs`` streams per connection (the peer address) and in total:
  one more than allowed fails with RESOURCE_EXHAUSTED at once, after taking
  the client's opening message (as authentication refusals do), so a worker
  that writes its hello as it opens the call sees that status.
* open ``WatchJobEvents`` streams per connection, per credential and in
  total, and ``WaitForJob`` calls in progress per connection and in total:
  each holds a watcher or a waiter on this coordinator for as long as it
  lasts; one more than allowed fails with RESOURCE_EXHAUSTED before it starts.
* open ``StreamIsActive`` streams (KEDA's scaler, api/keda.py) per connection
  and in total, bounded the same way.
* calls without a credential to the scaler service (open to token-less callers
  by design, docs/autoscaling.md) take a token from a bucket per peer address
  (its host, whatever port), at the credential rate: a flood from one host is
  refused with RESOURCE_EXHAUSTED, whichever connections it opens.

Install it inside the authentication interceptor (later in the list) so the
caller is known, and inside the error-mapping interceptor so its errors get
their status codes. Every default is documented in docs/limits.md.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from coordinator.api.auth import current_principal, take_first_message
from coordinator.api.handlers import (
    CallContext,
    Continuation,
    Handler,
    ServerInterceptor,
    rewrap,
)
from coordinator.errors import ResourceExhausted

ACQUIRE_JOBS = "/workflowjobs.v1.WorkerService/AcquireJobs"
WATCH_JOB_EVENTS = "/workflowjobs.v1.JobSchedulerService/WatchJobEvents"
WAIT_FOR_JOB = "/workflowjobs.v1.JobSchedulerService/WaitForJob"
SCALER_PREFIX = "/externalscaler.ExternalScaler/"
SCALER_STREAM = SCALER_PREFIX + "StreamIsActive"


def peer_host(peer: str) -> str:
    """The host of a gRPC peer ("ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7",
    "ipv6:[::1]:51234" -> "ipv6:[::1]"); other forms as they are."""
    kind, _, address = peer.partition(":")
    if kind in ("ipv4", "ipv6") and ":" in address:
        return f"{kind}:{address.rsplit(':', 1)[0]}"
    return peer


@dataclass
class ApiLimits:
    """Per-connection and per-credential limits of the gRPC API."""

    # Most credit a worker may have outstanding on one AcquireJobs stream.
    max_credits_per_stream: int = 10_000
    # Most AcquireJobs streams open at once on one connection (one peer address).
    max_streams_per_connection: int = 1_000
    # Most AcquireJobs streams open at once on this coordinator.
    max_streams_total: int = 10_000
    # Most WatchJobEvents streams open at once: on one connection, for one
    # credential (authentication on), on this coordinator.
    max_watches_per_connection: int = 100
    max_watches_per_credential: int = 1_000
    max_watches_total: int = 10_000
    # Most WaitForJob calls waiting at once: on one connection, on this coordinator.
    max_waits_per_connection: int = 1_000
    max_waits_total: int = 10_000
    # Most StreamIsActive streams (KEDA's scaler) open at once: on one
    # connection, on this coordinator.
    max_scaler_streams_per_connection: int = 100
    max_scaler_streams_total: int = 1_000
    # Sustained requests per second per credential (0 = unlimited).
    rate_per_credential: float = 1_000.0
    # Requests a credential may make in a burst above the sustained rate.
    rate_burst: int = 2_000


@dataclass
class TokenBucket:
    """Classic token bucket; ``now`` is monotonic seconds, passed in."""

    rate: float
    burst: float
    tokens: float
    updated: float

    def take(self, now: float) -> float:
        """Take one token; returns 0 on success, else seconds until one is available."""
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class RateLimiter:
    """One bucket per credential name."""

    # Buckets kept before the full ones (those idle long enough) are dropped.
    MAX_BUCKETS = 10_000

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    def check(self, credential: str, who: str = "") -> None:
        """Take a token of ``credential``'s bucket (``who`` names it in the refusal)."""
        if self.rate <= 0:
            return
        now = self._clock()
        bucket = self._buckets.get(credential)
        if bucket is None:
            if len(self._buckets) >= self.MAX_BUCKETS:
                self._drop_full(now)
            bucket = self._buckets[credential] = TokenBucket(self.rate, self.burst, self.burst, now)
        wait = bucket.take(now)
        if wait:
            raise ResourceExhausted(
                f"{who or f'credential {credential!r}'} exceeded its rate limit of "
                f"{self.rate:g} requests/s (burst {self.burst}); "
                f"retry in {max(wait, 0.001) * 1000:.0f} ms"
            )

    def _drop_full(self, now: float) -> None:
        """Forget the buckets that have refilled (a new one starts full anyway)."""
        for name, b in list(self._buckets.items()):
            if b.tokens + (now - b.updated) * self.rate >= self.burst:
                del self._buckets[name]


class StreamCounter:
    """Open calls of one kind (AcquireJobs streams by default) per peer, per
    credential (0: no such limit) and in total."""

    def __init__(
        self,
        per_connection: int,
        total: int,
        *,
        per_credential: int = 0,
        what: str = "AcquireJobs streams",
        hint: str = "one stream per worker is enough",
    ) -> None:
        self.per_connection = per_connection
        self.per_credential = per_credential
        self.total = total
        self.what = what
        self.hint = hint
        self.open_total = 0
        self._by_peer: collections.Counter[str] = collections.Counter()
        self._by_credential: collections.Counter[str] = collections.Counter()

    def open(self, peer: str, credential: str | None = None) -> None:
        if self.open_total >= self.total:
            raise ResourceExhausted(
                f"this coordinator already serves {self.open_total} {self.what}, "
                f"its limit; connect to another replica or retry later"
            )
        if self._by_peer[peer] >= self.per_connection:
            raise ResourceExhausted(
                f"this connection already has {self._by_peer[peer]} {self.what} open, "
                f"the limit per connection; {self.hint}"
            )
        if credential is not None and self.per_credential:
            if self._by_credential[credential] >= self.per_credential:
                raise ResourceExhausted(
                    f"credential {credential!r} already has {self._by_credential[credential]} "
                    f"{self.what} open, the limit per credential; {self.hint}"
                )
            self._by_credential[credential] += 1
        self._by_peer[peer] += 1
        self.open_total += 1

    def close(self, peer: str, credential: str | None = None) -> None:
        self._by_peer[peer] -= 1
        if self._by_peer[peer] <= 0:
            del self._by_peer[peer]
        if credential is not None and self.per_credential:
            self._by_credential[credential] -= 1
            if self._by_credential[credential] <= 0:
                del self._by_credential[credential]
        self.open_total -= 1


class LimitsInterceptor(ServerInterceptor):
    """Rate per credential and open-stream limits (see the module note)."""

    def __init__(self, limits: ApiLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.rate = RateLimiter(limits.rate_per_credential, limits.rate_burst, clock)
        self.streams = StreamCounter(limits.max_streams_per_connection, limits.max_streams_total)
        self.watches = StreamCounter(
            limits.max_watches_per_connection,
            limits.max_watches_total,
            per_credential=limits.max_watches_per_credential,
            what="WatchJobEvents streams",
            hint="one watch with a filter covers many jobs; close watches no longer read",
        )
        self.waits = StreamCounter(
            limits.max_waits_per_connection,
            limits.max_waits_total,
            what="WaitForJob calls waiting",
            hint="watch job events (WatchJobEvents) to follow many jobs",
        )
        self.scaler_streams = StreamCounter(
            limits.max_scaler_streams_per_connection,
            limits.max_scaler_streams_total,
            what="StreamIsActive streams",
            hint="one stream per ScaledObject is enough",
        )

    def _charge(self, method: str = "", context: CallContext | None = None) -> str | None:
        """Charge the caller's bucket; the caller's credential name (None: none).

        A scaler call without a credential is charged to its peer's host."""
        principal = current_principal()
        if principal is None:
            if method.startswith(SCALER_PREFIX) and context is not None:
                host = peer_host(context.peer() or "unknown")
                self.rate.check(f"peer:{host}", f"peer {host} (no token)")
            return None
        self.rate.check(principal.name)
        return principal.name

    def wrap_unary(self, inner: Callable[..., Any], method: str) -> Callable[..., Any]:
        """``inner``, a unary behaviour of ``method``, behind the caller's limits."""

        async def unary_unary(request: Any, context: CallContext) -> Any:
            self._charge(method, context)
            if method != WAIT_FOR_JOB:
                return await inner(request, context)
            peer = context.peer() or "unknown"
            self.waits.open(peer)
            try:
                return await inner(request, context)
            finally:
                self.waits.close(peer)

        return unary_unary

    def _acquire_stream(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        async def stream_stream(request_iter: Any, context: CallContext) -> Any:
            peer = context.peer() or "unknown"
            try:
                self._charge()
                self.streams.open(peer)
            except ResourceExhausted:
                # Like an authentication refusal: take the worker's hello first,
                # so it sees this status rather than a failed write of its own.
                await take_first_message(request_iter)
                raise
            try:
                async for item in inner(request_iter, context):
                    yield item
            finally:
                self.streams.close(peer)

        return stream_stream

    def _watch_stream(
        self, inner: Callable[..., Any], method: str, counter: StreamCounter
    ) -> Callable[..., Any]:
        async def unary_stream(request: Any, context: CallContext) -> Any:
            peer = context.peer() or "unknown"
            credential = self._charge(method, context)
            counter.open(peer, credential)
            try:
                async for item in inner(request, context):
                    yield item
            finally:
                counter.close(peer, credential)

        return unary_stream

    async def intercept_service(
        self,
        continuation: Continuation,
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        return rewrap(
            handler,
            unary_unary=lambda inner: self.wrap_unary(inner, method),
            stream_stream=lambda inner: (
                self._acquire_stream(inner) if method == ACQUIRE_JOBS else None
            ),
            unary_stream=lambda inner: (
                self._watch_stream(inner, method, self.watches)
                if method == WATCH_JOB_EVENTS
                else self._watch_stream(inner, method, self.scaler_streams)
                if method == SCALER_STREAM
                else None
            ),
        )


__all__ = [
    "ApiLimits",
    "LimitsInterceptor",
    "RateLimiter",
    "StreamCounter",
    "TokenBucket",
    "peer_host",
]
