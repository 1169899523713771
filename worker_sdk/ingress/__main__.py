"""``python -m worker_sdk.ingress {rabbitmq,nats} ...``: run one ingress adapter until SIGTERM.

The coordinator's bearer token comes from ``WFJOBS_TOKEN``; ``--tls-ca``
turns TLS on. SIGTERM or SIGINT stops the adapter in order (see each
adapter's shutdown note); the exit code is 0 after a clean stop.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import grpc

from workflowjobs.times import TimeFormatter

from .._convert import JobCategory
from .._scheduler import AsyncSchedulerClient
from ._envelope import EnvelopeFormat
from ._forward import BackoffConfig
from .nats import NatsIngress, NatsIngressConfig
from .rabbitmq import RabbitMQIngress, RabbitMQIngressConfig

log = logging.getLogger("worker_sdk.ingress")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m worker_sdk.ingress``."""
    parser = argparse.ArgumentParser(
        prog="python -m worker_sdk.ingress",
        description="Consume a RabbitMQ queue or a NATS JetStream subject and enqueue a "
        "workflow job per message (docs/ingress.md).",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--target",
        default=os.environ.get("WFJOBS_TARGET", "127.0.0.1:50051"),
        help="coordinator HOST:PORT (default: $WFJOBS_TARGET or 127.0.0.1:50051)",
    )
    common.add_argument(
        "--tls-ca", type=Path, help="CA bundle: connect to the coordinator over TLS"
    )
    common.add_argument("--tenant", default="default", help="tenant of envelopes that name none")
    common.add_argument(
        "--job-type",
        help="every message is a job of this type with the body as payload (no envelope)",
    )
    common.add_argument(
        "--category",
        default=JobCategory.INTEGRATION.value,
        choices=[c.value for c in JobCategory if c is not JobCategory.UNSPECIFIED],
        help="category of jobs whose envelope names none (default INTEGRATION)",
    )
    common.add_argument("--key-prefix", default="", help="prefix of derived idempotency keys")
    common.add_argument(
        "--backoff-initial", type=float, default=0.5, help="first retry delay, seconds"
    )
    common.add_argument("--backoff-max", type=float, default=30.0, help="retry delay cap, seconds")
    common.add_argument("--rpc-timeout", type=float, default=10.0, help="Enqueue deadline, seconds")
    common.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="broker", required=True)

    p = sub.add_parser("rabbitmq", parents=[common], help="consume a RabbitMQ queue")
    p.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/", help="AMQP URL")
    p.add_argument("--queue", required=True)
    p.add_argument(
        "--no-declare-queue",
        dest="declare_queue",
        action="store_false",
        help="the queue exists already (declared elsewhere, possibly with arguments)",
    )
    p.add_argument("--dead-letter-exchange", default="", help="default QUEUE.dead-letter")
    p.add_argument("--dead-letter-queue", default="", help="default QUEUE.dead-letter")
    p.add_argument("--prefetch", type=int, default=32, help="messages in flight at once")

    p = sub.add_parser("nats", parents=[common], help="consume a NATS JetStream subject")
    p.add_argument("--servers", default="nats://127.0.0.1:4222", help="comma-separated URLs")
    p.add_argument("--subject", required=True)
    p.add_argument("--stream", default="", help="default: the stream capturing SUBJECT")
    p.add_argument(
        "--no-create-stream",
        dest="create_stream",
        action="store_false",
        help="fail instead of creating a missing stream",
    )
    p.add_argument("--durable", default="", help="durable consumer; default wfjobs-ingress-STREAM")
    p.add_argument("--dead-letter-subject", default="", help="default wfjobs.dead-letter.STREAM")
    p.add_argument("--dead-letter-stream", default="", help="default STREAM_DEAD_LETTER")
    p.add_argument("--batch", type=int, default=32, help="messages fetched and in flight at once")
    p.add_argument("--ack-wait", type=float, default=30.0, help="seconds before redelivery")
    return parser


async def _run(args: argparse.Namespace) -> None:
    credentials = None
    if args.tls_ca is not None:
        credentials = grpc.ssl_channel_credentials(root_certificates=args.tls_ca.read_bytes())
    envelope = EnvelopeFormat(
        job_type=args.job_type, tenant_id=args.tenant, category=JobCategory(args.category)
    )
    backoff = BackoffConfig(initial=args.backoff_initial, maximum=args.backoff_max)
    async with AsyncSchedulerClient(
        args.target, credentials=credentials, timeout=args.rpc_timeout
    ) as scheduler:
        ingress: RabbitMQIngress | NatsIngress
        if args.broker == "rabbitmq":
            ingress = RabbitMQIngress(
                RabbitMQIngressConfig(
                    url=args.url,
                    queue=args.queue,
                    declare_queue=args.declare_queue,
                    dead_letter_exchange=args.dead_letter_exchange,
                    dead_letter_queue=args.dead_letter_queue,
                    prefetch=args.prefetch,
                    key_prefix=args.key_prefix,
                    envelope=envelope,
                    backoff=backoff,
                ),
                scheduler,
            )
        else:
            ingress = NatsIngress(
                NatsIngressConfig(
                    servers=args.servers.split(","),
                    subject=args.subject,
                    stream=args.stream,
                    create_stream=args.create_stream,
                    durable=args.durable,
                    dead_letter_subject=args.dead_letter_subject,
                    dead_letter_stream=args.dead_letter_stream,
                    batch=args.batch,
                    ack_wait=args.ack_wait,
                    key_prefix=args.key_prefix,
                    envelope=envelope,
                    backoff=backoff,
                ),
                scheduler,
            )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(ingress.stop()))
        try:
            await ingress.run()
        finally:
            await ingress.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the adapter the arguments describe; returns the exit code."""
    args = build_parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TimeFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])
    try:
        asyncio.run(_run(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
