"""Service-bus ingress: feed RabbitMQ queues and NATS JetStream subjects into workflow jobs.

An adapter consumes a queue or subject, enqueues one job per message through
``JobSchedulerService`` and acknowledges the message only once ``Enqueue``
returned; malformed messages are dead-lettered on the broker with a reason.
The broker clients are the ``ingress`` extra (``pip install
'workflow-jobs[ingress]'``), imported only when an adapter starts.

Run one from the command line::

    python -m worker_sdk.ingress rabbitmq --url amqp://guest:guest@127.0.0.1:5672/ \\
        --queue jobs --target 127.0.0.1:50051
    python -m worker_sdk.ingress nats --servers nats://127.0.0.1:4222 \\
        --subject 'jobs.>' --target 127.0.0.1:50051

See docs/ingress.md for the message envelope and the delivery guarantees.
"""

from ._envelope import (
    EnvelopeFormat,
    InboundMessage,
    MalformedMessageError,
    derive_idempotency_key,
    parse_message,
)
from ._forward import BackoffConfig, IngressStats, Verdict, VerdictKind
from .nats import NatsIngress, NatsIngressConfig
from .rabbitmq import RabbitMQIngress, RabbitMQIngressConfig

__all__ = [
    "BackoffConfig",
    "EnvelopeFormat",
    "InboundMessage",
    "IngressStats",
    "MalformedMessageError",
    "NatsIngress",
    "NatsIngressConfig",
    "RabbitMQIngress",
    "RabbitMQIngressConfig",
    "Verdict",
    "VerdictKind",
    "derive_idempotency_key",
    "parse_message",
]
