"""The ingress adapter, except that it kill -9s itself once a job is enqueued, before the ack.

Same arguments as ``python -m worker_sdk.ingress``. The broker sees the
consumer vanish holding an unacked message, as after a crash.
"""

import os
import signal
import sys

from worker_sdk.ingress import __main__ as ingress_main
from worker_sdk.ingress.nats import NatsIngress
from worker_sdk.ingress.rabbitmq import RabbitMQIngress


async def _die(self: object, message: object) -> None:
    print("enqueued; dying before the ack", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


RabbitMQIngress._acknowledge = _die  # type: ignore[method-assign]
NatsIngress._acknowledge = _die  # type: ignore[method-assign]

sys.exit(ingress_main.main())
