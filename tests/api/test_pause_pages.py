"""ListPauses pages its answer (the lifted history included), over real gRPC on
both stores; the SDK's list_pauses reads every page."""

from __future__ import annotations

import grpc
import pytest
from faults.harness import CoordinatorProcess

from coordinator.ids import new_id
from coordinator.model import PauseKind
from coordinator.store import open_store
from coordinator.store.migrate import upgrade
from coordinator.store.schema import pauses
from wfj_testing import SECOND, T0
from worker_sdk import AdminClient
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc

pytestmark = pytest.mark.e2e

STORED = 505  # more than one default page (500)


def _store_history(url: str) -> list[str]:
    """STORED pauses, created one second apart; all but the last five lifted."""
    store = open_store(url)
    try:
        upgrade(store)
        rows = [
            {
                "id": new_id(),
                "kind": int(PauseKind.JOB_TYPE),
                "tenant_id": "",
                "value": f"type-{i}",
                "actor": "ops",
                "reason": "",
                "created_at": T0 + i * SECOND,
                "lifted_at": T0 + i * SECOND + 1 if i < STORED - 5 else None,
                "lifted_by": "ops" if i < STORED - 5 else None,
            }
            for i in range(STORED)
        ]
        with store.tx() as conn:
            conn.execute(pauses.insert(), rows)
        return [r["id"] for r in rows]
    finally:
        store.dispose()


def test_list_pauses_pages_through_the_history(database: str, tmp_path) -> None:
    ids = _store_history(database)
    # The stored history is kept whatever its age (retention would purge it later on).
    coordinator = CoordinatorProcess(database, tmp_path, args=["--pause-retention", "forever"])
    try:
        with grpc.insecure_channel(coordinator.target) as channel:
            stub = apb_grpc.AdminServiceStub(channel)
            seen: list[str] = []
            token = ""
            pages = 0
            while True:
                page = stub.ListPauses(
                    apb.ListPausesRequest(include_lifted=True, page_size=200, page_token=token),
                    timeout=30,
                )
                assert len(page.pauses) <= 200
                seen += [p.id for p in page.pauses]
                pages += 1
                token = page.next_page_token
                if not token:
                    break
            assert (seen, pages) == (ids, 3)
            # The default page is 500.
            first = stub.ListPauses(apb.ListPausesRequest(include_lifted=True), timeout=30)
            assert len(first.pauses) == 500 and first.next_page_token
            for bad in (
                apb.ListPausesRequest(page_size=1001),
                apb.ListPausesRequest(page_size=-1),
                apb.ListPausesRequest(page_token="not-a-token"),
            ):
                with pytest.raises(grpc.RpcError) as info:
                    stub.ListPauses(bad, timeout=30)
                assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "page_" in info.value.details()
        with AdminClient(coordinator.target) as admin:
            assert [p.id for p in admin.list_pauses(include_lifted=True)] == ids
            assert [p.id for p in admin.list_pauses()] == ids[-5:]
    finally:
        coordinator.stop()
