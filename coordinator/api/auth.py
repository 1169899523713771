"""Bearer-token authentication with roles and tenant scopes.

Design note. Every call to a workflow-jobs service must carry
``authorization: Bearer <token>``. The token is looked up by its SHA-256 in a
token file (``WFJOBS_TOKENS_FILE``), so the file holds no usable secret. A
credential has

* roles: ``scheduler`` (JobSchedulerService), ``worker`` (WorkerService),
  ``admin`` (AdminService); a credential may hold several;
* tenants: the tenants it may touch, or ``["*"]`` for all;
* optionally job types (workers): the only job types it may acquire.

Checks, in order: no or unknown token → UNAUTHENTICATED; the service needs a
role the credential lacks → PERMISSION_DENIED; the request names a tenant
outside the scope → PERMISSION_DENIED (it names only the caller's own
input). A job id of another tenant is answered exactly like an id that does
not exist (NOT_FOUND, or "lease lost" for outcomes and heartbeats), so a
scoped credential learns nothing about other tenants' jobs. Calls that act on
every tenant (drain, limits, workers, stats without a tenant) need ``*``.
``AdminService/WhoAmI`` needs a known token but no role: a credential may
always learn its own name and scope.

Per-request checks live in ``_POLICIES`` below; what cannot be decided from
the request alone (which jobs a worker may receive, per-lease heartbeat and
outcome answers) is decided by the servicers from ``current_principal()``.

Health and reflection stay open unless configured otherwise; when closed,
any valid token may call them (whatever its roles and tenants), which is what
load balancers and probes need.

Token file: JSON lines, one credential per line; blank lines and lines
starting with ``#`` are ignored::

    {"name": "billing-workers", "sha256": "<hex>", "roles": ["worker"], "tenants": ["billing"]}
    {"name": "ops", "sha256": "<hex>", "roles": ["admin", "scheduler"], "tenants": ["*"]}

``python -m coordinator hash-token`` prints the SHA-256 of a token read from
stdin. The file is re-read when it changes (checked at most once a second, by
the calls that arrive and by a watch of the server), so tokens rotate without
a restart: add the new token, move clients over, remove the old one. Open
AcquireJobs streams are re-checked on every reload (``WorkerServicer``): a
removed credential's streams end with UNAUTHENTICATED.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from coordinator import tenancy
from coordinator.api.errors import status_for
from coordinator.api.handlers import (
    CallContext,
    Continuation,
    Handler,
    ServerInterceptor,
    rewrap,
    yields,
)
from coordinator.errors import NotFound, PermissionDenied, Unauthenticated
from coordinator.tenancy import ALL_TENANTS, TenantScope

log = logging.getLogger(__name__)

ROLES = ("scheduler", "worker", "admin")

_PACKAGE = "workflowjobs.v1"
_ROLE_OF_SERVICE = {
    f"{_PACKAGE}.JobSchedulerService": "scheduler",
    f"{_PACKAGE}.WorkerService": "worker",
    f"{_PACKAGE}.AdminService": "admin",
}
HEALTH_SERVICE = "grpc.health.v1.Health"
# KEDA's external scaler (api/keda.py): KEDA sends no bearer token.
SCALER_SERVICE = "externalscaler.ExternalScaler"
REFLECTION_SERVICES = (
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
)
# Services any authenticated caller may use when they are not left open.
_ANY_TOKEN_SERVICES = frozenset((HEALTH_SERVICE, SCALER_SERVICE, *REFLECTION_SERVICES))
# Methods any authenticated caller may use: a credential may always learn its own scope.
WHOAMI_METHOD = f"/{_PACKAGE}.AdminService/WhoAmI"
_ANY_TOKEN_METHODS = frozenset((WHOAMI_METHOD,))
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Principal:
    """An authenticated credential: who, with which roles, over which tenants."""

    name: str
    roles: frozenset[str]
    # None means every tenant (coordinator/tenancy.py decides what it allows).
    tenants: TenantScope
    # None means every job type (workers only).
    job_types: frozenset[str] | None = None
    # Identifies the credential (its token's hash); two principals with the
    # same key are the same credential.
    key: str = ""

    def describe_tenants(self) -> str:
        return tenancy.describe(self.tenants)


_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "wfj_principal", default=None
)


def current_principal() -> Principal | None:
    """The caller of the RPC being served; None when authentication is off."""
    return _principal.get()


def tenant_scope() -> TenantScope:
    """Tenants the caller may touch; None for every tenant (or auth off)."""
    principal = _principal.get()
    return None if principal is None else principal.tenants


def hash_token(token: str) -> str:
    """The hex SHA-256 under which a token is stored in the token file."""
    return hashlib.sha256(token.encode()).hexdigest()


# -- the token file ---------------------------------------------------------------


def parse_tokens(text: str, source: str = "token file") -> dict[str, Principal]:
    """Credentials by token hash; ``ValueError`` says which line is wrong and why."""
    book: dict[str, Principal] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source} line {number}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not JSON ({e.msg})") from None
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected a JSON object")
        digest = str(entry.get("sha256", "")).lower()
        if not _SHA256.match(digest):
            raise ValueError(f"{where}: 'sha256' must be the 64-hex-digit SHA-256 of the token")
        roles = _string_list(entry.get("roles"), where, "roles")
        unknown = sorted(set(roles) - set(ROLES))
        if not roles or unknown:
            raise ValueError(f"{where}: 'roles' must list some of {', '.join(ROLES)}")
        tenants = _string_list(entry.get("tenants"), where, "tenants")
        if not tenants:
            raise ValueError(f"{where}: 'tenants' must list tenant ids, or [\"*\"] for all")
        job_types = entry.get("job_types")
        if digest in book:
            raise ValueError(f"{where}: the same token hash appears twice")
        book[digest] = Principal(
            name=str(entry.get("name") or digest[:12]),
            roles=frozenset(roles),
            tenants=tenancy.scope_of_names(tenants),
            job_types=(
                None
                if job_types is None
                else frozenset(_string_list(job_types, where, "job_types"))
            ),
            key=digest,
        )
    return book


def _string_list(value: Any, where: str, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{where}: '{name}' must be a list of non-empty strings")
    return list(value)


class TokenBook:
    """The credentials of a token file, re-read when the file changes."""

    def __init__(self, path: str | Path, *, recheck_s: float = 1.0) -> None:
        self.path = Path(path)
        self.recheck_s = recheck_s
        self._stamp = self._file_stamp()
        self._book = parse_tokens(self.path.read_text(), str(self.path))
        self._checked_at = time.monotonic()
        self._listeners: list[Callable[[], None]] = []

    def __len__(self) -> int:
        return len(self._book)

    def _file_stamp(self) -> tuple[int, int]:
        st = os.stat(self.path)
        return (st.st_mtime_ns, st.st_size)

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on the reloading thread) after each reload that changed the book."""
        self._listeners.append(listener)

    def principal(self, key: str) -> Principal | None:
        """The credential with this key as the file stands now; None once removed."""
        return self._book.get(key)

    def maybe_reload(self) -> None:
        """Re-read the file if it changed (at most once per ``recheck_s``)."""
        self._maybe_reload()

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if now - self._checked_at < self.recheck_s:
            return
        self._checked_at = now
        try:
            stamp = self._file_stamp()
            if stamp == self._stamp:
                return
            text = self.path.read_text()
            if self._file_stamp() != stamp or not text.strip():
                # Being written right now (or truncated for a rewrite): read it
                # next time rather than revoke every credential on a half file.
                return
            book = parse_tokens(text, str(self.path))
        except (OSError, ValueError) as e:
            # Keep serving with the credentials we have; say what is wrong.
            log.error("token file not reloaded, keeping the previous tokens: %s", e)
            return
        self._stamp = stamp
        self._book = book
        log.info("token file reloaded: %d credential(s)", len(book))
        for listener in self._listeners:
            listener()

    def authenticate(self, token: str) -> Principal | None:
        self._maybe_reload()
        return self._book.get(hash_token(token))


# -- per-request tenant policies ---------------------------------------------------------

Policy = Callable[[Any, Principal, Any], Awaitable[None]]


def _require_tenant(principal: Principal, tenant_id: str, what: str) -> None:
    if not tenancy.allows(principal.tenants, tenant_id):
        raise PermissionDenied(
            f"credential {principal.name!r} may not act on tenant {tenant_id!r} ({what}); "
            f"it is scoped to: {principal.describe_tenants()}"
        )


async def _specs(request: Any, principal: Principal, engine: Any) -> None:
    specs = list(request.jobs) if hasattr(request, "jobs") else [request.job]
    for spec in specs:
        _require_tenant(principal, spec.tenant_id, "job.tenant_id")


async def _group_specs(request: Any, principal: Principal, engine: Any) -> None:
    request.tenant_id = _one_tenant(principal, request.tenant_id, "tenant_id")
    for spec in [request.completion, *request.members]:
        if spec.tenant_id:
            _require_tenant(principal, spec.tenant_id, "job.tenant_id")


async def _job_id(request: Any, principal: Principal, engine: Any) -> None:
    if await tenancy.foreign_jobs(engine, principal.tenants, [request.job_id]):
        # Exactly what a job that does not exist gets: nothing leaks.
        raise NotFound(f"job {request.job_id} not found")


def _one_tenant(principal: Principal, given: str, field: str) -> str:
    """The tenant a tenant-filtered call applies to, defaulting a single-tenant scope."""
    if given:
        _require_tenant(principal, given, field)
        return given
    only = tenancy.only_tenant(principal.tenants)
    if only is not None:
        return only
    if not tenancy.every_tenant(principal.tenants):
        raise PermissionDenied(
            f"credential {principal.name!r} is scoped to several tenants; set {field} "
            f"to one of: {principal.describe_tenants()}"
        )
    return given


async def _group_id(request: Any, principal: Principal, engine: Any) -> None:
    tenant = await engine.groups.tenant_of(request.group_id)
    if tenant is not None and not tenancy.allows(principal.tenants, tenant):
        # Exactly what a group that does not exist gets: nothing leaks.
        raise NotFound(f"job group {request.group_id} not found")


async def _filter_tenant(request: Any, principal: Principal, engine: Any) -> None:
    request.filter.tenant_id = _one_tenant(principal, request.filter.tenant_id, "filter.tenant_id")


async def _tenant_field(request: Any, principal: Principal, engine: Any) -> None:
    request.tenant_id = _one_tenant(principal, request.tenant_id, "tenant_id")


async def _pause_scope(request: Any, principal: Principal, engine: Any) -> None:
    if not request.scope.tenant_id and not tenancy.every_tenant(principal.tenants):
        raise PermissionDenied(
            f"credential {principal.name!r} may not pause or unpause across every tenant; "
            f"set scope.tenant_id to one of: {principal.describe_tenants()}"
        )
    _require_tenant(principal, request.scope.tenant_id, "scope.tenant_id")


async def _servicer_decides(request: Any, principal: Principal, engine: Any) -> None:
    """The servicer filters per job (heartbeats, outcomes, acquisition)."""


def _policies() -> dict[str, Policy]:
    s = f"/{_PACKAGE}.JobSchedulerService/"
    w = f"/{_PACKAGE}.WorkerService/"
    a = f"/{_PACKAGE}.AdminService/"
    table: dict[str, Policy] = {
        s + "Enqueue": _specs,
        s + "EnqueueBatch": _specs,
        s + "GetJob": _job_id,
        s + "WaitForJob": _job_id,
        s + "WatchJobEvents": _filter_tenant,
        s + "CreateGroup": _group_specs,
        s + "CloseGroup": _group_id,
        s + "GetGroup": _group_id,
        a + "CancelGroup": _group_id,
        a + "GetGroup": _group_id,
        w + "AcquireJobs": _servicer_decides,
        w + "Heartbeat": _servicer_decides,
        w + "ReportOutcomes": _servicer_decides,
        w + "CompleteJob": _job_id,
        w + "FailJob": _job_id,
        a + "ListJobs": _filter_tenant,
        a + "BulkRetryJobs": _filter_tenant,
        a + "BulkCancelJobs": _filter_tenant,
        a + "PurgeJobs": _filter_tenant,
        a + "ListGroups": _tenant_field,
        a + "GetStats": _tenant_field,
        a + "ListPauses": _tenant_field,
        a + "SetTenantWeight": _tenant_field,
        a + "ListTenantWeights": _tenant_field,
        a + "SetCategoryWeight": _tenant_field,
        a + "ListCategoryWeights": _tenant_field,
        a + "RemoveCategoryWeight": _tenant_field,
        a + "Pause": _pause_scope,
        a + "Unpause": _pause_scope,
        a + "WhoAmI": _servicer_decides,
    }
    for name in (
        "GetJob",
        "ExplainJob",
        "RetryJob",
        "CancelJob",
        "RunJobNow",
        "UnlockJob",
        "ReplayJob",
    ):
        table[a + name] = _job_id
    for name in (
        "SetConcurrencyLimit",
        "ListConcurrencyLimits",
        "SetRateLimit",
        "ListRateLimits",
        "RemoveRateLimit",
        "Drain",
        "Undrain",
        "ListWorkers",
        "SetJobTypeDefaults",
        "ListJobTypeDefaults",
    ):
        table[a + name] = _cluster_wide
    return table


async def _cluster_wide(request: Any, principal: Principal, engine: Any) -> None:
    if not tenancy.every_tenant(principal.tenants):
        raise PermissionDenied(
            f"this call acts on every tenant; credential {principal.name!r} is scoped to "
            f'{principal.describe_tenants()} (it needs tenants ["*"])'
        )


# Every RPC of the three services has its line (tests/unit/coordinator/test_policy_table.py
# enumerates the service descriptors); a method missing here would still be refused
# to a scoped credential (``_cluster_wide``), but never silently.
_POLICIES = _policies()


# -- the interceptor ------------------------------------------------------------------------


async def take_first_message(request_iter: Any) -> None:
    """Read the client's opening message (briefly) before refusing a stream.

    A client that writes its first message as it opens the call (a worker's
    hello) and sees the call closed before that write completes reports a
    failed write (INTERNAL) instead of the refusal; taking the message first
    lets it see the status the coordinator sent.
    """
    try:
        async with asyncio.timeout(_FIRST_MESSAGE_WAIT_S):
            await anext(aiter(request_iter))
    except Exception:  # noqa: BLE001 - the refusal follows anyway
        return


_FIRST_MESSAGE_WAIT_S = 1.0


@dataclass
class AuthConfig:
    """How the coordinator authenticates callers."""

    # The token file (JSON lines); see the module docstring.
    tokens_file: str
    # Leave grpc.health.v1.Health open (load balancers and probes carry no token).
    open_health: bool = True
    # Leave server reflection open (grpcurl can list services without a token).
    open_reflection: bool = True
    # Leave KEDA's external scaler open: KEDA's gRPC client sends no token, and
    # the service answers only backlog counts of the job types it is asked about.
    open_scaler: bool = True


def _service_of(method: str) -> str:
    """The service of a full method name (``/package.Service/Method``)."""
    return method.split("/")[1] if method.count("/") >= 2 else method


def bearer_token(metadata: Iterable[tuple[str, Any]] | None) -> str | None:
    for key, value in metadata or ():
        if key == "authorization":
            text = value.decode() if isinstance(value, bytes) else str(value)
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


class TokenGate(ServerInterceptor):
    """Checks the bearer token and the role before the request is decoded.

    Both come from the call's metadata and method alone, so an unauthenticated
    caller is answered UNAUTHENTICATED (or PERMISSION_DENIED for a missing
    role) whatever bytes it sends, and never learns how its request decodes.
    Tenant-scope checks read the decoded request: they stay in
    ``AuthInterceptor``, after decoding. Install it inside the error-mapping
    interceptor and before the decoding one.
    """

    def __init__(self, auth: AuthInterceptor) -> None:
        self._auth = auth

    async def intercept_service(
        self,
        continuation: Continuation,
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        method = handler_call_details.method
        handler = await continuation(handler_call_details)
        if handler is None or self._auth.is_open(method):
            return handler
        metadata = handler_call_details.invocation_metadata
        authorize = self._auth.authorize

        def gated_unary(inner: Callable[..., Any]) -> Callable[..., Any]:
            async def unary_unary(request: Any, context: CallContext) -> Any:
                authorize(method, metadata)
                return await inner(request, context)

            return unary_unary

        def gated_stream(inner: Callable[..., Any]) -> Callable[..., Any] | None:
            if not yields(inner):
                return None

            async def stream_stream(request_iter: Any, context: CallContext) -> Any:
                try:
                    authorize(method, metadata)
                except (Unauthenticated, PermissionDenied):
                    await take_first_message(request_iter)
                    raise
                async for item in inner(request_iter, context):
                    yield item

            return stream_stream

        def gated_unary_stream(inner: Callable[..., Any]) -> Callable[..., Any]:
            # WatchJobEvents, and health's Watch when health is not open.
            async def admit(context: CallContext) -> None:
                try:
                    authorize(method, metadata)
                except (Unauthenticated, PermissionDenied) as e:
                    await context.abort(status_for(e) or grpc.StatusCode.PERMISSION_DENIED, str(e))

            async def unary_stream(request: Any, context: CallContext) -> Any:
                await admit(context)
                async for item in inner(request, context):
                    yield item

            async def unary_stream_writer(request: Any, context: CallContext) -> None:
                await admit(context)
                await inner(request, context)

            return unary_stream if yields(inner) else unary_stream_writer

        # No service of ours takes a client stream with a single answer
        # (AuthInterceptor refuses one).
        return rewrap(
            handler,
            unary_unary=gated_unary,
            stream_stream=gated_stream,
            unary_stream=gated_unary_stream,
        )


class AuthInterceptor(ServerInterceptor):
    """Authenticates every call, checks its role and tenant scope, and exposes the
    caller to servicers through ``current_principal()``.

    Errors are raised as domain errors, so install it inside the error-mapping
    interceptor (later in the server's interceptor list). ``gate`` checks the
    token and role before decoding (see ``TokenGate``).
    """

    def __init__(self, config: AuthConfig, engine: Any, book: TokenBook | None = None) -> None:
        self.config = config
        self.book = book or TokenBook(config.tokens_file)
        self._engine = engine
        open_services: set[str] = set()
        if config.open_health:
            open_services.add(HEALTH_SERVICE)
        if config.open_reflection:
            open_services.update(REFLECTION_SERVICES)
        if config.open_scaler:
            open_services.add(SCALER_SERVICE)
        self._open = frozenset(open_services)
        self.gate = TokenGate(self)

    @property
    def open_services(self) -> frozenset[str]:
        """Services callable without a token."""
        return self._open

    def is_open(self, method: str) -> bool:
        """``method`` belongs to a service callable without a token."""
        return _service_of(method) in self._open

    def policy_for(self, method: str) -> Policy:
        """The tenant-scope check of ``method``'s requests."""
        if _service_of(method) in _ANY_TOKEN_SERVICES:
            return _servicer_decides
        return _POLICIES.get(method, _cluster_wide)

    def unary_admission(
        self, method: str
    ) -> Callable[[Principal, Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]:
        """What a unary call of ``method`` runs once its token and role passed:
        the tenant-scope check of its decoded request, then ``run`` with the
        caller as ``current_principal()``."""
        policy = self.policy_for(method)
        engine = self._engine

        async def admit(
            principal: Principal, request: Any, run: Callable[[], Awaitable[Any]]
        ) -> Any:
            await policy(request, principal, engine)
            token = _principal.set(principal)
            try:
                return await run()
            finally:
                _principal.reset(token)

        return admit

    def authorize(self, method: str, metadata: Any) -> Principal:
        """The caller of ``method`` from its metadata: token, then role.

        Raises:
            Unauthenticated: no token, or one not in the token file.
            PermissionDenied: the credential lacks the service's role.
        """
        return self._authorize(method, metadata)

    def _authorize(self, method: str, metadata: Any) -> Principal:
        token = bearer_token(metadata)
        if token is None:
            raise Unauthenticated(
                "this coordinator requires a bearer token: send metadata "
                "'authorization: Bearer <token>'"
            )
        principal = self.book.authenticate(token)
        if principal is None:
            raise Unauthenticated("the bearer token is not known to this coordinator")
        service = _service_of(method)
        if service in _ANY_TOKEN_SERVICES or method in _ANY_TOKEN_METHODS:
            return principal
        role = _ROLE_OF_SERVICE.get(service, "admin")
        if role not in principal.roles:
            raise PermissionDenied(
                f"credential {principal.name!r} has role(s) {', '.join(sorted(principal.roles))}; "
                f"{service} needs the {role} role"
            )
        return principal

    async def intercept_service(
        self,
        continuation: Continuation,
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        method = handler_call_details.method
        handler = await continuation(handler_call_details)
        if handler is None or self.is_open(method):
            return handler
        metadata = handler_call_details.invocation_metadata
        policy = self.policy_for(method)
        engine = self._engine

        def checked_unary(inner: Callable[..., Any]) -> Callable[..., Any]:
            async def unary_unary(request: Any, context: CallContext) -> Any:
                principal = self._authorize(method, metadata)
                await policy(request, principal, engine)
                token = _principal.set(principal)
                try:
                    return await inner(request, context)
                finally:
                    _principal.reset(token)

            return unary_unary

        def checked_stream(inner: Callable[..., Any]) -> Callable[..., Any]:
            async def stream_stream(request_iter: Any, context: CallContext) -> Any:
                try:
                    principal = self._authorize(method, metadata)
                    if policy is _cluster_wide:
                        await policy(None, principal, engine)
                except (Unauthenticated, PermissionDenied):
                    await take_first_message(request_iter)
                    raise
                _principal.set(principal)
                async for item in inner(request_iter, context):
                    yield item

            return stream_stream

        def checked_unary_stream(inner: Callable[..., Any]) -> Callable[..., Any]:
            # grpc.health.v1.Health/Watch (when health is not open) and WatchJobEvents.
            async def admit(request: Any, context: CallContext) -> None:
                try:
                    principal = self._authorize(method, metadata)
                    await policy(request, principal, engine)
                except (Unauthenticated, PermissionDenied) as e:
                    await context.abort(status_for(e) or grpc.StatusCode.PERMISSION_DENIED, str(e))

            async def unary_stream(request: Any, context: CallContext) -> Any:
                try:
                    principal = self._authorize(method, metadata)
                    await policy(request, principal, engine)
                except (Unauthenticated, PermissionDenied) as e:
                    await context.abort(status_for(e) or grpc.StatusCode.PERMISSION_DENIED, str(e))
                _principal.set(principal)
                async for item in inner(request, context):
                    yield item

            async def unary_stream_writer(request: Any, context: CallContext) -> None:
                # The grpc.aio health servicer writes with context.write.
                await admit(request, context)
                await inner(request, context)

            return unary_stream if yields(inner) else unary_stream_writer

        def refused(inner: Callable[..., Any]) -> Callable[..., Any]:
            # No service of ours takes a client stream with a single answer; should
            # one appear, refuse it rather than let it through unchecked.
            async def refuse(request_iter: Any, context: CallContext) -> Any:
                await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} cannot be authorized")

            return refuse

        return rewrap(
            handler,
            unary_unary=checked_unary,
            stream_stream=checked_stream,
            unary_stream=checked_unary_stream,
            stream_unary=refused,
        )


__all__ = [
    "ALL_TENANTS",
    "ROLES",
    "AuthConfig",
    "AuthInterceptor",
    "Principal",
    "TokenBook",
    "TokenGate",
    "current_principal",
    "hash_token",
    "take_first_message",
    "parse_tokens",
    "tenant_scope",
]
