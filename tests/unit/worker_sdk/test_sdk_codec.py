"""Payload codec: encoding by value type, decoding by type hint, validation failures."""

from __future__ import annotations

import dataclasses
import enum
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf import timestamp_pb2

from wfj_testing import require_module
from worker_sdk import (
    BYTES_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    NonRetryableError,
    PayloadDecodeError,
    PayloadEncodeError,
    decode_payload,
    encode_payload,
)
from workflowjobs.v1 import job_pb2


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Address:
    city: str
    zip_code: str | None = None


@dataclasses.dataclass
class Customer:
    name: str
    age: int
    addresses: list[Address]
    tags: dict[str, float] = dataclasses.field(default_factory=dict)
    favourite: Color = Color.RED
    joined: datetime | None = None


def round_trip(value: Any, type_hint: Any = Any) -> Any:
    payload = encode_payload(value)
    return decode_payload(payload.data, payload.content_type, type_hint)


def test_json_is_the_default() -> None:
    payload = encode_payload({"a": [1, 2.5, None, "x"]})

    assert payload.content_type == JSON_CONTENT_TYPE
    assert round_trip({"a": [1, 2.5, None, "x"]}) == {"a": [1, 2.5, None, "x"]}
    assert round_trip({"a": 1}, dict) == {"a": 1}
    assert round_trip([1, 2], list[int]) == [1, 2]


def test_none_is_an_empty_payload() -> None:
    payload = encode_payload(None)

    assert payload.data == b""
    assert round_trip(None) is None


def test_bytes_pass_through() -> None:
    payload = encode_payload(b"\x00\xffraw")

    assert payload.content_type == BYTES_CONTENT_TYPE
    assert payload.data == b"\x00\xffraw"
    assert round_trip(b"\x00\xffraw", bytes) == b"\x00\xffraw"
    assert round_trip(b"\x00\xffraw") == b"\x00\xffraw"


def test_protobuf_round_trip_with_type_and_without() -> None:
    ref = job_pb2.WorkflowRef(definition_id="d1", instance_id="i1")
    payload = encode_payload(ref)

    assert payload.content_type == (
        "application/x-protobuf; messageType=workflowjobs.v1.WorkflowRef"
    )
    assert round_trip(ref, job_pb2.WorkflowRef) == ref
    assert round_trip(ref) == ref


def test_protobuf_of_another_type_is_rejected() -> None:
    payload = encode_payload(job_pb2.WorkflowRef(definition_id="d1"))

    with pytest.raises(PayloadDecodeError, match="handler expects google.protobuf.Timestamp"):
        decode_payload(payload.data, payload.content_type, timestamp_pb2.Timestamp)


def test_nested_dataclass_round_trip() -> None:
    customer = Customer(
        name="Ada",
        age=36,
        addresses=[Address("London"), Address("Paris", "75001")],
        tags={"vip": 1.0},
        favourite=Color.BLUE,
        joined=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
    )

    assert encode_payload(customer).content_type == JSON_CONTENT_TYPE
    assert round_trip(customer, Customer) == customer


def test_dataclass_fields_with_defaults_may_be_missing_and_extras_are_ignored() -> None:
    decoded = decode_payload(
        b'{"name":"Bo","age":3,"addresses":[],"unknown":1}', JSON_CONTENT_TYPE, Customer
    )

    assert decoded == Customer(name="Bo", age=3, addresses=[])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"name":"Bo","addresses":[]}', "missing required field(s) age"),
        (b'{"name":"Bo","age":"3","addresses":[]}', "payload.age: expected int, got str"),
        (b'{"name":"Bo","age":3,"addresses":[{"zip_code":"1"}]}', "payload.addresses[0]: missing"),
        (b'{"name":"Bo","age":3,"addresses":[],"favourite":"green"}', "not a valid Color"),
        (b"[1,2]", "payload: expected Customer, got list"),
        (b"{not json", "not valid JSON"),
    ],
)
def test_payload_that_does_not_validate_is_non_retryable(data: bytes, message: str) -> None:
    with pytest.raises(PayloadDecodeError) as info:
        decode_payload(data, JSON_CONTENT_TYPE, Customer)

    assert isinstance(info.value, NonRetryableError)
    assert message in str(info.value)


def test_raw_bytes_for_a_typed_handler_are_rejected() -> None:
    with pytest.raises(PayloadDecodeError, match="raw bytes"):
        decode_payload(b"abc", BYTES_CONTENT_TYPE, Customer)


def test_unencodable_value_raises_encode_error() -> None:
    with pytest.raises(PayloadEncodeError, match="object"):
        encode_payload({"x": object()})


def test_empty_content_type_is_json() -> None:
    assert decode_payload(b'{"a":1}', "", dict) == {"a": 1}


def test_pydantic_model_round_trip_and_validation() -> None:
    # Optional for users; the dev extra installs it (CI=true fails without it).
    pydantic = require_module("pydantic", "pydantic is not installed")

    class Order(pydantic.BaseModel):
        id: str
        quantity: pydantic.PositiveInt
        address: Address | None = None

    order = Order(id="o1", quantity=2, address=Address("Oslo"))
    payload = encode_payload(order)

    assert payload.content_type == JSON_CONTENT_TYPE
    assert decode_payload(payload.data, payload.content_type, Order) == order
    with pytest.raises(PayloadDecodeError, match="quantity"):
        decode_payload(b'{"id":"o1","quantity":0}', JSON_CONTENT_TYPE, Order)
