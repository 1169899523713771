"""The ingress envelope and idempotency keys, without a broker."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from coordinator.api.convert import new_job_from_spec, uniqueness_from_spec
from coordinator.engine.uniqueness import check_uniqueness
from coordinator.errors import InvalidArgument
from wfj_testing import REPO
from worker_sdk import JobCategory, JobRequest, JobStatus, Uniqueness, WorkflowRef
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
        ({"job_type": "t", "delay_seconds": True}, "'delay_seconds' must be a non-negative number"),
        (b'{"job_type": "t", "delay_seconds": Infinity}', "'delay_seconds' must be a finite"),
        (b'{"job_type": "t", "delay_seconds": NaN}', "'delay_seconds' must be a finite"),
        (b'{"job_type": "t", "delay_seconds": 1e400}', "'delay_seconds' must be a finite"),
        (
            b'{"job_type": "t", "execution_timeout_seconds": -Infinity}',
            "'execution_timeout_seconds' must be a finite",
        ),
        (
            {"job_type": "t", "heartbeat_timeout_seconds": 10**400},
            "'heartbeat_timeout_seconds' must be a finite",
        ),
        (
            {"job_type": "t", "execution_timeout_seconds": 366 * 86_400 + 1},
            "'execution_timeout_seconds' must be at most 31622400 seconds (366 days)",
        ),
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


def test_the_longest_timeouts_are_accepted() -> None:
    longest = 366 * 86_400
    request = parse_message(
        message(
            {
                "job_type": "t",
                "execution_timeout_seconds": longest,
                "heartbeat_timeout_seconds": longest,
            }
        ),
        EnvelopeFormat(),
    )
    spec = request.to_proto()
    assert (spec.execution_timeout.seconds, spec.heartbeat_timeout.seconds) == (longest, longest)


def unique(rule: object, **fields: object) -> bytes:
    """An envelope of job type ``t`` with ``rule`` as its uniqueness."""
    return json.dumps({"job_type": "t", "uniqueness": rule, **fields}).encode()


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (
            {"key": "acct-42", "unique_while": ["PENDING", "RUNNING"]},
            Uniqueness.unique_while("acct-42", JobStatus.PENDING, JobStatus.RUNNING),
        ),
        # Names in any case, with or without the proto prefix; repeats count once.
        (
            {"key": "acct-42", "unique_while": ["pending", "JOB_STATUS_PENDING", "Completed"]},
            Uniqueness.unique_while("acct-42", JobStatus.PENDING, JobStatus.COMPLETED),
        ),
        (
            {"key": "k", "unique_while": ["FAULTED", "CANCELLED"]},
            Uniqueness.unique_while("k", JobStatus.FAULTED, JobStatus.CANCELLED),
        ),
        ({"key": "digest", "period_seconds": 600}, Uniqueness.for_period("digest", 600.0)),
        ({"key": "digest", "period_seconds": 0.5}, Uniqueness.for_period("digest", 0.5)),
        ({"key": "reindex-7", "debounce_seconds": 30}, Uniqueness.debounce("reindex-7", 30.0)),
        (
            {"key": "reindex-7", "debounce_seconds": 30, "max_wait_seconds": 300},
            Uniqueness.debounce("reindex-7", 30.0, 300.0),
        ),
        # Null is absent, as for every envelope field.
        (
            {"key": "k", "debounce_seconds": 5, "max_wait_seconds": None, "period_seconds": None},
            Uniqueness.debounce("k", 5.0),
        ),
    ],
)
def test_uniqueness_becomes_the_jobs_rule(rule: object, expected: Uniqueness) -> None:
    job = parse_message(message(unique(rule, delay_seconds=None)), EnvelopeFormat())
    assert job.uniqueness == expected
    assert job.to_proto().uniqueness == expected.to_proto()


def test_no_uniqueness_is_none() -> None:
    assert parse_message(message({"job_type": "t"}), EnvelopeFormat()).uniqueness is None
    assert parse_message(message(unique(None)), EnvelopeFormat()).uniqueness is None


def test_uniqueness_goes_with_the_other_fields() -> None:
    job = parse_message(
        message(
            unique(
                {"key": "acct-42", "period_seconds": 60},
                tenant_id="acme",
                delay_seconds=10,
                concurrency_key="acct-42",
                idempotency_key="evt-1",
            )
        ),
        EnvelopeFormat(),
    )
    assert (job.tenant_id, job.delay, job.idempotency_key) == ("acme", 10, "evt-1")
    assert job.uniqueness == Uniqueness.for_period("acct-42", 60.0)
    # A due time is fine beside unique-while; only debounce sets its own.
    due = parse_message(
        message(unique({"key": "k", "unique_while": ["PENDING"]}, due="2030-01-01T00:00:00Z")),
        EnvelopeFormat(),
    )
    assert due.due == datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        # The object and its fields.
        (unique([1]), "'uniqueness' must be an object"),
        (unique("acct-42"), "'uniqueness' must be an object"),
        (unique({"key": "k", "period": 60}), "unknown 'uniqueness' field(s) 'period'"),
        (unique({"key": "k", "while": ["PENDING"]}), "unknown 'uniqueness' field(s) 'while'"),
        # The key.
        (unique({"unique_while": ["PENDING"]}), "'uniqueness.key' must be a non-empty string"),
        (unique({"key": "", "period_seconds": 1}), "'uniqueness.key' must be a non-empty string"),
        (unique({"key": 42, "period_seconds": 1}), "'uniqueness.key' must be a non-empty string"),
        (unique({"key": "k" * 513, "period_seconds": 1}), "'uniqueness.key' is 513 characters"),
        (unique({"key": "a\x00b", "period_seconds": 1}), "'uniqueness.key' must not contain a NUL"),
        # Exactly one rule.
        (unique({"key": "k"}), "'uniqueness' takes exactly one rule"),
        (unique({"key": "k", "unique_while": None}), "'uniqueness' takes exactly one rule"),
        (
            unique({"key": "k", "unique_while": ["PENDING"], "period_seconds": 60}),
            "'uniqueness' takes exactly one rule: 'unique_while' (a list of job statuses), "
            "'period_seconds' or 'debounce_seconds'; it gives 'unique_while' and 'period_seconds'",
        ),
        (
            unique({"key": "k", "period_seconds": 60, "debounce_seconds": 5}),
            "it gives 'period_seconds' and 'debounce_seconds'",
        ),
        (
            unique({"key": "k", "period_seconds": 60, "max_wait_seconds": 5}),
            "'uniqueness.max_wait_seconds' goes with 'debounce_seconds', not with 'period_seconds'",
        ),
        (unique({"key": "k", "max_wait_seconds": 5}), "'uniqueness' takes exactly one rule"),
        # Statuses.
        (
            unique({"key": "k", "unique_while": []}),
            "'uniqueness.unique_while' must be a non-empty list",
        ),
        (
            unique({"key": "k", "unique_while": "PENDING"}),
            "'uniqueness.unique_while' must be a non-empty list",
        ),
        (
            unique({"key": "k", "unique_while": {"PENDING": 1}}),
            "'uniqueness.unique_while' must be a non-empty list",
        ),
        (
            unique({"key": "k", "unique_while": ["QUEUED"]}),
            "'uniqueness.unique_while': 'QUEUED' is not a job status",
        ),
        (
            unique({"key": "k", "unique_while": ["UNSPECIFIED"]}),
            "'UNSPECIFIED' is not a job status",
        ),
        (
            unique({"key": "k", "unique_while": [1]}),
            "'uniqueness.unique_while': 1 is not a job status",
        ),
        (
            unique({"key": "k", "unique_while": [None]}),
            "'uniqueness.unique_while': None is not a job status",
        ),
        # Numbers: negative, zero, under a millisecond, over 366 days, huge, not finite, not numbers.
        (
            unique({"key": "k", "period_seconds": -1}),
            "'uniqueness.period_seconds' must be a number of seconds from 0.001 to 31622400 (366 days), not -1",
        ),
        (
            unique({"key": "k", "period_seconds": 0}),
            "'uniqueness.period_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "period_seconds": 0.0009}),
            "'uniqueness.period_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "period_seconds": 366 * 86400 + 1}),
            "'uniqueness.period_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "period_seconds": 10**400}),
            "'uniqueness.period_seconds' must be a number of seconds",
        ),
        (
            b'{"job_type": "t", "uniqueness": {"key": "k", "period_seconds": NaN}}',
            "'uniqueness.period_seconds' must be a number of seconds from 0.001 to 31622400 (366 days), not nan",
        ),
        (b'{"job_type": "t", "uniqueness": {"key": "k", "period_seconds": Infinity}}', "not inf"),
        (
            b'{"job_type": "t", "uniqueness": {"key": "k", "debounce_seconds": 1e400}}',
            "'uniqueness.debounce_seconds' must be a number of seconds",
        ),
        (
            b'{"job_type": "t", "uniqueness": {"key": "k", "debounce_seconds": -Infinity}}',
            "'uniqueness.debounce_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "period_seconds": True}),
            "'uniqueness.period_seconds' must be a number of seconds from 0.001 to 31622400 (366 days), not a boolean (True)",
        ),
        (
            unique({"key": "k", "debounce_seconds": False}),
            "'uniqueness.debounce_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "period_seconds": "60"}),
            "'uniqueness.period_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "debounce_seconds": [5]}),
            "'uniqueness.debounce_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "debounce_seconds": 0}),
            "'uniqueness.debounce_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "debounce_seconds": -5}),
            "'uniqueness.debounce_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "debounce_seconds": 5, "max_wait_seconds": 0}),
            "'uniqueness.max_wait_seconds' must be a number of seconds from 0.001 to 31622400 (366 days), not 0; leave it out for no maximum",
        ),
        (
            unique({"key": "k", "debounce_seconds": 5, "max_wait_seconds": -1}),
            "'uniqueness.max_wait_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "debounce_seconds": 5, "max_wait_seconds": True}),
            "'uniqueness.max_wait_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "debounce_seconds": 5, "max_wait_seconds": 366 * 86400 + 1}),
            "'uniqueness.max_wait_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "debounce_seconds": 5, "max_wait_seconds": "1m"}),
            "'uniqueness.max_wait_seconds' must be a number of seconds",
        ),
        (
            unique({"key": "k", "debounce_seconds": 5, "max_wait_seconds": 4.5}),
            "'uniqueness.max_wait_seconds' (4.5) must be at least 'debounce_seconds' (5); leave it out for no maximum",
        ),
        # Fields the coordinator refuses beside a rule.
        (
            unique({"key": "k", "debounce_seconds": 5}, delay_seconds=10),
            "'uniqueness.debounce_seconds' sets the job's due time (the latest message's enqueue + the delay): drop 'delay_seconds'",
        ),
        (unique({"key": "k", "debounce_seconds": 5}, delay_seconds=0), "drop 'delay_seconds'"),
        (
            unique({"key": "k", "debounce_seconds": 5}, due="2030-01-01T00:00:00Z"),
            "'uniqueness.debounce_seconds' sets the job's due time (the latest message's enqueue + the delay): drop 'due'",
        ),
        (
            unique({"key": "k", "unique_while": ["PENDING"]}, ordering_key="o"),
            "both 'uniqueness' and 'ordering_key'",
        ),
        (
            unique({"key": "k", "period_seconds": 1}, group_id="g-1"),
            "a group member cannot have 'uniqueness'",
        ),
    ],
)
def test_malformed_uniqueness_says_what_to_fix(body: bytes, reason: str) -> None:
    with pytest.raises(MalformedMessageError) as raised:
        parse_message(message(body), EnvelopeFormat())
    assert reason in raised.value.reason
    assert "uniqueness" in raised.value.reason


# At each bound: the value the envelope takes and the coordinator accepts, and the
# value just past it, which the envelope refuses and the coordinator would refuse.
_BOUNDS = [
    (
        {"key": "k" * 512, "unique_while": ["PENDING"]},
        {"key": "k" * 513, "unique_while": ["PENDING"]},
    ),
    ({"key": "k", "unique_while": ["CANCELLED"]}, {"key": "k", "unique_while": ["UNSPECIFIED"]}),
    ({"key": "k", "period_seconds": 0.001}, {"key": "k", "period_seconds": 0.0009}),
    (
        {"key": "k", "period_seconds": 366 * 86400},
        {"key": "k", "period_seconds": 366 * 86400 + 0.001},
    ),
    ({"key": "k", "debounce_seconds": 0.001}, {"key": "k", "debounce_seconds": 0.0009}),
    (
        {"key": "k", "debounce_seconds": 366 * 86400},
        {"key": "k", "debounce_seconds": 366 * 86400 + 0.001},
    ),
    (
        {"key": "k", "debounce_seconds": 5, "max_wait_seconds": 5},
        {"key": "k", "debounce_seconds": 5, "max_wait_seconds": 4.999},
    ),
    (
        {"key": "k", "debounce_seconds": 5, "max_wait_seconds": 366 * 86400},
        {"key": "k", "debounce_seconds": 5, "max_wait_seconds": 366 * 86400 + 0.001},
    ),
]


def _coordinator_check(rule: Uniqueness) -> None:
    """What the coordinator's Enqueue does with the rule (api/convert.py, engine/uniqueness.py)."""
    spec = JobRequest(job_type="t", uniqueness=rule).to_proto()
    converted = uniqueness_from_spec(spec)
    assert converted is not None
    check_uniqueness(converted, new_job_from_spec(spec), 512)


@pytest.mark.parametrize(("inside", "outside"), _BOUNDS)
def test_the_envelope_bounds_are_the_coordinators(inside: object, outside: dict[str, Any]) -> None:
    accepted = parse_message(message(unique(inside)), EnvelopeFormat())
    assert accepted.uniqueness is not None
    _coordinator_check(accepted.uniqueness)
    with pytest.raises(MalformedMessageError):
        parse_message(message(unique(outside)), EnvelopeFormat())
    statuses = [JobStatus[s] for s in outside.get("unique_while", ())]
    past = Uniqueness(
        outside["key"],
        statuses=tuple(statuses),
        period=outside.get("period_seconds"),
        delay=outside.get("debounce_seconds"),
        max_wait=outside.get("max_wait_seconds"),
    )
    with pytest.raises(InvalidArgument):
        _coordinator_check(past)


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
