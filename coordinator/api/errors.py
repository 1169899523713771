"""One interceptor maps domain errors to gRPC status codes.

Only genuinely unexpected exceptions become INTERNAL; everything the engine
raises on purpose carries a code and a message a person can act on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc

from coordinator import errors
from coordinator.api.handlers import (
    CallContext,
    Continuation,
    Handler,
    ServerInterceptor,
    rewrap,
    yields,
)

log = logging.getLogger(__name__)

_CODES: list[tuple[type[Exception], grpc.StatusCode]] = [
    (errors.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (errors.OutOfRange, grpc.StatusCode.OUT_OF_RANGE),
    (errors.ShuttingDown, grpc.StatusCode.UNAVAILABLE),
    (errors.ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.StoreUnavailable, grpc.StatusCode.UNAVAILABLE),
    (errors.Aborted, grpc.StatusCode.ABORTED),
    (errors.DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (errors.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (errors.SchemaMismatch, grpc.StatusCode.FAILED_PRECONDITION),
]


def status_for(exc: BaseException) -> grpc.StatusCode | None:
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return None


async def _abort(context: CallContext, exc: Exception, method: str) -> None:
    if isinstance(exc, NotImplementedError):
        await context.abort(
            grpc.StatusCode.UNIMPLEMENTED, f"{method} is not implemented by this coordinator"
        )
    code = status_for(exc)
    if code is None:
        log.exception("unexpected error in %s", method)
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}; see server log")
    await context.abort(code, str(exc))


class ErrorMappingInterceptor(ServerInterceptor):
    """Wraps every unary and streaming handler with the domain-error mapping.

    ``on_store_unavailable`` is called whenever a call fails because the
    database cannot be reached (the health watch uses it).
    """

    def __init__(self, on_store_unavailable: Callable[[], None] | None = None) -> None:
        self._on_store_unavailable = on_store_unavailable

    def _observe(self, exc: Exception) -> None:
        if isinstance(exc, errors.StoreUnavailable) and self._on_store_unavailable is not None:
            self._on_store_unavailable()

    async def end_with(self, error: Exception, context: CallContext, method: str) -> None:
        """End the call with the status ``error`` maps to; a call already ended
        (aborted, or misused) keeps its own."""
        if isinstance(error, grpc.aio.AbortError | grpc.aio.UsageError):
            raise error
        self._observe(error)
        await _abort(context, error, method)

    def _mapped_unary(self, inner: Callable[..., Any], method: str) -> Callable[..., Any]:
        """Wrap a handler with a single response."""

        async def mapped(request: Any, context: CallContext) -> Any:
            try:
                return await inner(request, context)
            except Exception as e:  # noqa: BLE001 - mapped (INTERNAL with a log if unexpected)
                await self.end_with(e, context, method)

        return mapped

    def _mapped_stream(self, inner: Callable[..., Any], method: str) -> Callable[..., Any]:
        """Wrap a response-streaming handler (request or request iterator first)."""

        async def mapped(request: Any, context: CallContext) -> Any:
            try:
                async for item in inner(request, context):
                    yield item
            except Exception as e:  # noqa: BLE001 - mapped (INTERNAL with a log if unexpected)
                await self.end_with(e, context, method)

        return mapped

    async def intercept_service(
        self,
        continuation: Continuation,
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        return rewrap(
            handler,
            unary_unary=lambda inner: self._mapped_unary(inner, method),
            # One that writes with context.write (health's Watch) is left as it is.
            unary_stream=lambda inner: (
                self._mapped_stream(inner, method) if yields(inner) else None
            ),
            stream_stream=lambda inner: self._mapped_stream(inner, method),
        )
