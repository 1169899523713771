"""Who an operator action is recorded as, and WhoAmI, over real gRPC on both stores.

With authentication on, a pause and its lifting are recorded under the
calling credential's name, whatever actor the request claims (a claim that
differs is kept in the reason as a note). Without authentication the
client's actor is all there is, and WhoAmI says the coordinator checks no one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from faults.harness import CoordinatorProcess
from security.conftest import write_tokens

from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import admin_service_pb2_grpc as apb_grpc

pytestmark = pytest.mark.e2e

CREDENTIALS = {
    "audit-root-secret": (["admin", "scheduler"], ["*"], None),
    "audit-acme-secret": (["admin"], ["acme"], None),
    "audit-worker-secret": (["worker"], ["acme", "globex"], ["mail"]),
}


def auth(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


def _database(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, object]:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'audit.db'}", None
    request.getfixturevalue("pg_database")
    from conftest import new_pg_database

    return new_pg_database("wfj_audit")


@pytest.fixture(params=["sqlite", "postgres"])
def secured(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[apb_grpc.AdminServiceStub]:
    tokens = tmp_path / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    url, drop = _database(request, tmp_path)
    process = CoordinatorProcess(url, tmp_path, env={"WFJOBS_TOKENS_FILE": str(tokens)})
    try:
        with grpc.insecure_channel(process.target) as channel:
            yield apb_grpc.AdminServiceStub(channel)
    finally:
        process.stop()
        if drop is not None:
            drop()  # type: ignore[operator]


@pytest.fixture(params=["sqlite", "postgres"])
def open_coordinator(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[apb_grpc.AdminServiceStub]:
    url, drop = _database(request, tmp_path)
    process = CoordinatorProcess(url, tmp_path)
    try:
        with grpc.insecure_channel(process.target) as channel:
            yield apb_grpc.AdminServiceStub(channel)
    finally:
        process.stop()
        if drop is not None:
            drop()  # type: ignore[operator]


def definition_scope(tenant: str = "acme") -> apb.PauseScope:
    return apb.PauseScope(
        kind=apb.PAUSE_SCOPE_KIND_DEFINITION, tenant_id=tenant, value="billing-flow"
    )


def test_a_pause_is_recorded_under_the_callers_credential_not_its_claim(secured) -> None:
    record = secured.Pause(
        apb.PauseRequest(scope=definition_scope(), actor="mallory", reason="ledger maintenance"),
        metadata=auth("audit-acme-secret"),
        timeout=10,
    ).pause
    assert record.actor == "audit-acme"
    assert record.reason == "ledger maintenance (client-sent actor: mallory)"
    listed = secured.ListPauses(
        apb.ListPausesRequest(tenant_id="acme"), metadata=auth("audit-root-secret"), timeout=10
    ).pauses
    assert [(p.id, p.actor) for p in listed] == [(record.id, "audit-acme")]

    lifted = secured.Unpause(
        apb.UnpauseRequest(scope=definition_scope(), actor="mallory"),
        metadata=auth("audit-root-secret"),
        timeout=10,
    ).lifted
    assert [(p.id, p.lifted_by) for p in lifted] == [(record.id, "audit-root")]
    history = secured.ListPauses(
        apb.ListPausesRequest(include_lifted=True, tenant_id="acme"),
        metadata=auth("audit-root-secret"),
        timeout=10,
    ).pauses
    assert [(p.actor, p.lifted_by) for p in history] == [("audit-acme", "audit-root")]

    # A client naming its own credential (or nothing) adds no note.
    again = secured.Pause(
        apb.PauseRequest(scope=definition_scope(), actor="audit-root", reason="again"),
        metadata=auth("audit-root-secret"),
        timeout=10,
    ).pause
    assert (again.actor, again.reason) == ("audit-root", "again")
    bare = secured.Pause(
        apb.PauseRequest(scope=definition_scope("globex")),
        metadata=auth("audit-root-secret"),
        timeout=10,
    ).pause
    assert (bare.actor, bare.reason) == ("audit-root", "")


def test_who_am_i_answers_each_credential_its_own_scope(secured) -> None:
    root = secured.WhoAmI(apb.WhoAmIRequest(), metadata=auth("audit-root-secret"), timeout=10)
    assert (root.authenticated, root.name) == (True, "audit-root")
    assert (list(root.roles), list(root.tenants), list(root.job_types)) == (
        ["admin", "scheduler"],
        ["*"],
        [],
    )
    acme = secured.WhoAmI(apb.WhoAmIRequest(), metadata=auth("audit-acme-secret"), timeout=10)
    assert (acme.name, list(acme.roles), list(acme.tenants)) == ("audit-acme", ["admin"], ["acme"])
    # Any known token may ask, even one without the admin role.
    worker = secured.WhoAmI(apb.WhoAmIRequest(), metadata=auth("audit-worker-secret"), timeout=10)
    assert (worker.name, list(worker.roles), list(worker.tenants), list(worker.job_types)) == (
        "audit-worker",
        ["worker"],
        ["acme", "globex"],
        ["mail"],
    )
    # ... while the rest of AdminService still needs it.
    with pytest.raises(grpc.RpcError) as refused:
        secured.GetStats(apb.GetStatsRequest(), metadata=auth("audit-worker-secret"), timeout=10)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    for metadata in (None, auth("not-a-token")):
        with pytest.raises(grpc.RpcError) as unknown:
            secured.WhoAmI(apb.WhoAmIRequest(), metadata=metadata, timeout=10)
        assert unknown.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_without_authentication_the_clients_actor_is_recorded(open_coordinator) -> None:
    me = open_coordinator.WhoAmI(apb.WhoAmIRequest(), timeout=10)
    assert (me.authenticated, me.name, list(me.tenants)) == (False, "", ["*"])
    assert set(me.roles) == {"admin", "scheduler", "worker"}
    record = open_coordinator.Pause(
        apb.PauseRequest(scope=definition_scope(), actor="alice", reason="deploy"), timeout=10
    ).pause
    assert (record.actor, record.reason) == ("alice", "deploy")
    lifted = open_coordinator.Unpause(
        apb.UnpauseRequest(scope=definition_scope(), actor="bob"), timeout=10
    ).lifted
    assert [p.lifted_by for p in lifted] == ["bob"]
