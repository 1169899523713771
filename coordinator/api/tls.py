"""TLS and mutual TLS for the coordinator's gRPC port."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc


@dataclass
class TlsConfig:
    """PEM files for the server's certificate, and for mTLS the client CA."""

    # The server's certificate chain (PEM).
    cert_file: str
    # The server's private key (PEM).
    key_file: str
    # When set, clients must present a certificate signed by this CA (mTLS).
    client_ca_file: str | None = None

    @property
    def mutual(self) -> bool:
        return bool(self.client_ca_file)

    def server_credentials(self) -> grpc.ServerCredentials:
        """Credentials for ``add_secure_port``; a missing file raises ``OSError``."""
        key = Path(self.key_file).read_bytes()
        cert = Path(self.cert_file).read_bytes()
        client_ca = Path(self.client_ca_file).read_bytes() if self.client_ca_file else None
        return grpc.ssl_server_credentials(
            [(key, cert)],
            root_certificates=client_ca,
            require_client_auth=client_ca is not None,
        )


__all__ = ["TlsConfig"]
