"""Tenant weights read back over real gRPC (ListTenantWeights), on both stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from faults.harness import CoordinatorProcess
from security.conftest import write_tokens

from worker_sdk import AdminClient, PermissionDeniedError, TenantWeight, TenantWeights

pytestmark = pytest.mark.e2e

CREDENTIALS = {
    "weights-root-secret": (["admin"], ["*"], None),
    "weights-acme-secret": (["admin"], ["acme"], None),
}


@pytest.fixture(params=["sqlite", "postgres"])
def coordinator(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CoordinatorProcess]:
    tokens = tmp_path / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    drop = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'weights.db'}"
    else:
        request.getfixturevalue("pg_database")
        from conftest import new_pg_database

        url, drop = new_pg_database("wfj_weights")
    process = CoordinatorProcess(url, tmp_path, env={"WFJOBS_TOKENS_FILE": str(tokens)})
    try:
        yield process
    finally:
        process.stop()
        if drop is not None:
            drop()


def weights(admin: AdminClient, tenant_id: str = "") -> list[tuple[str, int]]:
    return [(w.tenant_id, w.weight) for w in admin.list_tenant_weights(tenant_id=tenant_id).weights]


def test_weights_set_are_read_back_and_survive_a_restart(coordinator) -> None:
    with AdminClient(coordinator.target, token="weights-root-secret") as root:
        assert root.list_tenant_weights().default_weight == 1
        assert weights(root) == []
        root.set_tenant_weight("globex", 2)
        root.set_tenant_weight("acme", 5)
        root.set_tenant_weight("globex", 3)
        assert weights(root) == [("acme", 5), ("globex", 3)]
        assert weights(root, "globex") == [("globex", 3)]
        assert weights(root, "initech") == []
        listed = root.list_tenant_weights()
        assert isinstance(listed, TenantWeights)
        assert listed.weights == [TenantWeight("acme", 5), TenantWeight("globex", 3)]
    coordinator.stop()
    coordinator.start()
    with AdminClient(coordinator.target, token="weights-root-secret") as root:
        assert weights(root) == [("acme", 5), ("globex", 3)]


def test_a_tenant_scoped_admin_reads_only_its_tenants_weight(coordinator) -> None:
    with (
        AdminClient(coordinator.target, token="weights-root-secret") as root,
        AdminClient(coordinator.target, token="weights-acme-secret") as acme,
    ):
        root.set_tenant_weight("acme", 4)
        root.set_tenant_weight("globex", 7)
        assert weights(acme) == [("acme", 4)]
        with pytest.raises(PermissionDeniedError) as refused:
            acme.list_tenant_weights(tenant_id="globex")
        assert refused.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert "tenant 'globex'" in refused.value.message
