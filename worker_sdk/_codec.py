"""Payload codec shared by the enqueue side and the handler side.

Encoding picks the content type from the value:

* ``bytes`` pass through as ``application/octet-stream``;
* protobuf messages become ``application/x-protobuf; messageType=<full name>``;
* everything else (dicts, lists, scalars, dataclasses, pydantic models) becomes
  ``application/json``;
* ``None`` becomes an empty payload.

Decoding is driven by a type hint, usually the annotation of a handler's payload
parameter: dataclasses are rebuilt field by field (recursively), pydantic models
go through ``model_validate``, protobuf classes through ``FromString``, ``bytes``
get the raw data, and ``Any``/``dict``/no annotation get the decoded JSON.
Anything that does not fit raises :class:`PayloadDecodeError`, which fails the
attempt without retrying: the same payload would fail the same way again.

pydantic is optional and never imported here: a model class can only exist if
the user's code imported pydantic, so detection looks at ``sys.modules``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import json
import sys
import types
import typing
import uuid
from collections.abc import Mapping
from typing import Any

from google.protobuf import descriptor_pool, message, message_factory

from workflowjobs.v1 import job_pb2

from ._errors import PayloadDecodeError, PayloadEncodeError

__all__ = [
    "BYTES_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "PROTOBUF_CONTENT_TYPE",
    "decode_payload",
    "decode_value",
    "encode_payload",
    "encode_value",
]

JSON_CONTENT_TYPE = "application/json"
BYTES_CONTENT_TYPE = "application/octet-stream"
PROTOBUF_CONTENT_TYPE = "application/x-protobuf"


def _pydantic_base_model() -> type | None:
    pydantic = sys.modules.get("pydantic")
    return getattr(pydantic, "BaseModel", None) if pydantic is not None else None


def _is_pydantic_model_class(tp: Any) -> bool:
    base = _pydantic_base_model()
    return base is not None and isinstance(tp, type) and issubclass(tp, base)


def _is_protobuf_class(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, message.Message)


def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    base = _pydantic_base_model()
    if base is not None and isinstance(value, base):
        return value.model_dump(mode="json")  # type: ignore[attr-defined]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset):
        return list(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode_value(value: Any) -> tuple[bytes, str]:
    """Encode a value into payload bytes and a content type.

    Args:
        value: ``None``, ``bytes``, a protobuf message, a dataclass, a pydantic
            model, or anything JSON can represent.

    Returns:
        ``(data, content_type)``.

    Raises:
        PayloadEncodeError: The value cannot be encoded.
    """
    if value is None:
        return b"", ""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value), BYTES_CONTENT_TYPE
    if isinstance(value, message.Message):
        full_name = value.DESCRIPTOR.full_name
        return value.SerializeToString(), f"{PROTOBUF_CONTENT_TYPE}; messageType={full_name}"
    base = _pydantic_base_model()
    if base is not None and isinstance(value, base):
        return value.model_dump_json().encode(), JSON_CONTENT_TYPE  # type: ignore[attr-defined]
    try:
        text = json.dumps(value, default=_json_default, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise PayloadEncodeError(f"cannot encode {type(value).__name__}: {exc}") from exc
    return text.encode(), JSON_CONTENT_TYPE


def encode_payload(value: Any, content_type: str | None = None) -> job_pb2.Payload:
    """Encode a value into a :class:`job_pb2.Payload`.

    Args:
        value: See :func:`encode_value`. An existing ``Payload`` is returned as is.
        content_type: Overrides the content type (only for ``bytes`` values).

    Returns:
        The payload message.
    """
    if isinstance(value, job_pb2.Payload):
        return value
    if content_type is not None and isinstance(value, bytes | bytearray | memoryview):
        return job_pb2.Payload(data=bytes(value), content_type=content_type)
    data, detected = encode_value(value)
    return job_pb2.Payload(data=data, content_type=detected)


@functools.lru_cache(maxsize=256)
def _media_type(content_type: str) -> tuple[str, dict[str, str]]:
    """Media type and parameters (cached: payloads reuse a few content types;
    callers must not modify the returned dict)."""
    head, *params = content_type.split(";")
    parsed: dict[str, str] = {}
    for param in params:
        key, _, val = param.strip().partition("=")
        parsed[key.strip().lower()] = val.strip().strip('"')
    return head.strip().lower(), parsed


def _protobuf_class_by_name(full_name: str) -> type[message.Message] | None:
    try:
        descriptor = descriptor_pool.Default().FindMessageTypeByName(full_name)
    except KeyError:
        return None
    return message_factory.GetMessageClass(descriptor)


def _is_any(tp: Any) -> bool:
    return tp is Any or tp is object or tp is None or tp is dataclasses.MISSING


def decode_payload(data: bytes, content_type: str, type_hint: Any = Any) -> Any:
    """Decode payload bytes into the value a handler expects.

    Args:
        data: The payload bytes.
        content_type: The payload's content type (empty is taken as JSON).
        type_hint: The expected type; ``Any`` returns the natural decoding
            (JSON value, raw bytes, or the protobuf message when its type is
            known to this process).

    Returns:
        The decoded value.

    Raises:
        PayloadDecodeError: The payload does not decode or validate as ``type_hint``.
    """
    media, params = _media_type(content_type or JSON_CONTENT_TYPE)
    if type_hint is bytes:
        return bytes(data)
    if _is_protobuf_class(type_hint):
        expected = type_hint.DESCRIPTOR.full_name
        sent = params.get("messagetype")
        if media == PROTOBUF_CONTENT_TYPE and sent and sent != expected:
            raise PayloadDecodeError(f"payload holds {sent}, handler expects {expected}")
        try:
            return type_hint.FromString(data)
        except message.DecodeError as exc:
            raise PayloadDecodeError(f"invalid {expected} payload: {exc}") from exc
    if media == BYTES_CONTENT_TYPE:
        if _is_any(type_hint):
            return bytes(data)
        raise PayloadDecodeError(
            f"payload is raw bytes ({BYTES_CONTENT_TYPE}); handler expects {_type_name(type_hint)}"
        )
    if media == PROTOBUF_CONTENT_TYPE:
        cls = _protobuf_class_by_name(params.get("messagetype", ""))
        if _is_any(type_hint):
            return cls.FromString(data) if cls is not None else bytes(data)
        raise PayloadDecodeError(
            f"payload is a protobuf message; handler expects {_type_name(type_hint)}"
        )
    if not data:
        decoded: Any = None
    elif _is_pydantic_model_class(type_hint):
        try:
            return type_hint.model_validate_json(data)
        except ValueError as exc:
            raise PayloadDecodeError(str(exc)) from exc
    else:
        try:
            decoded = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PayloadDecodeError(f"payload is not valid JSON: {exc}") from exc
        if type_hint is dict and type(decoded) is dict:
            return decoded  # the common untyped handler: nothing to validate
    return decode_value(decoded, type_hint)


def decode_value(value: Any, type_hint: Any) -> Any:
    """Convert a decoded JSON value into ``type_hint``, validating as it goes.

    Args:
        value: A value as produced by ``json.loads``.
        type_hint: The target type.

    Returns:
        The converted value.

    Raises:
        PayloadDecodeError: The value does not fit ``type_hint``; the message
            names the path of the offending field.
    """
    try:
        return _convert(value, type_hint, "payload")
    except _Mismatch as exc:
        raise PayloadDecodeError(str(exc)) from None


class _Mismatch(Exception):
    pass


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def _fail(path: str, expected: Any, value: Any) -> typing.NoReturn:
    raise _Mismatch(f"{path}: expected {_type_name(expected)}, got {type(value).__name__}")


_NONE_TYPE = type(None)


def _convert(value: Any, tp: Any, path: str) -> Any:
    if _is_any(tp):
        return value
    if isinstance(tp, typing.TypeVar):
        return value
    if tp is _NONE_TYPE:
        if value is not None:
            _fail(path, tp, value)
        return None
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _convert(value, typing.get_args(tp)[0], path)
    if origin is typing.Union or origin is types.UnionType:
        return _convert_union(value, tp, path)
    if origin is typing.Literal:
        if value not in typing.get_args(tp):
            raise _Mismatch(f"{path}: expected one of {typing.get_args(tp)!r}, got {value!r}")
        return value
    if origin is not None:
        return _convert_generic(value, tp, origin, path)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _convert_dataclass(value, tp, path)
    if _is_pydantic_model_class(tp):
        try:
            return tp.model_validate(value)
        except ValueError as exc:
            raise _Mismatch(f"{path}: {exc}") from None
    return _convert_scalar(value, tp, path)


def _convert_union(value: Any, tp: Any, path: str) -> Any:
    arms = typing.get_args(tp)
    if value is None and _NONE_TYPE in arms:
        return None
    errors = []
    for arm in arms:
        if arm is _NONE_TYPE:
            continue
        try:
            return _convert(value, arm, path)
        except _Mismatch as exc:
            errors.append(str(exc))
    raise _Mismatch("; ".join(errors) if len(errors) == 1 else f"{path}: no match in {tp}")


def _convert_generic(value: Any, tp: Any, origin: Any, path: str) -> Any:
    args = typing.get_args(tp)
    if origin in (list, set, frozenset, typing.Sequence, typing.MutableSequence) or (
        isinstance(origin, type) and issubclass(origin, list | set | frozenset)
    ):
        if not isinstance(value, list):
            _fail(path, tp, value)
        item = args[0] if args else Any
        items = [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
        return origin(items) if origin in (set, frozenset) else items
    if origin is tuple:
        if not isinstance(value, list):
            _fail(path, tp, value)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{path}[{i}]") for i, v in enumerate(value))
        if args and len(args) != len(value):
            raise _Mismatch(f"{path}: expected {len(args)} items, got {len(value)}")
        return tuple(
            _convert(v, args[i] if args else Any, f"{path}[{i}]") for i, v in enumerate(value)
        )
    if origin in (dict, Mapping, typing.MutableMapping) or (
        isinstance(origin, type) and issubclass(origin, dict)
    ):
        if not isinstance(value, dict):
            _fail(path, tp, value)
        key_tp, val_tp = args if args else (Any, Any)
        return {
            _convert(k, key_tp, f"{path}.<key>"): _convert(v, val_tp, f"{path}.{k}")
            for k, v in value.items()
        }
    return value


def _convert_dataclass(value: Any, cls: type, path: str) -> Any:
    if not isinstance(value, dict):
        _fail(path, cls, value)
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except (NameError, TypeError):
        hints = {}
    kwargs: dict[str, Any] = {}
    missing = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if field.name not in value:
            no_default = (
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            )
            if no_default:
                missing.append(field.name)
            continue
        field_tp = hints.get(field.name, field.type)
        if isinstance(field_tp, str):
            field_tp = Any
        kwargs[field.name] = _convert(value[field.name], field_tp, f"{path}.{field.name}")
    if missing:
        raise _Mismatch(f"{path}: missing required field(s) {', '.join(missing)}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise _Mismatch(f"{path}: {exc}") from None


def _convert_scalar(value: Any, tp: Any, path: str) -> Any:
    if not isinstance(tp, type):
        return value
    if tp is bool:
        if not isinstance(value, bool):
            _fail(path, tp, value)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(path, tp, value)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            _fail(path, tp, value)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            _fail(path, tp, value)
        return value
    if tp in (dict, list):
        if not isinstance(value, tp):
            _fail(path, tp, value)
        return value
    if issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise _Mismatch(f"{path}: {value!r} is not a valid {tp.__name__}") from None
    if tp in (dt.datetime, dt.date, dt.time):
        if not isinstance(value, str):
            _fail(path, tp, value)
        try:
            return tp.fromisoformat(value)
        except ValueError:
            raise _Mismatch(f"{path}: {value!r} is not an ISO 8601 {tp.__name__}") from None
    if tp is dt.timedelta:
        if isinstance(value, bool) or not isinstance(value, int | float):
            _fail(path, tp, value)
        return dt.timedelta(seconds=value)
    if tp in (uuid.UUID, decimal.Decimal):
        try:
            return tp(value if isinstance(value, str) else str(value))
        except (ValueError, decimal.InvalidOperation):
            raise _Mismatch(f"{path}: {value!r} is not a valid {tp.__name__}") from None
    if tp is bytes:
        if not isinstance(value, str):
            _fail(path, tp, value)
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise _Mismatch(f"{path}: not valid base64") from None
    if isinstance(value, tp):
        return value
    _fail(path, tp, value)
