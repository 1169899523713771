"""gRPC core's own log lines stay off ``wfjobs``'s stderr unless asked for.

A TLS connection to a server that does not speak TLS fails the handshake;
gRPC core logs that (``I1201 ... ssl_transport_security.cc ... Handshake
failed``) straight to descriptor 2. The CLI explains the failure itself.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from wfj_testing import subprocess_env

WFJOBS = Path(sys.executable).parent / "wfjobs"


@pytest.fixture
def not_tls() -> Iterator[str]:
    """A plaintext gRPC server on loopback (no services: the handshake fails first)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


def _stats_over_tls(target: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(WFJOBS), "--target", target, "--tls", "--timeout", "10", "stats"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**subprocess_env(without=("GRPC_VERBOSITY", "GRPC_TRACE")), **env},
    )


def test_grpc_core_log_lines_stay_off_stderr(not_tls: str) -> None:
    out = _stats_over_tls(not_tls)
    assert out.returncode == 5, out.stderr
    assert out.stderr.startswith(f"wfjobs: cannot reach the coordinator at {not_tls}"), out.stderr
    assert "The TLS handshake failed" in out.stderr
    assert "ssl_transport_security" not in out.stderr, out.stderr


def test_grpc_verbosity_brings_them_back(not_tls: str) -> None:
    out = _stats_over_tls(not_tls, GRPC_VERBOSITY="INFO")
    assert out.returncode == 5, out.stderr
    assert "ssl_transport_security" in out.stderr, out.stderr
    assert "wfjobs: cannot reach the coordinator" in out.stderr
