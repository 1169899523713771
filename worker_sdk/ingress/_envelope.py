"""The message format the ingress adapters accept, and idempotency keys from broker ids.

Design note. A broker message becomes one :class:`~worker_sdk.JobRequest`.
Two formats, chosen per adapter:

* **Envelope** (default): the body is a JSON object naming the job type and,
  optionally, everything else ``Enqueue`` accepts::

      {"job_type": "invoice.charge", "tenant_id": "acme",
       "payload": {"invoice": "inv-1"},
       "workflow": {"definition_id": "billing", "instance_id": "wf-9"},
       "priority": 5, "delay_seconds": 30, "idempotency_key": "inv-1/charge"}

  Unknown fields are rejected, so a typo (``"priorty"``) dead-letters the
  message instead of silently enqueueing a job without it. A ``uniqueness``
  object gives the job one uniqueness rule (docs/uniqueness.md), spelled as
  the envelope spells durations::

      {"key": "acct-42", "unique_while": ["PENDING", "RUNNING"]}
      {"key": "digest", "period_seconds": 600}
      {"key": "reindex-7", "debounce_seconds": 30, "max_wait_seconds": 300}

  The envelope refuses every rule the coordinator refuses (at its default
  string limit), saying why, so such a message is dead-lettered as malformed
  rather than sent.
* **Fixed job type** (``EnvelopeFormat(job_type=...)``): every message of the
  queue is a job of that type and the body, untouched, is its payload; the
  message's content type travels with it (JSON when absent and the body parses
  as JSON, else ``application/octet-stream``).

Idempotency. Unless the envelope carries its own ``idempotency_key``, the key
is derived from the broker's id of the message (RabbitMQ ``message_id``, NATS
``Nats-Msg-Id`` or stream sequence), prefixed with the source so two queues
never collide. The coordinator dedupes per tenant and key, so a redelivered
message returns the job its first delivery created. The coordinator checks
that key before a uniqueness rule (``store/uniqueness.py``), so the redelivery
of a message that stored a job gets that job back and is never debounced into
it again. A message its uniqueness key answered with another message's job
stored nothing under its own key: a redelivery of it meets the rule afresh.

Everything wrong with a message itself raises :class:`MalformedMessageError`
with a reason a person can act on; the adapters dead-letter it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any

from workflowjobs.contract import LONGEST_SPAN_DAYS, LONGEST_SPAN_S, MAX_STRING_LENGTH

from .._codec import BYTES_CONTENT_TYPE, JSON_CONTENT_TYPE
from .._convert import JobCategory, JobRequest, JobStatus, Uniqueness, WorkflowRef

__all__ = [
    "EnvelopeFormat",
    "InboundMessage",
    "MalformedMessageError",
    "derive_idempotency_key",
    "parse_message",
]

# Keys longer than this are replaced by a hash, well inside the coordinator's string limit.
_MAX_KEY_LENGTH = 200
# The coordinator's string limit (``max_string_length``) unless its settings lower it.
_MAX_STRING_LENGTH = MAX_STRING_LENGTH
# A uniqueness period, debounce delay or max wait: the coordinator keeps whole
# milliseconds (a shorter span would be 0 there, and refused) up to the contract's
# its longest duration (also the bound of the execution and heartbeat timeouts).
_MIN_SPAN_SECONDS = 0.001
_MAX_SPAN_SECONDS = LONGEST_SPAN_S

_WORKFLOW_FIELDS = {f.name: f.type for f in dataclasses.fields(WorkflowRef)}
_ENVELOPE_FIELDS = frozenset(
    {
        "job_type",
        "tenant_id",
        "payload",
        "workflow",
        "category",
        "priority",
        "due",
        "delay_seconds",
        "max_attempts",
        "execution_timeout_seconds",
        "heartbeat_timeout_seconds",
        "idempotency_key",
        "concurrency_key",
        "ordering_key",
        "parent_job_id",
        "group_id",
        "uniqueness",
        "traceparent",
    }
)
# The fields of ``uniqueness``: the key, then one rule (max_wait only with debounce).
_UNIQUENESS_RULES = ("unique_while", "period_seconds", "debounce_seconds")
_UNIQUENESS_FIELDS = ("key", *_UNIQUENESS_RULES, "max_wait_seconds")
_UNIQUE_WHILE_STATUSES = tuple(s for s in JobStatus if s is not JobStatus.UNSPECIFIED)


class MalformedMessageError(ValueError):
    """A broker message that can never become a job; it is dead-lettered.

    Args:
        reason: What is wrong, for the person reading the dead-letter queue.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclasses.dataclass(frozen=True, slots=True)
class EnvelopeFormat:
    """How an adapter reads message bodies.

    Attributes:
        job_type: When set, every message is a job of this type and its body is
            the payload as is; when None, bodies are JSON envelopes.
        tenant_id: Tenant of jobs whose envelope names none (and of every job in
            fixed-job-type mode).
        category: Category of jobs whose envelope names none.
    """

    job_type: str | None = None
    tenant_id: str = "default"
    category: JobCategory = JobCategory.INTEGRATION


@dataclasses.dataclass(frozen=True, slots=True)
class InboundMessage:
    """What the adapters take from a broker message, independent of the broker.

    Attributes:
        body: The message body.
        idempotency_key: Key derived from the broker's id of the message.
        content_type: The message's content type, if it has one.
        traceparent: W3C traceparent header of the message, if any.
        tracestate: W3C tracestate header of the message, if any.
    """

    body: bytes
    idempotency_key: str
    content_type: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None


def derive_idempotency_key(prefix: str, message_id: str | None, body: bytes) -> str:
    """The idempotency key of a message: ``prefix`` + ``id:<message id>``, or
    ``sha256:<hash of the body>`` when the message has no id.

    Ids that would make the key too long for the coordinator are hashed too.

    Args:
        prefix: Names the source, e.g. ``"rabbitmq:orders:"``.
        message_id: The broker's (or publisher's) id of the message.
        body: The message body, hashed when there is no id.
    """
    if message_id:
        key = f"{prefix}id:{message_id}"
        if len(key) <= _MAX_KEY_LENGTH:
            return key
        return f"{prefix}id-sha256:{hashlib.sha256(message_id.encode()).hexdigest()}"
    return f"{prefix}sha256:{hashlib.sha256(body).hexdigest()}"


def parse_message(message: InboundMessage, fmt: EnvelopeFormat) -> JobRequest:
    """Turn a broker message into the job to enqueue.

    Args:
        message: The message.
        fmt: How to read its body.

    Returns:
        The job, with the idempotency key set.

    Raises:
        MalformedMessageError: The body is not a valid envelope.
    """
    if fmt.job_type is not None:
        return JobRequest(
            job_type=fmt.job_type,
            payload=message.body,
            content_type=message.content_type or _sniff_content_type(message.body),
            tenant_id=fmt.tenant_id,
            category=fmt.category,
            idempotency_key=message.idempotency_key,
            traceparent=message.traceparent,
            tracestate=message.tracestate,
        )
    envelope = _decode_envelope(message.body)
    job_type = envelope.get("job_type")
    if not isinstance(job_type, str) or not job_type:
        raise MalformedMessageError("the envelope has no 'job_type' (a non-empty string)")
    due = _optional_datetime(envelope, "due")
    delay = _optional_number(envelope, "delay_seconds")
    if due is not None and delay is not None:
        raise MalformedMessageError("give either 'due' or 'delay_seconds', not both")
    ordering_key = _optional_str(envelope, "ordering_key")
    group_id = _optional_str(envelope, "group_id")
    uniqueness = _uniqueness(envelope.get("uniqueness"))
    if uniqueness is not None:
        _check_uniqueness_fits(
            uniqueness, due=due, delay=delay, ordering_key=ordering_key, group_id=group_id
        )
    traceparent = _optional_str(envelope, "traceparent") or message.traceparent
    return JobRequest(
        job_type=job_type,
        payload=envelope.get("payload"),
        tenant_id=_optional_str(envelope, "tenant_id") or fmt.tenant_id,
        workflow=_workflow(envelope.get("workflow")),
        category=_category(envelope.get("category"), fmt.category),
        priority=_optional_int(envelope, "priority") or 0,
        due=due,
        delay=delay,
        max_attempts=_optional_int(envelope, "max_attempts"),
        execution_timeout=_optional_number(
            envelope, "execution_timeout_seconds", _MAX_SPAN_SECONDS
        ),
        heartbeat_timeout=_optional_number(
            envelope, "heartbeat_timeout_seconds", _MAX_SPAN_SECONDS
        ),
        idempotency_key=_optional_str(envelope, "idempotency_key") or message.idempotency_key,
        concurrency_key=_optional_str(envelope, "concurrency_key"),
        ordering_key=ordering_key,
        parent_job_id=_optional_str(envelope, "parent_job_id"),
        group_id=group_id,
        uniqueness=uniqueness,
        traceparent=traceparent,
        tracestate=message.tracestate if traceparent == message.traceparent else None,
    )


def _sniff_content_type(body: bytes) -> str:
    try:
        json.loads(body)
    except ValueError:
        return BYTES_CONTENT_TYPE
    return JSON_CONTENT_TYPE


def _decode_envelope(body: bytes) -> dict[str, Any]:
    try:
        envelope = json.loads(body)
    except ValueError as e:
        raise MalformedMessageError(f"the body is not JSON: {e}") from None
    if not isinstance(envelope, dict):
        raise MalformedMessageError(
            f"the body is JSON {type(envelope).__name__}, not an object with a 'job_type'"
        )
    unknown = sorted(set(envelope) - _ENVELOPE_FIELDS)
    if unknown:
        raise MalformedMessageError(
            f"unknown envelope field(s) {', '.join(map(repr, unknown))}; "
            f"expected some of: {', '.join(sorted(_ENVELOPE_FIELDS))}"
        )
    return envelope


def _optional_str(envelope: dict[str, Any], name: str) -> str | None:
    value = envelope.get(name)
    if value is not None and not isinstance(value, str):
        raise MalformedMessageError(f"'{name}' must be a string, not {type(value).__name__}")
    return value


def _optional_int(envelope: dict[str, Any], name: str) -> int | None:
    value = envelope.get(name)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise MalformedMessageError(f"'{name}' must be an integer, not {value!r}")
    return value


def _optional_number(
    envelope: dict[str, Any], name: str, maximum: float | None = None
) -> float | None:
    """A finite, non-negative number of seconds, at most ``maximum``; None when absent."""
    value = envelope.get(name)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise MalformedMessageError(f"'{name}' must be a non-negative number, not {value!r}")
    seconds = _finite_number(value)
    if seconds is None or seconds < 0:
        raise MalformedMessageError(
            f"'{name}' must be a finite, non-negative number of seconds, not {value!r}"
        )
    if maximum is not None and seconds > maximum:
        raise MalformedMessageError(
            f"'{name}' must be at most {maximum:.0f} seconds ({maximum / 86_400:g} days), "
            f"not {value!r}"
        )
    return seconds


def _finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite JSON number (a bool is none), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond every float
        return None
    return number if math.isfinite(number) else None


def _optional_datetime(envelope: dict[str, Any], name: str) -> datetime | None:
    value = _optional_str(envelope, name)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise MalformedMessageError(
            f"'{name}' must be an ISO 8601 time such as 2030-01-31T09:00:00Z, not {value!r}"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _workflow(value: Any) -> WorkflowRef | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedMessageError("'workflow' must be an object of workflow refs")
    unknown = sorted(set(value) - set(_WORKFLOW_FIELDS))
    if unknown:
        raise MalformedMessageError(
            f"unknown 'workflow' field(s) {', '.join(map(repr, unknown))}; "
            f"expected some of: {', '.join(_WORKFLOW_FIELDS)}"
        )
    for name, field_value in value.items():
        expected = int if name == "definition_version" else str
        if not isinstance(field_value, expected) or isinstance(field_value, bool):
            raise MalformedMessageError(
                f"'workflow.{name}' must be a {expected.__name__}, not {field_value!r}"
            )
    return WorkflowRef(**value)


def _category(value: Any, default: JobCategory) -> JobCategory:
    if value is None:
        return default
    try:
        return JobCategory(str(value).upper().removeprefix("JOB_CATEGORY_"))
    except ValueError:
        choices = ", ".join(c.value for c in JobCategory if c is not JobCategory.UNSPECIFIED)
        raise MalformedMessageError(
            f"unknown 'category' {value!r}; expected one of: {choices}"
        ) from None


def _uniqueness(value: Any) -> Uniqueness | None:
    """The envelope's ``uniqueness`` object as a rule: its key and exactly one of
    ``unique_while``, ``period_seconds`` or ``debounce_seconds`` (null is absent)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedMessageError(
            "'uniqueness' must be an object such as "
            '{"key": "acct-42", "unique_while": ["PENDING", "RUNNING"]}, '
            f"not {type(value).__name__}"
        )
    unknown = sorted(set(value) - set(_UNIQUENESS_FIELDS))
    if unknown:
        raise MalformedMessageError(
            f"unknown 'uniqueness' field(s) {', '.join(map(repr, unknown))}; "
            f"expected some of: {', '.join(_UNIQUENESS_FIELDS)}"
        )
    key = _unique_key(value.get("key"))
    rules = [name for name in _UNIQUENESS_RULES if value.get(name) is not None]
    if len(rules) != 1:
        given = f"it gives {' and '.join(map(repr, rules))}" if rules else "it gives none"
        raise MalformedMessageError(
            "'uniqueness' takes exactly one rule: 'unique_while' (a list of job statuses), "
            f"'period_seconds' or 'debounce_seconds'; {given}"
        )
    [rule] = rules
    max_wait = value.get("max_wait_seconds")
    if max_wait is not None and rule != "debounce_seconds":
        raise MalformedMessageError(
            f"'uniqueness.max_wait_seconds' goes with 'debounce_seconds', not with {rule!r}"
        )
    if rule == "unique_while":
        return Uniqueness.unique_while(key, *_unique_while_statuses(value[rule]))
    if rule == "period_seconds":
        return Uniqueness.for_period(key, _span_seconds(value[rule], rule))
    delay = _span_seconds(value[rule], rule)
    if max_wait is None:
        return Uniqueness.debounce(key, delay)
    longest = _span_seconds(max_wait, "max_wait_seconds", "; leave it out for no maximum")
    if longest < delay:
        raise MalformedMessageError(
            f"'uniqueness.max_wait_seconds' ({max_wait!r}) must be at least "
            f"'debounce_seconds' ({value[rule]!r}); leave it out for no maximum"
        )
    return Uniqueness.debounce(key, delay, longest)


def _unique_key(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise MalformedMessageError(
            f"'uniqueness.key' must be a non-empty string such as 'acct-42', not {value!r}"
        )
    if len(value) > _MAX_STRING_LENGTH:
        raise MalformedMessageError(
            f"'uniqueness.key' is {len(value)} characters long; the limit is {_MAX_STRING_LENGTH}"
        )
    if "\x00" in value:
        raise MalformedMessageError("'uniqueness.key' must not contain a NUL character (U+0000)")
    return value


def _unique_while_statuses(value: Any) -> list[JobStatus]:
    """Job statuses by name, in any case, with or without ``JOB_STATUS_``."""
    choices = ", ".join(_UNIQUE_WHILE_STATUSES)
    if not isinstance(value, list) or not value:
        raise MalformedMessageError(
            "'uniqueness.unique_while' must be a non-empty list of job statuses such as "
            f'["PENDING", "RUNNING"] (some of: {choices}), not {value!r}'
        )
    statuses: dict[JobStatus, None] = {}
    for name in value:
        found = None
        if isinstance(name, str):
            found = JobStatus.__members__.get(name.upper().removeprefix("JOB_STATUS_"))
        if found is None or found is JobStatus.UNSPECIFIED:
            raise MalformedMessageError(
                f"'uniqueness.unique_while': {name!r} is not a job status; expected some of: {choices}"
            )
        statuses[found] = None
    return list(statuses)


def _span_seconds(value: Any, name: str, hint: str = "") -> float:
    """A period, debounce delay or max wait in seconds, within the coordinator's bounds."""
    seconds = _finite_number(value)
    if seconds is None or not _MIN_SPAN_SECONDS <= seconds <= _MAX_SPAN_SECONDS:
        shown = f"a boolean ({value})" if isinstance(value, bool) else repr(value)
        raise MalformedMessageError(
            f"'uniqueness.{name}' must be a number of seconds from {_MIN_SPAN_SECONDS} to "
            f"{_MAX_SPAN_SECONDS} ({LONGEST_SPAN_DAYS} days), not {shown}{hint}"
        )
    return seconds


def _check_uniqueness_fits(
    rule: Uniqueness,
    *,
    due: datetime | None,
    delay: float | None,
    ordering_key: str | None,
    group_id: str | None,
) -> None:
    """Refuse the envelope fields the coordinator refuses beside a uniqueness rule."""
    if ordering_key:
        raise MalformedMessageError(
            "a job cannot have both 'uniqueness' and 'ordering_key' (an ordering key queues "
            "every job; uniqueness keeps one): drop one of them"
        )
    if group_id:
        raise MalformedMessageError(
            "a group member cannot have 'uniqueness': drop 'uniqueness' or 'group_id'"
        )
    if rule.delay is not None and (due is not None or delay is not None):
        given = "'due'" if due is not None else "'delay_seconds'"
        raise MalformedMessageError(
            f"'uniqueness.debounce_seconds' sets the job's due time (the latest message's "
            f"enqueue + the delay): drop {given}"
        )
