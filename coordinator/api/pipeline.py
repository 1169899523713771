"""The gRPC server's one interceptor: error mapping, authentication, request
decoding and limits.

Design note. grpc.aio runs every interceptor of the server on every call, and
each of ours rebuilt the method's handler around the servicer (``rewrap``) on
every call. Here one interceptor does their work in a fixed order, outermost
first:

1. error mapping (``ErrorMappingInterceptor``): every error gets its status code;
2. the token gate (``TokenGate``): bearer token and role, from metadata only,
   before a byte of the request is decoded;
3. request decoding (``RequestDecodingInterceptor``);
4. tenant scopes (``AuthInterceptor``), which read the decoded request and
   expose the caller through ``current_principal()``;
5. limits (``LimitsInterceptor``), which charge the caller.

A unary call (every call but the worker stream and the event watch) runs all
five in one function built once per method and kept: the handler a method
gets from its service never changes, and nothing of a call is read before
the call runs (its metadata comes from its context). The cheap case comes
first: with authentication off, steps 2 and 4 are not there at all. Streams
are opened once per worker or watch, not once per job: they go through the
five interceptors in turn, as each one describes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from coordinator.api.auth import AuthInterceptor
from coordinator.api.decoding import ENGINE_CHECKED, RequestDecodingInterceptor, decode
from coordinator.api.errors import ErrorMappingInterceptor
from coordinator.api.handlers import (
    CallContext,
    Continuation,
    Handler,
    ServerInterceptor,
    rewrap,
)
from coordinator.api.request_limits import LimitsInterceptor


class CallPipeline(ServerInterceptor):
    """Error mapping, the token gate, decoding, tenant scopes and limits (see the module note).

    Args:
        errors: The error mapping.
        decoding: The request decoding (its string limit).
        auth: Authentication, or None when it is off.
        limits: The rate and open-call limits.
    """

    def __init__(
        self,
        *,
        errors: ErrorMappingInterceptor,
        decoding: RequestDecodingInterceptor,
        auth: AuthInterceptor | None,
        limits: LimitsInterceptor,
    ) -> None:
        self._errors = errors
        self._decoding = decoding
        self._auth = auth
        self._limits = limits
        # The stream path: the interceptors in their order, outermost first.
        self._chain: list[ServerInterceptor] = [errors]
        if auth is not None:
            self._chain.append(auth.gate)
        self._chain.append(decoding)
        if auth is not None:
            self._chain.append(auth)
        self._chain.append(limits)
        # Method → (the servicer's handler, the handler built around it).
        self._unary: dict[str, tuple[Handler, Handler]] = {}

    async def intercept_service(
        self,
        continuation: Continuation,
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        if handler.unary_unary is None:
            return await self._through_chain(handler, handler_call_details)
        method = handler_call_details.method
        kept = self._unary.get(method)
        if kept is not None and kept[0] is handler:
            return kept[1]
        behaviour = self._unary_behaviour(handler, method)
        built = rewrap(handler, unary_unary=lambda _: behaviour, decodes=True)
        self._unary[method] = (handler, built)
        return built

    async def _through_chain(
        self, handler: Handler, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler:
        """``handler`` wrapped by each interceptor of the chain, innermost first."""

        async def servicer(_: grpc.HandlerCallDetails) -> Handler:
            return handler

        continuation: Continuation = servicer
        for interceptor in reversed(self._chain):
            continuation = _link(interceptor, continuation)
        return await continuation(handler_call_details)

    def _unary_behaviour(self, handler: Handler, method: str) -> Callable[..., Any]:
        """The five steps of a unary call of ``method`` around the servicer, in one function."""
        inner = handler.unary_unary
        assert inner is not None
        limited = self._limits.wrap_unary(inner, method)
        end_with = self._errors.end_with
        deserializer = handler.request_deserializer
        limit = 0 if method in ENGINE_CHECKED else self._decoding.max_string_length
        auth = self._auth
        if auth is None or auth.is_open(method):
            if deserializer is None:

                async def plain(request: Any, context: CallContext) -> Any:
                    try:
                        return await limited(request, context)
                    except Exception as e:  # noqa: BLE001 - mapped (INTERNAL with a log if unexpected)
                        await end_with(e, context, method)

                return plain

            async def decoded(raw: Any, context: CallContext) -> Any:
                try:
                    return await limited(decode(deserializer, raw, limit), context)
                except Exception as e:  # noqa: BLE001 - mapped (INTERNAL with a log if unexpected)
                    await end_with(e, context, method)

            return decoded

        admit = auth.unary_admission(method)

        async def checked(raw: Any, context: CallContext) -> Any:
            try:
                principal = auth.authorize(method, context.invocation_metadata())
                request = raw if deserializer is None else decode(deserializer, raw, limit)
                return await admit(principal, request, lambda: limited(request, context))
            except Exception as e:  # noqa: BLE001 - mapped (INTERNAL with a log if unexpected)
                await end_with(e, context, method)

        return checked


def _link(interceptor: ServerInterceptor, continuation: Continuation) -> Continuation:
    async def next_handler(details: grpc.HandlerCallDetails) -> Handler:
        return await interceptor.intercept_service(continuation, details)

    return next_handler


# What a unary call runs once its caller is admitted (auth.unary_admission).
Admitted = Callable[[], Awaitable[Any]]

__all__ = ["Admitted", "CallPipeline"]
