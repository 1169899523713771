"""The ingress envelope and idempotency keys, without a broker."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from wfj_testing import REPO
from worker_sdk import JobCategory, WorkflowRef
from worker_sdk.ingress import (
    EnvelopeFormat,
    InboundMessage,
    MalformedMessageError,
    derive_idempotency_key,
    parse_message,
)


def message(body: object, **fields: object) -> InboundMessage:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return InboundMessage(body=data, idempotency_key=str(fields.pop("key", "k")), **fields)  # type: ignore[arg-type]


def test_envelope_fields_become_the_job() -> None:
    job = parse_message(
        message(
            {
                "job_type": "invoice.charge",
                "tenant_id": "acme",
                "payload": {"id": 1},
                "workflow": {"definition_id": "billing", "definition_version": 2},
                "category": "maintenance",
                "priority": 3,
                "due": "2030-01-31T09:00:00",
                "max_attempts": 5,
                "execution_timeout_seconds": 60,
                "concurrency_key": "acct-1",
                "ordering_key": "acct-1/ledger",
                "parent_job_id": "01a235a5-9d98-7012-9fc1-4f6184ecedff",
                "group_id": "g-7",
            }
        ),
        EnvelopeFormat(),
    )
    assert job.job_type == "invoice.charge"
    assert job.tenant_id == "acme"
    assert job.payload == {"id": 1}
    assert job.workflow == WorkflowRef(definition_id="billing", definition_version=2)
    assert job.category is JobCategory.MAINTENANCE
    assert job.priority == 3
    assert job.due == datetime(2030, 1, 31, 9, tzinfo=UTC)
    assert job.max_attempts == 5
    assert job.execution_timeout == 60
    assert job.concurrency_key == "acct-1"
    assert (job.ordering_key, job.parent_job_id, job.group_id) == (
        "acct-1/ledger",
        "01a235a5-9d98-7012-9fc1-4f6184ecedff",
        "g-7",
    )
    assert job.idempotency_key == "k"


def test_defaults_come_from_the_format_and_the_message() -> None:
    job = parse_message(
        message({"job_type": "t"}, key="rabbitmq:q:id:1", traceparent="00-ab-cd-01"),
        EnvelopeFormat(tenant_id="t1"),
    )
    assert job.tenant_id == "t1"
    assert job.category is JobCategory.INTEGRATION
    assert job.idempotency_key == "rabbitmq:q:id:1"
    assert job.traceparent == "00-ab-cd-01"
    keyed = parse_message(message({"job_type": "t", "idempotency_key": "mine"}), EnvelopeFormat())
    assert keyed.idempotency_key == "mine"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{", "not JSON"),
        ([1], "not an object"),
        ({"payload": 1}, "no 'job_type'"),
        ({"job_type": ""}, "no 'job_type'"),
        ({"job_type": "t", "priorty": 1}, "unknown envelope field(s) 'priorty'"),
        ({"job_type": "t", "priority": "high"}, "'priority' must be an integer"),
        ({"job_type": "t", "delay_seconds": -1}, "non-negative number"),
        ({"job_type": "t", "due": "tomorrow"}, "ISO 8601"),
        ({"job_type": "t", "due": "2030-01-01T00:00:00Z", "delay_seconds": 1}, "not both"),
        ({"job_type": "t", "workflow": {"instance": "x"}}, "unknown 'workflow' field(s)"),
        ({"job_type": "t", "workflow": {"definition_version": "2"}}, "must be a int"),
        ({"job_type": "t", "category": "urgent"}, "unknown 'category'"),
    ],
)
def test_malformed_envelopes_say_why(body: object, reason: str) -> None:
    with pytest.raises(MalformedMessageError) as raised:
        parse_message(message(body), EnvelopeFormat())
    assert reason in raised.value.reason


def test_fixed_job_type_keeps_the_body() -> None:
    fmt = EnvelopeFormat(job_type="hook", tenant_id="h")
    assert parse_message(message(b"not json"), fmt).content_type == "application/octet-stream"
    assert parse_message(message(b'{"a": 1}'), fmt).content_type == "application/json"
    job = parse_message(message(b"<x/>", content_type="text/xml"), fmt)
    assert (job.job_type, job.payload, job.content_type, job.tenant_id) == (
        "hook",
        b"<x/>",
        "text/xml",
        "h",
    )


def test_idempotency_keys() -> None:
    assert derive_idempotency_key("rabbitmq:q:", "m-1", b"x") == "rabbitmq:q:id:m-1"
    by_body = derive_idempotency_key("rabbitmq:q:", None, b"x")
    assert by_body == derive_idempotency_key("rabbitmq:q:", "", b"x")
    assert by_body.startswith("rabbitmq:q:sha256:")
    assert by_body != derive_idempotency_key("rabbitmq:q:", None, b"y")
    long_key = derive_idempotency_key("nats:S:", "m" * 1000, b"")
    assert long_key.startswith("nats:S:id-sha256:") and len(long_key) < 200


def test_importing_the_package_loads_no_broker_client() -> None:
    code = "import sys, worker_sdk.ingress; print('aio_pika' in sys.modules, 'nats' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "False"]
