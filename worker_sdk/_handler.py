"""Handler registration: how a function's signature maps onto a job.

A handler takes at most one payload parameter (the first parameter not
annotated :class:`JobContext`) and any number of parameters annotated
:class:`JobContext`. The payload parameter's annotation chooses the decoding
(see :mod:`worker_sdk._codec`). Everything is worked out once, at registration.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from workflowjobs.v1 import job_pb2

from ._codec import decode_payload
from ._context import JobContext
from ._convert import RetryPolicy

__all__ = ["HandlerSpec"]

_ANY: Any = Any


def _unwrap_annotated(tp: Any) -> Any:
    return typing.get_args(tp)[0] if typing.get_origin(tp) is typing.Annotated else tp


@dataclasses.dataclass(frozen=True, slots=True)
class HandlerSpec:
    """A registered handler and how to call it.

    Attributes:
        job_type: The job type it serves.
        func: The user's function.
        is_async: True for coroutine functions (run on the event loop).
        payload_param: Name of the payload parameter, or None when it takes none.
        payload_type: Type the payload decodes to.
        context_params: Names of the parameters that receive the JobContext.
        retry_policy: Worker-side retry policy applied to failures, if any.
    """

    job_type: str
    func: Callable[..., Any]
    is_async: bool
    payload_param: str | None
    payload_type: Any
    context_params: tuple[str, ...]
    retry_policy: RetryPolicy | None = None

    @classmethod
    def build(
        cls,
        job_type: str,
        func: Callable[..., Any],
        *,
        retry_policy: RetryPolicy | job_pb2.RetryPolicy | None = None,
    ) -> HandlerSpec:
        """Inspect ``func`` and describe how to call it.

        Raises:
            TypeError: The signature cannot be served (extra required parameters,
                unresolvable annotations).
        """
        if not job_type:
            raise ValueError("job_type must not be empty")
        if not callable(func):
            raise TypeError(f"handler for {job_type!r} is not callable")
        target = func
        while isinstance(target, functools.partial):
            target = target.func
        is_async = inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
            getattr(target, "__call__", None)  # noqa: B004 - async callable objects
        )
        signature = inspect.signature(func)
        try:
            hints = typing.get_type_hints(func, include_extras=True)
        except Exception:  # noqa: BLE001 - forward refs defined in local scopes
            hints = {}
        payload_param: str | None = None
        payload_type: Any = _ANY
        context_params: list[str] = []
        for name, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            annotation = hints.get(name, param.annotation)
            if isinstance(annotation, str):
                if annotation.rsplit(".", 1)[-1] == "JobContext":
                    annotation = JobContext
                else:
                    raise TypeError(
                        f"handler for {job_type!r}: cannot resolve annotation {annotation!r} "
                        f"of parameter {name!r}; define the type at module level"
                    )
            annotation = _unwrap_annotated(annotation)
            if annotation is JobContext:
                context_params.append(name)
            elif payload_param is None and param.kind != param.KEYWORD_ONLY:
                payload_param = name
                payload_type = _ANY if annotation is inspect.Parameter.empty else annotation
            elif param.default is inspect.Parameter.empty:
                raise TypeError(
                    f"handler for {job_type!r}: parameter {name!r} has no default; a handler "
                    "takes one payload parameter and parameters annotated JobContext"
                )
        if isinstance(retry_policy, job_pb2.RetryPolicy):
            retry_policy = RetryPolicy.from_proto(retry_policy)
        return cls(
            job_type=job_type,
            func=func,
            is_async=is_async,
            payload_param=payload_param,
            payload_type=payload_type,
            context_params=tuple(context_params),
            retry_policy=retry_policy,
        )

    def arguments(self, ctx: JobContext) -> dict[str, Any]:
        """Decode the payload and build the call's keyword arguments.

        Raises:
            PayloadDecodeError: The payload does not fit the payload parameter.
        """
        kwargs: dict[str, Any] = {name: ctx for name in self.context_params}
        if self.payload_param is not None:
            kwargs[self.payload_param] = decode_payload(
                ctx.payload, ctx.content_type, self.payload_type
            )
        return kwargs

    def retry_time(self, attempt: int, error_kind: str) -> tuple[bool, datetime | None]:
        """Apply the handler's retry policy to a failed attempt.

        Returns:
            ``(non_retryable, retry_time)``; ``(False, None)`` without a policy,
            which leaves the decision to the coordinator.
        """
        policy = self.retry_policy
        if policy is None:
            return False, None
        if error_kind in policy.non_retryable_error_kinds:
            return True, None
        if policy.max_attempts and attempt >= policy.max_attempts:
            return True, None
        delay = policy.delay_seconds(attempt)
        if delay is None:
            return False, None
        return False, datetime.now(UTC) + timedelta(seconds=delay)
