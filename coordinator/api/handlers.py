"""Re-wrapping a gRPC method handler: the one place that knows its four kinds.

Design note. Each of our interceptors (error mapping, token gate, auth,
request decoding, request limits) replaces a handler's behaviour with one that
does something around the servicer's. grpc.aio hands a handler of one of four
kinds (unary-unary, unary-stream, stream-unary, stream-stream) with its
serializers; ``rewrap`` rebuilds a handler of the same kind around the new
behaviour, so an interceptor says only what it does for each kind it cares
about, and a kind it leaves out keeps the handler as it is.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc
from google.protobuf.message import Message

# What an interceptor sees of a call, the same for every method it wraps: the
# request as raw bytes (outside RequestDecodingInterceptor, which decodes it)
# or as its message, and a response message. grpc-stubs makes the types below
# generic over that pair, but only ServicerContext is generic at run time:
# Handler is written as a string, and ServerInterceptor is subscripted for the
# type checker only.
AnyRequest: TypeAlias = bytes | Message
AnyResponse: TypeAlias = Message
Handler: TypeAlias = "grpc.RpcMethodHandler[AnyRequest, AnyResponse]"
CallContext: TypeAlias = grpc.aio.ServicerContext[AnyRequest, AnyResponse]
Continuation: TypeAlias = Callable[[grpc.HandlerCallDetails], Awaitable[Handler]]

# The base of our interceptors: grpc.aio.ServerInterceptor, of any method.
if TYPE_CHECKING:
    ServerInterceptor: TypeAlias = grpc.aio.ServerInterceptor[AnyRequest, AnyResponse]
else:
    ServerInterceptor = grpc.aio.ServerInterceptor

# The inner behaviour of a handler -> the new one, or None to leave the handler as it is.
Wrap = Callable[[Callable[..., Any]], Callable[..., Any] | None]

_MAKERS = {
    "unary_unary": grpc.unary_unary_rpc_method_handler,
    "unary_stream": grpc.unary_stream_rpc_method_handler,
    "stream_unary": grpc.stream_unary_rpc_method_handler,
    "stream_stream": grpc.stream_stream_rpc_method_handler,
}


def rewrap(
    handler: Handler,
    *,
    unary_unary: Wrap | None = None,
    unary_stream: Wrap | None = None,
    stream_unary: Wrap | None = None,
    stream_stream: Wrap | None = None,
    decodes: bool = False,
) -> Handler:
    """``handler`` with its behaviour replaced by what the wrap of its kind
    makes of it; unchanged when that kind has no wrap or the wrap gives None.

    The response serializer is kept; so is the request deserializer, unless
    ``decodes`` (the new behaviour decodes the request bytes itself).
    """
    wraps = {
        "unary_unary": unary_unary,
        "unary_stream": unary_stream,
        "stream_unary": stream_unary,
        "stream_stream": stream_stream,
    }
    for kind, wrap in wraps.items():
        inner = getattr(handler, kind)
        if inner is None:
            continue
        behaviour = wrap(inner) if wrap is not None else None
        if behaviour is None:
            return handler
        return _MAKERS[kind](
            behaviour,
            request_deserializer=None if decodes else handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return handler


def yields(behaviour: Callable[..., Any]) -> bool:
    """True when a streaming behaviour yields its responses; False when it writes
    them with ``context.write`` (as the grpc.aio health servicer's Watch does)."""
    return inspect.isasyncgenfunction(behaviour)


__all__ = [
    "AnyRequest",
    "AnyResponse",
    "CallContext",
    "Continuation",
    "Handler",
    "ServerInterceptor",
    "Wrap",
    "rewrap",
    "yields",
]
