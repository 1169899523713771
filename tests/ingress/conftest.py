"""Fixtures of the ingress tests (see ``harness.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ingress.harness import (
    Broker,
    Ingress,
    NatsBroker,
    RabbitBroker,
    free_port,
    nats_problem,
    rabbit_problem,
    require,
)


@pytest.fixture(params=["rabbitmq", "nats"])
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """A fresh queue (RabbitMQ) or stream and subject (NATS), deleted afterwards."""
    suffix = uuid.uuid4().hex[:10]
    made: Broker
    if request.param == "rabbitmq":
        require(rabbit_problem(), "RabbitMQ")
        made = RabbitBroker(suffix)
    else:
        require(nats_problem(), "NATS with JetStream")
        made = NatsBroker(suffix)
    try:
        yield made
    finally:
        made.cleanup()


@pytest.fixture
def ingress(broker: Broker, tmp_path: Path) -> Iterator[Ingress]:
    """A broker plus a coordinator address (start it with ``ingress.coordinator()``)."""
    made = Ingress(
        broker=broker,
        target=f"127.0.0.1:{free_port()}",
        tmp=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'ingress.db'}",
        started=[],
    )
    try:
        yield made
    finally:
        for proc in reversed(made.started):
            proc.stop()
