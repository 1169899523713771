"""The broker-independent step of ingress: one message in, one ``Enqueue`` out, one verdict.

Design note. Each adapter turns the verdict into its broker's words:

=================  =============================  ==================================
verdict            when                           RabbitMQ / NATS JetStream
=================  =============================  ==================================
``ENQUEUED``       Enqueue returned (new job or   ack / ack
                   an existing one: redelivery,
                   or a uniqueness hit)
``DEAD_LETTER``    the body is not a valid        copy to the dead-letter exchange
                   envelope, or the coordinator   with the reason, then reject
                   answered INVALID_ARGUMENT or   without requeue / publish to the
                   PERMISSION_DENIED              dead-letter subject, then term
``RETRY``          any other failure: the         back off, then nack with requeue
                   coordinator is unreachable,    / nak with a delay
                   overloaded, unauthenticated…
=================  =============================  ==================================

Acknowledging only after ``Enqueue`` returned makes delivery at-least-once
into the coordinator; the idempotency key makes the job exactly-once. A
message whose envelope has a uniqueness rule may be answered with the key's
job, another message's (unchanged, or debounced: it took this message's
payload and a later due time): that is the rule doing its work, so the
message is acked like any other. The job's idempotency key tells the two
answers apart: a redelivery's job carries the message's own key.
PERMISSION_DENIED is taken as the message naming a tenant outside the
adapter's token scope (a fault of that message); a token without the
scheduler role shows up the same way, so the adapters log it loudly.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import enum
import logging
from typing import Generic, TypeVar

import grpc

from .._backoff import Backoff, BackoffConfig
from .._errors import WorkflowJobsError
from .._scheduler import AsyncSchedulerClient
from ._envelope import EnvelopeFormat, InboundMessage, MalformedMessageError, parse_message

__all__ = [
    "Backoff",
    "BackoffConfig",
    "BrokerIngress",
    "Forwarder",
    "IngressStats",
    "Verdict",
    "VerdictKind",
]

log = logging.getLogger("worker_sdk.ingress")

# Coordinator answers that mean the message itself is at fault: retrying cannot help.
_PERMANENT_CODES = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED})


class VerdictKind(enum.Enum):
    """What the adapter does with the message."""

    ENQUEUED = "enqueued"
    DEAD_LETTER = "dead-letter"
    RETRY = "retry"


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of forwarding one message.

    Attributes:
        kind: Acknowledge, dead-letter or retry.
        reason: Why it is dead-lettered or retried (empty when enqueued).
        job_id: The job's id when enqueued.
        deduplicated: True when the job already existed under the message's
            idempotency key (a redelivery).
        unique_hit: True when the job is the one the envelope's uniqueness key
            names (another message's), so no job of this message was stored.
        debounced: True when, beside ``unique_hit``, that pending job took this
            message's payload and a later due time.
    """

    kind: VerdictKind
    reason: str = ""
    job_id: str = ""
    deduplicated: bool = False
    unique_hit: bool = False
    debounced: bool = False


@dataclasses.dataclass
class IngressStats:
    """Counters of one adapter, for logs and tests.

    ``deduplicated`` counts redeliveries (the message's idempotency key named a
    job); ``unique_hits`` counts messages answered by their uniqueness key with
    another message's job (debounced ones included).
    """

    enqueued: int = 0
    deduplicated: int = 0
    unique_hits: int = 0
    dead_lettered: int = 0
    retried: int = 0


class Forwarder:
    """Parses a message, enqueues its job and says what to do with the message.

    Args:
        scheduler: Client of the coordinator's ``JobSchedulerService``.
        envelope: How message bodies are read.
    """

    def __init__(self, scheduler: AsyncSchedulerClient, envelope: EnvelopeFormat) -> None:
        self._scheduler = scheduler
        self._envelope = envelope
        self.stats = IngressStats()

    async def forward(self, message: InboundMessage) -> Verdict:
        """Enqueue the job ``message`` describes.

        Returns:
            The verdict; never raises for a failed enqueue.
        """
        try:
            request = parse_message(message, self._envelope)
            spec = request.to_proto()
        except (MalformedMessageError, ValueError, TypeError) as e:
            self.stats.dead_lettered += 1
            return Verdict(VerdictKind.DEAD_LETTER, reason=f"malformed message: {e}")
        try:
            job = await self._scheduler.enqueue(
                spec.job_type,
                spec.payload,
                tenant_id=spec.tenant_id,
                workflow=spec.workflow,
                category=spec.category,
                priority=spec.priority,
                due=request.due,
                delay=request.delay,
                retry_policy=spec.retry_policy if spec.HasField("retry_policy") else None,
                execution_timeout=request.execution_timeout,
                heartbeat_timeout=request.heartbeat_timeout,
                idempotency_key=spec.idempotency_key,
                concurrency_key=spec.concurrency_key or None,
                ordering_key=spec.ordering_key or None,
                parent_job_id=spec.parent_job_id or None,
                group_id=spec.group_id or None,
                uniqueness=request.uniqueness,
                traceparent=spec.traceparent or None,
                tracestate=spec.tracestate or None,
            )
        except WorkflowJobsError as e:
            if e.code in _PERMANENT_CODES:
                self.stats.dead_lettered += 1
                if e.code == grpc.StatusCode.PERMISSION_DENIED:
                    log.error("coordinator denied an enqueue (check the adapter's token): %s", e)
                return Verdict(VerdictKind.DEAD_LETTER, reason=f"rejected by the coordinator: {e}")
            self.stats.retried += 1
            return Verdict(VerdictKind.RETRY, reason=str(e))
        except (TimeoutError, OSError) as e:
            self.stats.retried += 1
            return Verdict(VerdictKind.RETRY, reason=f"{type(e).__name__}: {e}")
        # The coordinator checks the idempotency key before a uniqueness rule, so
        # an existing job under another key is the uniqueness key's.
        unique_hit = job.deduplicated and job.idempotency_key != spec.idempotency_key
        if unique_hit:
            self.stats.unique_hits += 1
        elif job.deduplicated:
            self.stats.deduplicated += 1
        else:
            self.stats.enqueued += 1
        return Verdict(
            VerdictKind.ENQUEUED,
            job_id=job.id,
            deduplicated=job.deduplicated and not unique_hit,
            unique_hit=unique_hit,
            debounced=job.debounced,
        )


def _answer_note(verdict: Verdict) -> str:
    """How the job answered the message, for the adapter's log line."""
    if verdict.debounced:
        return " (debounced: its uniqueness key's pending job took this payload)"
    if verdict.unique_hit:
        return " (its uniqueness key's job)"
    if verdict.deduplicated:
        return " (already enqueued)"
    return ""


# A broker's message, as its client library delivers it.
M = TypeVar("M")


class BrokerIngress(abc.ABC, Generic[M]):
    """What every adapter shares: forwarding a message, settling it by its
    verdict (the table above), the backoff, the counters and an idempotent stop.

    An adapter says, in its broker's words, how a message reads
    (``_inbound``, ``_describe``), how it is acked, dead-lettered and retried,
    and how it stops (``_stop``, in the order its module's design note gives).
    """

    def __init__(
        self,
        scheduler: AsyncSchedulerClient,
        envelope: EnvelopeFormat,
        backoff: BackoffConfig,
        logger: logging.Logger,
    ) -> None:
        self._forwarder = Forwarder(scheduler, envelope)
        self._backoff = Backoff(backoff)
        self._log = logger
        self._shutdown: asyncio.Task[None] | None = None

    @property
    def stats(self) -> IngressStats:
        """Counts of enqueued, deduplicated, dead-lettered and retried messages."""
        return self._forwarder.stats

    async def stop(self) -> None:
        """Stop taking messages, finish those in flight and close (see the
        shutdown order in the adapter's module).

        Safe to call twice or before ``start``; every call returns once the
        adapter has stopped.
        """
        if self._shutdown is None:
            self._shutdown = asyncio.create_task(self._stop())
        await asyncio.shield(self._shutdown)

    async def _forward(self, message: M) -> None:
        """Enqueue the job ``message`` describes, then settle the message."""
        verdict = await self._forwarder.forward(self._inbound(message))
        await self._settle(message, verdict)

    async def _settle(self, message: M, verdict: Verdict) -> None:
        if verdict.kind is VerdictKind.ENQUEUED:
            self._backoff.reset()
            self._log.debug(
                "message %s → job %s%s",
                self._describe(message),
                verdict.job_id,
                _answer_note(verdict),
            )
            await self._acknowledge(message)
        elif verdict.kind is VerdictKind.DEAD_LETTER:
            try:
                await self._dead_letter(message, verdict.reason)
            except Exception as e:
                await self._retry_later(message, f"dead-lettering failed: {e}")
                return
            self._log.warning(
                "message %s dead-lettered to %s: %s",
                self._describe(message),
                self._dead_letter_target(),
                verdict.reason,
            )
        else:
            await self._retry_later(message, verdict.reason)

    @abc.abstractmethod
    async def _stop(self) -> None:
        """Stop, in the adapter's shutdown order."""

    @abc.abstractmethod
    def _inbound(self, message: M) -> InboundMessage:
        """The message as the forwarder reads it."""

    @abc.abstractmethod
    def _describe(self, message: M) -> str:
        """The message for a log line."""

    @abc.abstractmethod
    def _dead_letter_target(self) -> str:
        """Where dead letters go, for a log line."""

    @abc.abstractmethod
    async def _acknowledge(self, message: M) -> None:
        """Ack a message whose job is stored."""

    @abc.abstractmethod
    async def _dead_letter(self, message: M, reason: str) -> None:
        """Store a copy with ``reason`` where dead letters go, then drop the original."""

    @abc.abstractmethod
    async def _retry_later(self, message: M, reason: str) -> None:
        """Leave the message to be delivered again after the backoff."""
