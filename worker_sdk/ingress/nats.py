"""NATS JetStream ingress: pull a durable consumer, enqueue one job per message, ack once stored.

Design note. Core NATS has no acknowledgement, so the adapter reads a
JetStream stream through a durable pull consumer (explicit acks,
``ack_wait``, unlimited redeliveries). nats-py reconnects by itself; the
durable consumer keeps its place on the server, so a restarted adapter
continues where the last one acked. The loop fetches up to ``batch`` messages
and forwards them concurrently. Per message:

1. read it (``Nats-Msg-Id`` header → idempotency key; without one, the
   message's stream sequence, which a redelivery keeps);
2. ``Enqueue`` through :class:`~worker_sdk.AsyncSchedulerClient`;
3. settle it by the verdict (see ``_forward.py``):

   * enqueued → ack, waiting for the server to confirm it;
   * dead letter → publish a copy to the dead-letter subject with the
     ``Wfjobs-Dead-Letter-Reason`` header (and the original's headers), wait
     for JetStream's publish ack, then ``term`` the original (no redelivery).
     A crash in between redelivers the original, so the dead-letter stream may
     hold a duplicate, never a loss;
   * retry → ``nak`` with the shared backoff as delay: the server redelivers later.

An adapter that dies before acking leaves the message to be redelivered after
``ack_wait``; the coordinator returns the job the first delivery made.

The adapter creates, when missing: the stream (``stream`` capturing
``subject``), the dead-letter stream capturing the dead-letter subject
(unless some stream already does), and the durable consumer.

Shutdown order: stop fetching (a fetch under way is abandoned: its messages
were not processed and are redelivered after ``ack_wait``) → wait for the
batch in flight up to ``drain_timeout`` → drain and close the connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from typing import TYPE_CHECKING, Any

from .._scheduler import AsyncSchedulerClient
from ._envelope import EnvelopeFormat, InboundMessage, derive_idempotency_key
from ._forward import BackoffConfig, BrokerIngress

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.js.client import JetStreamContext

__all__ = ["DEAD_LETTER_REASON_HEADER", "NatsIngress", "NatsIngressConfig"]

log = logging.getLogger("worker_sdk.ingress.nats")

#: Header carrying why a message was dead-lettered.
DEAD_LETTER_REASON_HEADER = "Wfjobs-Dead-Letter-Reason"
#: Header naming the subject a dead-lettered message was published to.
SOURCE_SUBJECT_HEADER = "Wfjobs-Source-Subject"
#: Header naming the stream and sequence of the dead-lettered message.
SOURCE_SEQUENCE_HEADER = "Wfjobs-Source-Sequence"

_NOT_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclasses.dataclass(frozen=True)
class NatsIngressConfig:
    """Settings of a :class:`NatsIngress`.

    Attributes:
        servers: NATS server URL(s), e.g. ``nats://127.0.0.1:4222``.
        subject: Subject (wildcards allowed) to consume.
        stream: JetStream stream holding the subject; default: the stream that
            captures ``subject``, or a new one named after it.
        create_stream: Create ``stream`` capturing ``subject`` when missing.
        durable: Durable consumer name; default ``wfjobs-ingress-<stream>``.
        dead_letter_subject: Subject malformed messages are published to;
            default ``wfjobs.dead-letter.<stream>``.
        dead_letter_stream: Stream created to keep them when no stream captures
            that subject yet; default ``<stream>_DEAD_LETTER``.
        batch: Most messages fetched and in flight at once.
        ack_wait: Seconds the server waits for an ack before redelivering
            (applies when the consumer is created).
        fetch_timeout: Seconds one fetch waits for messages (a long poll).
        key_prefix: Prefix of derived idempotency keys; default ``nats:<stream>:``.
        envelope: How message bodies are read.
        backoff: Delay before a message is redelivered after a transient failure.
        drain_timeout: Seconds :meth:`NatsIngress.stop` waits for in-flight enqueues.
    """

    servers: str | list[str]
    subject: str
    stream: str = ""
    create_stream: bool = True
    durable: str = ""
    dead_letter_subject: str = ""
    dead_letter_stream: str = ""
    batch: int = 32
    ack_wait: float = 30.0
    fetch_timeout: float = 5.0
    key_prefix: str = ""
    envelope: EnvelopeFormat = dataclasses.field(default_factory=EnvelopeFormat)
    backoff: BackoffConfig = dataclasses.field(default_factory=BackoffConfig)
    drain_timeout: float = 30.0

    def __post_init__(self) -> None:
        if not self.subject:
            raise ValueError("subject must not be empty")
        if self.batch < 1:
            raise ValueError("batch must be at least 1")


class NatsIngress(BrokerIngress["Msg"]):
    """Consumes a NATS JetStream subject and enqueues a job per message.

    Args:
        config: What to consume and how.
        scheduler: Client of the coordinator (created in the running loop; not
            closed by :meth:`stop`).

    Example::

        async with AsyncSchedulerClient("127.0.0.1:50051") as scheduler:
            ingress = NatsIngress(
                NatsIngressConfig(servers="nats://127.0.0.1:4222", subject="jobs.>"),
                scheduler,
            )
            await ingress.run()  # until stop() or cancellation
    """

    def __init__(self, config: NatsIngressConfig, scheduler: AsyncSchedulerClient) -> None:
        super().__init__(scheduler, config.envelope, config.backoff, log)
        self.config = config
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._subscription: Any = None
        self._stream = config.stream
        self._dead_letter_subject = config.dead_letter_subject
        self._key_prefix = config.key_prefix
        self._stopping = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._batch_task: asyncio.Future[Any] | None = None
        self._started = False

    async def start(self) -> None:
        """Connect, create what is missing and start fetching. Calling it twice is a no-op."""
        if self._started:
            return
        self._started = True
        import nats  # the ``ingress`` extra; imported here so worker-only installs stay light
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        c = self.config
        self._nc = await nats.connect(
            c.servers,
            name="wfjobs-ingress",
            max_reconnect_attempts=-1,
            error_cb=_log_error,
            disconnected_cb=self._on_disconnected,
            reconnected_cb=_log_reconnected,
        )
        self._js = self._nc.jetstream()
        await self._ensure_streams()
        durable = c.durable or f"wfjobs-ingress-{self._stream}"
        consumer = ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=c.ack_wait,
            max_deliver=-1,
            max_ack_pending=max(1000, c.batch * 4),
        )
        self._subscription = await self._js.pull_subscribe(
            c.subject, durable=durable, stream=self._stream, config=consumer
        )
        self._loop_task = asyncio.create_task(self._fetch_loop(), name="wfjobs-ingress-nats")
        log.info(
            "ingress consuming NATS subject %s (stream %s, consumer %s; dead letters to %s)",
            c.subject,
            self._stream,
            durable,
            self._dead_letter_subject,
        )

    async def run(self) -> None:
        """Start, then consume until :meth:`stop` has stopped the adapter.

        Re-raises what ended the fetch loop if it failed on its own.
        """
        await self.start()
        assert self._loop_task is not None
        await asyncio.wait({self._loop_task})
        if self._shutdown is not None:
            await asyncio.shield(self._shutdown)
        elif not self._loop_task.cancelled():
            self._loop_task.result()

    async def _stop(self) -> None:
        self._stopping.set()
        if self._loop_task is not None:
            if self._batch_task is not None and not self._batch_task.done():
                await asyncio.wait({self._batch_task}, timeout=self.config.drain_timeout)
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
        if self._nc is not None and not self._nc.is_closed:
            await self._nc.close()
        log.info("ingress stopped: %s", self.stats)

    async def _on_disconnected(self) -> None:
        if not self._stopping.is_set():
            log.warning("disconnected from NATS; reconnecting")

    # -- setup ---------------------------------------------------------------------------

    async def _ensure_streams(self) -> None:
        from nats.js.errors import NotFoundError

        assert self._js is not None
        c = self.config
        if not self._stream:
            try:
                self._stream = await self._js.find_stream_name_by_subject(c.subject)
            except NotFoundError:
                if not c.create_stream:
                    raise
                self._stream = _NOT_NAME_CHARS.sub("_", c.subject.replace(".", "_")) or "INGRESS"
        try:
            await self._js.stream_info(self._stream)
        except NotFoundError:
            if not c.create_stream:
                raise
            await self._js.add_stream(name=self._stream, subjects=[c.subject])
            log.info("created stream %s capturing %s", self._stream, c.subject)
        self._dead_letter_subject = c.dead_letter_subject or f"wfjobs.dead-letter.{self._stream}"
        self._key_prefix = c.key_prefix or f"nats:{self._stream}:"
        try:
            await self._js.find_stream_name_by_subject(self._dead_letter_subject)
        except NotFoundError:
            name = c.dead_letter_stream or f"{self._stream}_DEAD_LETTER"
            await self._js.add_stream(name=name, subjects=[self._dead_letter_subject])
            log.info("created stream %s capturing %s", name, self._dead_letter_subject)

    # -- the loop ------------------------------------------------------------------------

    async def _fetch_loop(self) -> None:
        import nats.errors

        c = self.config
        while not self._stopping.is_set():
            try:
                messages = await self._subscription.fetch(c.batch, timeout=c.fetch_timeout)
            except TimeoutError:
                continue  # nothing arrived during the long poll
            except nats.errors.Error as e:
                # Disconnected or reconnecting: nats-py reconnects by itself; wait and fetch again.
                delay = self._backoff.next_delay()
                log.warning("fetch failed (%s); fetching again in %.2fs", e, delay)
                await asyncio.sleep(delay)
                continue
            self._batch_task = asyncio.gather(*(self._handle(m) for m in messages))
            await asyncio.shield(self._batch_task)

    async def _handle(self, msg: Msg) -> None:
        try:
            await self._forward(msg)
        except Exception as e:
            # The connection went away mid-settle: the server redelivers after ack_wait.
            log.warning(
                "message %s left unacked (%s); it will be redelivered", self._describe(msg), e
            )

    def _inbound(self, msg: Msg) -> InboundMessage:
        headers = msg.headers or {}
        message_id = headers.get("Nats-Msg-Id")
        if not message_id:
            # A redelivery keeps its stream sequence, so it names the message as well as an id.
            message_id = f"seq-{msg.metadata.sequence.stream}"
        return InboundMessage(
            body=msg.data,
            idempotency_key=derive_idempotency_key(self._key_prefix, message_id, msg.data),
            content_type=headers.get("Content-Type"),
            traceparent=headers.get("traceparent"),
            tracestate=headers.get("tracestate"),
        )

    def _describe(self, msg: Msg) -> str:
        try:
            return f"{msg.subject}#{msg.metadata.sequence.stream}"
        except Exception:
            return msg.subject

    def _dead_letter_target(self) -> str:
        return self._dead_letter_subject

    async def _acknowledge(self, msg: Msg) -> None:
        """Ack a message whose job is stored, waiting for the server to take the ack."""
        await msg.ack_sync()

    async def _dead_letter(self, msg: Msg, reason: str) -> None:
        assert self._js is not None
        headers = dict(msg.headers or {})
        # JetStream dedupes by Nats-Msg-Id: dead-lettering the same message twice stores one copy.
        headers.setdefault("Nats-Msg-Id", f"{self._stream}:{msg.metadata.sequence.stream}")
        headers[DEAD_LETTER_REASON_HEADER] = reason
        headers[SOURCE_SUBJECT_HEADER] = msg.subject
        headers[SOURCE_SEQUENCE_HEADER] = f"{self._stream}:{msg.metadata.sequence.stream}"
        # Waits for JetStream's publish ack: the copy is stored before the original goes.
        await self._js.publish(self._dead_letter_subject, msg.data, headers=headers)
        await msg.term()

    async def _retry_later(self, msg: Msg, reason: str) -> None:
        delay = self._backoff.next_delay()
        log.warning(
            "message %s not enqueued (%s); redelivery in %.2fs", self._describe(msg), reason, delay
        )
        await msg.nak(delay=delay)


async def _log_error(e: Exception) -> None:
    log.warning("NATS connection error: %s", e)


async def _log_reconnected() -> None:
    log.info("reconnected to NATS")
