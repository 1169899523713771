"""RabbitMQ ingress: consume a queue, enqueue one job per message, ack once it is stored.

Design note. aio-pika does the AMQP work: ``connect_robust`` reconnects and
restores the channel, the QoS prefetch and the consumer after a broker restart
or a dropped connection; each delivery runs in its own task, so up to
``prefetch`` messages are in flight. Per message:

1. read it (``message_id`` → idempotency key; without one, a hash of the body);
2. ``Enqueue`` through :class:`~worker_sdk.AsyncSchedulerClient`;
3. settle it by the verdict (see ``_forward.py``):

   * enqueued → ``basic.ack``;
   * dead letter → publish a copy (body, properties, headers, plus
     ``x-wfjobs-dead-letter-reason`` and ``x-wfjobs-source-queue``) to the
     adapter's dead-letter exchange and wait for the broker's publisher
     confirm, then ``basic.reject`` without requeue. A crash between the two
     leaves the original unacked, so it is dead-lettered again: the dead-letter
     queue may hold a duplicate, never a loss;
   * retry → wait out the shared backoff, then ``basic.nack`` with requeue.

A connection lost before the ack leaves the message unacked; RabbitMQ
redelivers it and the coordinator returns the job the first delivery made.

The adapter declares its dead-letter exchange (direct, durable) and queue
(durable, bound with the source queue's name as routing key). It declares the
source queue too (durable, no arguments) unless ``declare_queue`` is off,
which is what a queue declared elsewhere with arguments (a quorum queue, a TTL)
needs: redeclaring with different arguments is an error in AMQP.

Shutdown order: cancel the consumer (no new deliveries) → abandon messages
waiting out a backoff (unacked, so the broker requeues them) → wait for
in-flight enqueues up to ``drain_timeout`` → close the connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from .._scheduler import AsyncSchedulerClient
from ._envelope import EnvelopeFormat, InboundMessage, derive_idempotency_key
from ._forward import BackoffConfig, BrokerIngress

if TYPE_CHECKING:
    from aio_pika.abc import (
        AbstractExchange,
        AbstractIncomingMessage,
        AbstractQueue,
        AbstractRobustConnection,
    )

__all__ = ["DEAD_LETTER_REASON_HEADER", "RabbitMQIngress", "RabbitMQIngressConfig"]

log = logging.getLogger("worker_sdk.ingress.rabbitmq")

#: Header carrying why a message was dead-lettered.
DEAD_LETTER_REASON_HEADER = "x-wfjobs-dead-letter-reason"
#: Header naming the queue a dead-lettered message came from.
SOURCE_QUEUE_HEADER = "x-wfjobs-source-queue"


@dataclasses.dataclass(frozen=True)
class RabbitMQIngressConfig:
    """Settings of a :class:`RabbitMQIngress`.

    Attributes:
        url: AMQP URL of the broker, e.g. ``amqp://guest:guest@127.0.0.1:5672/``.
        queue: Queue to consume.
        declare_queue: Declare ``queue`` (durable, no arguments) if it does not
            exist; turn off for queues declared elsewhere with arguments.
        dead_letter_exchange: Exchange malformed messages go to; default
            ``<queue>.dead-letter``.
        dead_letter_queue: Queue bound to it; default ``<queue>.dead-letter``.
        prefetch: Most messages in flight at once.
        key_prefix: Prefix of derived idempotency keys; default ``rabbitmq:<queue>:``.
        envelope: How message bodies are read.
        backoff: Delay before a message is handed back after a transient failure.
        drain_timeout: Seconds :meth:`RabbitMQIngress.stop` waits for in-flight enqueues.
    """

    url: str
    queue: str
    declare_queue: bool = True
    dead_letter_exchange: str = ""
    dead_letter_queue: str = ""
    prefetch: int = 32
    key_prefix: str = ""
    envelope: EnvelopeFormat = dataclasses.field(default_factory=EnvelopeFormat)
    backoff: BackoffConfig = dataclasses.field(default_factory=BackoffConfig)
    drain_timeout: float = 30.0

    def __post_init__(self) -> None:
        if not self.queue:
            raise ValueError("queue must not be empty")
        if self.prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        # Fill in the defaults that depend on the queue's name.
        for name, default in (
            ("dead_letter_exchange", f"{self.queue}.dead-letter"),
            ("dead_letter_queue", f"{self.queue}.dead-letter"),
            ("key_prefix", f"rabbitmq:{self.queue}:"),
        ):
            if not getattr(self, name):
                object.__setattr__(self, name, default)


class RabbitMQIngress(BrokerIngress["AbstractIncomingMessage"]):
    """Consumes a RabbitMQ queue and enqueues a job per message.

    Args:
        config: What to consume and how.
        scheduler: Client of the coordinator (created in the running loop; not
            closed by :meth:`stop`).

    Example::

        async with AsyncSchedulerClient("127.0.0.1:50051") as scheduler:
            ingress = RabbitMQIngress(
                RabbitMQIngressConfig(url="amqp://guest:guest@127.0.0.1:5672/", queue="jobs"),
                scheduler,
            )
            await ingress.run()  # until stop() or cancellation
    """

    def __init__(self, config: RabbitMQIngressConfig, scheduler: AsyncSchedulerClient) -> None:
        super().__init__(scheduler, config.envelope, config.backoff, log)
        self.config = config
        self._connection: AbstractRobustConnection | None = None
        self._queue: AbstractQueue | None = None
        self._dead_letters: AbstractExchange | None = None
        self._consumer_tag: str | None = None
        self._in_flight: set[asyncio.Task[Any]] = set()
        self._backing_off: set[asyncio.Task[Any]] = set()
        self._stopped = asyncio.Event()
        self._started = False

    async def start(self) -> None:
        """Connect, declare the queues and start consuming. Calling it twice is a no-op."""
        if self._started:
            return
        self._started = True
        import aio_pika  # the ``ingress`` extra; imported here so worker-only installs stay light

        c = self.config
        self._connection = await aio_pika.connect_robust(
            c.url, client_properties={"connection_name": f"wfjobs-ingress {c.queue}"}
        )
        channel = await self._connection.channel(publisher_confirms=True)
        await channel.set_qos(prefetch_count=c.prefetch)
        self._dead_letters = await channel.declare_exchange(
            c.dead_letter_exchange, aio_pika.ExchangeType.DIRECT, durable=True
        )
        dead_letter_queue = await channel.declare_queue(c.dead_letter_queue, durable=True)
        await dead_letter_queue.bind(self._dead_letters, routing_key=c.queue)
        if c.declare_queue:
            self._queue = await channel.declare_queue(c.queue, durable=True)
        else:
            self._queue = await channel.get_queue(c.queue, ensure=True)
        self._consumer_tag = await self._queue.consume(self._on_message)
        log.info(
            "ingress consuming RabbitMQ queue %s (dead letters to exchange %s, queue %s)",
            c.queue,
            c.dead_letter_exchange,
            c.dead_letter_queue,
        )

    async def run(self) -> None:
        """Start, then consume until :meth:`stop` has stopped the adapter."""
        await self.start()
        await self._stopped.wait()

    async def _stop(self) -> None:
        if self._queue is not None and self._consumer_tag is not None:
            try:
                await self._queue.cancel(self._consumer_tag)
            except Exception as e:  # the connection may already be gone; closing follows anyway
                log.warning("could not cancel the consumer: %s", e)
        for task in self._backing_off:
            task.cancel()
        if self._in_flight:
            _, pending = await asyncio.wait(self._in_flight, timeout=self.config.drain_timeout)
            for task in pending:
                task.cancel()
        if self._connection is not None:
            await self._connection.close()
        log.info("ingress stopped: %s", self.stats)
        self._stopped.set()

    # -- per message ---------------------------------------------------------------------

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._in_flight.add(task)
        try:
            await self._forward(message)
        except asyncio.CancelledError:
            # Stopping: the message stays unacked and the broker requeues it.
            raise
        except Exception as e:
            # The channel went away mid-settle: unacked, so the broker redelivers it.
            log.warning(
                "message %s left unacked (%s); it will be redelivered", message.message_id, e
            )
        finally:
            self._in_flight.discard(task)
            self._backing_off.discard(task)

    def _inbound(self, message: AbstractIncomingMessage) -> InboundMessage:
        headers = message.headers or {}
        return InboundMessage(
            body=message.body,
            idempotency_key=derive_idempotency_key(
                self.config.key_prefix, message.message_id, message.body
            ),
            content_type=message.content_type,
            traceparent=_header_text(headers.get("traceparent")),
            tracestate=_header_text(headers.get("tracestate")),
        )

    def _describe(self, message: AbstractIncomingMessage) -> str:
        return str(message.message_id)

    def _dead_letter_target(self) -> str:
        return self.config.dead_letter_queue

    async def _acknowledge(self, message: AbstractIncomingMessage) -> None:
        """Ack a message whose job is stored."""
        await message.ack()

    async def _dead_letter(self, message: AbstractIncomingMessage, reason: str) -> None:
        import aio_pika

        assert self._dead_letters is not None
        headers = dict(message.headers or {})
        headers[DEAD_LETTER_REASON_HEADER] = reason
        headers[SOURCE_QUEUE_HEADER] = self.config.queue
        copy = aio_pika.Message(
            body=message.body,
            headers=headers,
            content_type=message.content_type,
            content_encoding=message.content_encoding,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            correlation_id=message.correlation_id,
            message_id=message.message_id,
            timestamp=message.timestamp,
            type=message.type,
            app_id=message.app_id,
        )
        # Waits for the publisher confirm: the copy is stored before the original goes.
        await self._dead_letters.publish(copy, routing_key=self.config.queue)
        await message.reject(requeue=False)

    async def _retry_later(self, message: AbstractIncomingMessage, reason: str) -> None:
        delay = self._backoff.next_delay()
        log.warning(
            "message %s not enqueued (%s); will retry in %.2fs", message.message_id, reason, delay
        )
        task = asyncio.current_task()
        assert task is not None
        self._backing_off.add(task)
        await asyncio.sleep(delay)
        self._backing_off.discard(task)
        await message.nack(requeue=True)


def _header_text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if isinstance(value, str) else None
