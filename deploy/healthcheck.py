"""Container health check: asks the coordinator's standard gRPC health service.

Used by the images' HEALTHCHECK and usable as a Kubernetes exec probe when the
gRPC port requires TLS (the kubelet's built-in ``grpc:`` probe speaks plaintext
only). Exits 0 when the server answers SERVING, 1 otherwise, so it fits any
orchestrator that reads exit codes.

Settings, each a flag with an environment fallback:

- ``--target`` / ``WFJOBS_HEALTHCHECK_TARGET``: where to connect. Default:
  127.0.0.1 on the port of ``WFJOBS_LISTEN`` (50051 if unset).
- ``--service`` / ``WFJOBS_HEALTHCHECK_SERVICE``: the health service name to
  query; empty (the default) means the server as a whole.
- ``--timeout`` seconds (default 3).
- ``--ca``, ``--cert``, ``--key`` / ``WFJOBS_HEALTHCHECK_CA``, ``..._CERT``,
  ``..._KEY``: PEM files. Giving ``--ca`` switches to TLS; ``--cert`` and
  ``--key`` add a client certificate for mTLS.
- ``--server-name``: the name to verify the server certificate against when
  it differs from the target host (``localhost`` is a common SAN).
"""

from __future__ import annotations

import argparse
import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def default_target(listen: str | None) -> str:
    """Returns 127.0.0.1:<port> for a listen address such as ``0.0.0.0:50051``."""
    port = "50051"
    if listen:
        port = listen.rsplit(":", 1)[-1] or port
    return f"127.0.0.1:{port}"


def _read(path: str | None) -> bytes | None:
    if not path:
        return None
    with open(path, "rb") as pem:
        return pem.read()


def check(
    target: str,
    service: str = "",
    timeout: float = 3.0,
    ca: str | None = None,
    cert: str | None = None,
    key: str | None = None,
    server_name: str | None = None,
) -> str:
    """Returns the serving status name (``SERVING``, ``NOT_SERVING``, …) or raises grpc.RpcError."""
    options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
    if ca:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read(ca), private_key=_read(key), certificate_chain=_read(cert)
        )
        channel = grpc.secure_channel(target, credentials, options=options)
    else:
        channel = grpc.insecure_channel(target, options=options)
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--target",
        default=env.get("WFJOBS_HEALTHCHECK_TARGET") or default_target(env.get("WFJOBS_LISTEN")),
    )
    parser.add_argument("--service", default=env.get("WFJOBS_HEALTHCHECK_SERVICE", ""))
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--ca", default=env.get("WFJOBS_HEALTHCHECK_CA"))
    parser.add_argument("--cert", default=env.get("WFJOBS_HEALTHCHECK_CERT"))
    parser.add_argument("--key", default=env.get("WFJOBS_HEALTHCHECK_KEY"))
    parser.add_argument("--server-name", default=env.get("WFJOBS_HEALTHCHECK_SERVER_NAME"))
    args = parser.parse_args(argv)
    try:
        status = check(
            args.target, args.service, args.timeout, args.ca, args.cert, args.key, args.server_name
        )
    except grpc.RpcError as error:
        print(f"unhealthy: {args.target}: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"unhealthy: cannot read a TLS file: {error}", file=sys.stderr)
        return 1
    if status != "SERVING":
        print(f"unhealthy: {args.target}: {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
