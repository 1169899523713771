"""Channel construction and per-call metadata shared by the worker and the clients."""

from __future__ import annotations

import os
from collections.abc import Sequence

import grpc

__all__ = ["ChannelConfig"]

Metadata = tuple[tuple[str, str], ...]


class ChannelConfig:
    """How to reach the coordinator.

    Args:
        target: ``host:port`` of the coordinator.
        credentials: TLS/mTLS channel credentials; None for plaintext.
        token: Bearer token sent as ``authorization: Bearer <token>``; when
            None, the ``WFJOBS_TOKEN`` environment variable is used if set.
        metadata: Extra metadata sent with every call.
        options: Extra gRPC channel options.
    """

    def __init__(
        self,
        target: str,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        options: Sequence[tuple[str, object]] = (),
    ) -> None:
        self.target = target
        self.credentials = credentials
        pairs = [(key.lower(), value) for key, value in metadata]
        if token is None:
            token = os.environ.get("WFJOBS_TOKEN") or None
        if token:
            pairs.append(("authorization", f"Bearer {token}"))
        self.metadata: Metadata = tuple(pairs)
        self.options = list(options)

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
