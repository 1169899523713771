"""Every RPC of the contract has its line in the tenant-policy table.

A method missing from ``auth._POLICIES`` would fall to the every-tenant policy
unnoticed; the service descriptors are the list of methods, so a new RPC
fails here until its policy is chosen.
"""

from __future__ import annotations

from coordinator.api import auth
from workflowjobs.v1 import admin_service_pb2, scheduler_service_pb2, worker_service_pb2


def _contract_methods() -> set[str]:
    methods = set()
    for module in (scheduler_service_pb2, worker_service_pb2, admin_service_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            methods.update(f"/{service.full_name}/{m.name}" for m in service.methods)
    return methods


def test_every_rpc_has_a_tenant_policy() -> None:
    methods = _contract_methods()
    assert "/workflowjobs.v1.WorkerService/AcquireJobs" in methods  # read from the descriptors
    unlisted = sorted(methods - set(auth._POLICIES))
    assert unlisted == [], f"add these to _policies() in coordinator/api/auth.py: {unlisted}"


def test_the_policy_table_names_no_method_the_contract_lacks() -> None:
    assert sorted(set(auth._POLICIES) - _contract_methods()) == []


def test_every_service_of_the_contract_has_its_role() -> None:
    services = {m.split("/")[1] for m in _contract_methods()}
    assert services == set(auth._ROLE_OF_SERVICE)
