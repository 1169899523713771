"""Channel construction and per-call metadata shared by the worker and the clients."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Sequence
from typing import Any, Self, TypedDict

import grpc

from workflowjobs.contract import INT32_MAX, MAX_MESSAGE_BYTES

from . import _tracing
from ._connection import resolve_connection
from ._errors import error_from_rpc

__all__ = ["BlockingClient", "ChannelConfig", "ClientOptions", "check_target"]

Metadata = tuple[tuple[str, str], ...]

# Name-resolver schemes gRPC understands; what follows them is left to gRPC.
_SCHEMES = ("dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:", "vsock:", "xds:", "google-c2p:")
_HOST = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$")


def check_target(target: str) -> str:
    """Refuse a ``host:port`` that can never connect, instead of retrying it forever.

    Accepted: ``host``, ``host:port``, ``[ipv6]:port``, ``ipv6`` and any target
    with a gRPC resolver scheme (``dns:///…``, ``unix:…``, ``ipv4:…``, …).

    Returns:
        ``target`` unchanged.

    Raises:
        ValueError: The host is empty or has characters no host name has, or
            the port is not a number from 1 to 65535.
    """
    if not isinstance(target, str) or not target.strip():
        raise ValueError("the coordinator target is empty; expected host:port")
    if target.startswith(_SCHEMES):
        return target
    host, port = target, None
    if target.startswith("["):
        end = target.find("]")
        if end < 0:
            raise ValueError(f"target {target!r}: '[' without ']'; expected [ipv6]:port")
        host, rest = target[1:end], target[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"target {target!r}: expected [ipv6]:port")
            port = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"target {target!r}: {host!r} is not an IPv6 address") from None
    elif target.count(":") > 1:
        try:
            ipaddress.IPv6Address(target)
        except ValueError:
            raise ValueError(
                f"target {target!r} is not host:port (write an IPv6 address as [addr]:port)"
            ) from None
        return target
    else:
        host, _, port = target.partition(":")
        if ":" not in target:
            port = None
        if not host:
            raise ValueError(f"target {target!r} has no host; expected host:port")
        if not _HOST.match(host):
            raise ValueError(f"target {target!r}: {host!r} is not a host name or address")
    if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
        raise ValueError(f"target {target!r}: the port {port!r} is not a number from 1 to 65535")
    return target


MAX_RECEIVE_MESSAGE_BYTES = MAX_MESSAGE_BYTES
"""Receive limit of every channel the SDK opens unless its options set one.

gRPC's default (4 MiB) is smaller than a batch of jobs can be: a job may carry
a payload of 1 MiB or more. 64 MiB is the coordinator's own send limit, so it
covers the largest message, and thus the largest job, a coordinator sends. The
worker announces its limit in the hello and the coordinator sizes batches to it.
"""
_RECEIVE_OPTION = "grpc.max_receive_message_length"
KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # gRPC core waits for a ping's ack this long (keepalive_timeout_ms alone is not enough).
    ("grpc.http2.ping_timeout_ms", 5_000),
)
"""Keepalive of every channel the SDK opens (an option the caller sets wins).

A ping every 10 s, each answered within 5 s or the connection is closed: a path
to the coordinator that goes silent without a reset (a stalled NAT, a dead
peer) is found within about 15 s, and the worker reconnects over a new
connection instead of waiting on a dead stream. Pings go whether or not calls
or data are in flight; the coordinator permits them (``coordinator/api/server.py``).
"""
# Channel options that already choose the load-balancing policy.
_POLICY_OPTIONS = frozenset({"grpc.service_config", "grpc.lb_policy_name"})


class ChannelConfig:
    """How to reach the coordinator.

    A setting not given is read as ``wfjobs`` reads it (see
    :mod:`worker_sdk._connection`): ``WFJOBS_TARGET``, ``WFJOBS_CA`` /
    ``WFJOBS_TLS`` / ``WFJOBS_CERT`` / ``WFJOBS_KEY``, ``WFJOBS_TOKEN`` /
    ``WFJOBS_TOKEN_FILE``, ``WFJOBS_LOAD_BALANCING``, then the profile
    (``WFJOBS_PROFILE``, else ``default``) of ``~/.config/wfjobs/config.toml``,
    then the defaults (127.0.0.1:50051, plaintext, no token, pick_first).

    Args:
        target: The coordinator's address: ``host:port``, or any gRPC target
            (``dns:///coordinators:50051``, ``ipv4:10.0.0.1:50051,10.0.0.2:50051``).
        credentials: TLS/mTLS channel credentials; None: from the settings
            above (plaintext when they name no TLS).
        token: Bearer token sent as ``authorization: Bearer <token>``; None:
            from the settings above.
        metadata: Extra metadata sent with every call.
        options: Extra gRPC channel options.
        load_balancing: gRPC load-balancing policy across the addresses the
            target resolves to: ``round_robin`` spreads calls and streams over
            every coordinator behind one name; ``pick_first`` (gRPC's default)
            uses one. Set as the channel's service config; ignored when
            ``options`` set ``grpc.service_config`` or ``grpc.lb_policy_name``.

    Raises:
        ValueError: The target can never connect, or a setting is unusable
            (``ConfigError``: unknown profile, unreadable file, unknown policy).
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        options: Sequence[tuple[str, object]] = (),
        load_balancing: str | None = None,
    ) -> None:
        settings = resolve_connection(
            {"target": target, "token": token, "load_balancing": load_balancing}
        )
        self.target = check_target(settings.target)
        self.credentials = credentials if credentials is not None else settings.credentials()
        pairs = [(key.lower(), value) for key, value in metadata]
        if settings.token:
            pairs.append(("authorization", f"Bearer {settings.token}"))
        self.metadata: Metadata = tuple(pairs)
        self.options = list(options)
        if not any(key == _RECEIVE_OPTION for key, _ in self.options):
            self.options.append((_RECEIVE_OPTION, MAX_RECEIVE_MESSAGE_BYTES))
        given = {key for key, _ in self.options}
        self.options.extend(option for option in KEEPALIVE_OPTIONS if option[0] not in given)
        self.load_balancing = settings.load_balancing
        if self.load_balancing and not any(key in _POLICY_OPTIONS for key, _ in self.options):
            config: dict[str, object] = {"loadBalancingConfig": [{self.load_balancing: {}}]}
            self.options.append(("grpc.service_config", json.dumps(config)))

    @property
    def max_receive_message_bytes(self) -> int:
        """The channel's receive limit in bytes (what the worker's hello announces)."""
        value = next(int(v) for k, v in self.options if k == _RECEIVE_OPTION)  # type: ignore[call-overload]
        return value if 0 <= value <= INT32_MAX else INT32_MAX  # -1: unlimited

    def sync_channel(self) -> grpc.Channel:
        """Open a blocking channel."""
        if self.credentials is not None:
            return grpc.secure_channel(self.target, self.credentials, options=self.options)
        return grpc.insecure_channel(self.target, options=self.options)

    def aio_channel(self) -> grpc.aio.Channel:
        """Open an asyncio channel (call from inside the event loop)."""
        if self.credentials is not None:
            return grpc.aio.secure_channel(self.target, self.credentials, options=self.options)
        return grpc.aio.insecure_channel(self.target, options=self.options)


class ClientOptions(TypedDict, total=False):
    """Keyword options of the blocking clients (see :class:`BlockingClient`)."""

    credentials: grpc.ChannelCredentials | None
    token: str | None
    metadata: Sequence[tuple[str, str]]
    timeout: float | None
    channel_options: Sequence[tuple[str, Any]]
    channel: grpc.Channel | None
    load_balancing: str | None


class BlockingClient:
    """Channel ownership and call plumbing shared by the blocking clients.

    Args:
        target: The coordinator's address (None: ``WFJOBS_TARGET``, the
            profile, else 127.0.0.1:50051; see :class:`ChannelConfig`).
        credentials: TLS/mTLS channel credentials (None: ``WFJOBS_CA`` …, the
            profile, else plaintext).
        token: Bearer token (None: ``WFJOBS_TOKEN``, ``WFJOBS_TOKEN_FILE``, the profile).
        metadata: Extra metadata sent with every call.
        timeout: Default deadline of each call, in seconds (None: no deadline).
        channel_options: Extra gRPC channel options.
        channel: Use this channel instead of opening one (it is not closed by ``close``).
        load_balancing: gRPC load-balancing policy (``round_robin``; None:
            ``WFJOBS_LOAD_BALANCING``, the profile, else gRPC's pick_first).
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        timeout: float | None = 30.0,
        channel_options: Sequence[tuple[str, Any]] = (),
        channel: grpc.Channel | None = None,
        load_balancing: str | None = None,
    ) -> None:
        config = ChannelConfig(
            target,
            credentials=credentials,
            token=token,
            metadata=metadata,
            options=channel_options,
            load_balancing=load_balancing,
        )
        self._metadata = config.metadata
        self._owns_channel = channel is None
        self._channel = channel if channel is not None else config.sync_channel()
        self._timeout = timeout

    def close(self) -> None:
        """Close the channel (when this client opened it)."""
        if self._owns_channel:
            self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: Any, request: Any, timeout: float | None = None) -> Any:
        try:
            return method(
                request,
                timeout=timeout if timeout is not None else self._timeout,
                metadata=_tracing.outgoing_metadata(self._metadata),
            )
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc
