"""Request decoding in one place, for every RPC.

gRPC would decode request bytes itself, before any handler runs, and answer
UNKNOWN (unary) or INTERNAL (streams) when they do not parse. Instead this
interceptor registers no deserializer with gRPC (handlers receive the raw
bytes) and decodes each request, and each message of a stream, itself:

* bytes that are not the request message (corrupt wire format, invalid UTF-8
  in a string field) are ``InvalidArgument``;
* a NUL character in any string field is ``InvalidArgument`` naming the field:
  PostgreSQL text cannot hold it, and the rule must not depend on the store;
* a string field longer than the string limit (``max_string_length``, 512 by
  default; ``MAX_TEXT_LENGTH`` for the free-text fields of ``FREE_TEXT``) is
  ``InvalidArgument`` naming the field and its length. The RPCs of
  ``ENGINE_CHECKED`` (the hot path, where walking every job of a batch would
  cost more than decoding it) are not walked: the engine and the worker
  servicer check each of their fields themselves (``tests/api`` walks every
  field of every RPC to hold both to the rule).

It sits inside the error-mapping interceptor and the token gate (an
unauthenticated caller is refused before its bytes are decoded) and before the
tenant-scope checks of authentication, which read the request. A unary request that cannot be used
is answered INVALID_ARGUMENT here; a bad message on a stream raises
``InvalidArgument`` where the servicer reads it, mapped like every other
domain error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf import descriptor as pbd
from google.protobuf.message import DecodeError, Message

from coordinator.api.handlers import (
    CallContext,
    Continuation,
    Handler,
    ServerInterceptor,
    rewrap,
    yields,
)
from coordinator.engine.validation import MAX_TEXT_LENGTH
from coordinator.errors import InvalidArgument
from workflowjobs.contract import MAX_STRING_LENGTH

Deserializer = Callable[[bytes], Any]

_PACKAGE = "workflowjobs.v1"
# RPCs whose string fields the engine or the worker servicer bound themselves.
ENGINE_CHECKED = frozenset(
    f"/{_PACKAGE}.{name}"
    for name in (
        "JobSchedulerService/Enqueue",
        "JobSchedulerService/EnqueueBatch",
        "WorkerService/AcquireJobs",
        "WorkerService/ReportOutcomes",
        "WorkerService/Heartbeat",
        "WorkerService/CompleteJob",
        "WorkerService/FailJob",
    )
)
# Operator-written free text: longer than an id, still bounded (MAX_TEXT_LENGTH).
FREE_TEXT = frozenset(
    f"{_PACKAGE}.{name}"
    for name in (
        "CancelJobRequest.reason",
        "CancelGroupRequest.reason",
        "BulkCancelJobsRequest.reason",
        "PauseRequest.reason",
    )
)


def _message_name(deserializer: Deserializer) -> str:
    owner = getattr(deserializer, "__self__", None)
    descriptor = getattr(owner, "DESCRIPTOR", None)
    return descriptor.full_name if descriptor is not None else "the request message"


def _is_map(field: pbd.FieldDescriptor) -> bool:
    """``field`` (of TYPE_MESSAGE, so it has a message type) is a map."""
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def nul_field(message: Message, prefix: str = "") -> str | None:
    """The path of the first string field of ``message`` holding U+0000, or None."""
    for field, value in message.ListFields():
        name = f"{prefix}{field.name}"
        if field.type == pbd.FieldDescriptor.TYPE_STRING:
            if field.is_repeated:
                for i, item in enumerate(value):
                    if "\x00" in item:
                        return f"{name}[{i}]"
            elif "\x00" in value:
                return name
        elif field.type == pbd.FieldDescriptor.TYPE_MESSAGE:
            if _is_map(field):
                for key, item in value.items():
                    if isinstance(key, str) and "\x00" in key:
                        return f"{name}[{key!r}]"
                    if isinstance(item, str) and "\x00" in item:
                        return f"{name}[{key!r}]"
                    if isinstance(item, Message):
                        found = nul_field(item, f"{name}[{key!r}].")
                        if found:
                            return found
            elif field.is_repeated:
                for i, item in enumerate(value):
                    found = nul_field(item, f"{name}[{i}].")
                    if found:
                        return found
            else:
                found = nul_field(value, f"{name}.")
                if found:
                    return found
    return None


def long_field(message: Message, limit: int, prefix: str = "") -> tuple[str, int, int] | None:
    """The first string field of ``message`` over its limit: (path, length, limit), or None.

    ``limit`` applies to every string field (map keys and values included)
    but those of ``FREE_TEXT``, which may hold ``MAX_TEXT_LENGTH``.
    """
    for field, value in message.ListFields():
        name = f"{prefix}{field.name}"
        if field.type == pbd.FieldDescriptor.TYPE_STRING:
            most = MAX_TEXT_LENGTH if field.full_name in FREE_TEXT else limit
            items = enumerate(value) if field.is_repeated else [(None, value)]
            for i, item in items:
                if len(item) > most:
                    return (name if i is None else f"{name}[{i}]", len(item), most)
        elif field.type == pbd.FieldDescriptor.TYPE_MESSAGE:
            if _is_map(field):
                for key, item in value.items():
                    for text in (key, item):
                        if isinstance(text, str) and len(text) > limit:
                            return (f"{name} entry", len(text), limit)
                    if isinstance(item, Message):
                        found = long_field(item, limit, f"{name} entry.")
                        if found:
                            return found
                continue
            for i, item in enumerate(value) if field.is_repeated else [(None, value)]:
                found = long_field(item, limit, f"{name}." if i is None else f"{name}[{i}].")
                if found:
                    return found
    return None


def decode(deserializer: Deserializer, raw: Any, max_string_length: int = 0) -> Any:
    """``raw`` decoded with ``deserializer``; ``InvalidArgument`` when it cannot be used.

    ``max_string_length`` > 0: every string field is held to it (``long_field``).
    """
    if not isinstance(raw, bytes | bytearray | memoryview):
        return raw  # already decoded (an in-process caller)
    try:
        message = deserializer(bytes(raw))
    except (DecodeError, ValueError, TypeError, UnicodeDecodeError) as e:
        raise InvalidArgument(
            f"the request is not a valid {_message_name(deserializer)} ({e}); "
            "send a serialized protobuf message whose string fields are UTF-8"
        ) from None
    # NUL bytes are rare in real requests: skip the walk when there is none at all.
    if b"\x00" in raw and isinstance(message, Message):
        field = nul_field(message)
        if field is not None:
            raise InvalidArgument(
                f"{field} contains a NUL character (U+0000), which no string field may hold"
            )
    # No string can be longer than the message that holds it.
    if max_string_length > 0 and len(raw) > max_string_length and isinstance(message, Message):
        found = long_field(message, max_string_length)
        if found is not None:
            path, length, most = found
            raise InvalidArgument(
                f"{path} is {length:,} characters long; the limit is {most} (docs/limits.md)"
            )
    return message


async def _decoded_stream(deserializer: Deserializer, raw_iter: Any) -> AsyncIterator[Any]:
    async for raw in raw_iter:
        yield decode(deserializer, raw)


async def _decode_or_abort(
    deserializer: Deserializer, raw: Any, context: CallContext, limit: int
) -> Any:
    try:
        return decode(deserializer, raw, limit)
    except InvalidArgument as e:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))


class RequestDecodingInterceptor(ServerInterceptor):
    """Decodes every request message itself, answering INVALID_ARGUMENT for bad bytes."""

    def __init__(self, max_string_length: int = MAX_STRING_LENGTH) -> None:
        self.max_string_length = max_string_length

    async def intercept_service(
        self,
        continuation: Continuation,
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        deserializer = handler.request_deserializer
        method = handler_call_details.method
        limit = 0 if method in ENGINE_CHECKED else self.max_string_length
        return rewrap(
            handler,
            unary_unary=lambda inner: _decoding_unary(deserializer, limit, inner),
            unary_stream=lambda inner: _decoding_unary_stream(deserializer, limit, inner),
            stream_stream=lambda inner: _decoding_stream(deserializer, inner),
            decodes=True,
        )


def _decoding_unary(
    deserializer: Deserializer, limit: int, inner: Callable[..., Any]
) -> Callable[..., Any]:
    async def unary_unary(raw: Any, context: CallContext) -> Any:
        request = await _decode_or_abort(deserializer, raw, context, limit)
        return await inner(request, context)

    return unary_unary


def _decoding_unary_stream(
    deserializer: Deserializer, limit: int, inner: Callable[..., Any]
) -> Callable[..., Any]:
    async def unary_stream(raw: Any, context: CallContext) -> Any:
        request = await _decode_or_abort(deserializer, raw, context, limit)
        async for item in inner(request, context):
            yield item

    async def unary_stream_writer(raw: Any, context: CallContext) -> None:
        # The grpc.aio health servicer writes with context.write.
        await inner(await _decode_or_abort(deserializer, raw, context, limit), context)

    return unary_stream if yields(inner) else unary_stream_writer


def _decoding_stream(deserializer: Deserializer, inner: Callable[..., Any]) -> Callable[..., Any]:
    # A bad message raises InvalidArgument where the servicer reads it;
    # the error-mapping interceptor ends the stream with that status.
    async def stream_stream(raw_iter: Any, context: CallContext) -> Any:
        async for item in inner(_decoded_stream(deserializer, raw_iter), context):
            yield item

    async def stream_stream_writer(raw_iter: Any, context: CallContext) -> None:
        await inner(_decoded_stream(deserializer, raw_iter), context)

    return stream_stream if yields(inner) else stream_stream_writer


__all__ = [
    "ENGINE_CHECKED",
    "FREE_TEXT",
    "MAX_TEXT_LENGTH",
    "RequestDecodingInterceptor",
    "decode",
    "long_field",
    "nul_field",
]
