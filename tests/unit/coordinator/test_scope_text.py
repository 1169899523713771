"""A pause scope is worded the same by the coordinator (ExplainJob, errors) and by
the client (CLI, dashboard): one formatter each side, and they agree on every
kind the contract declares, the tenant special case included."""

from __future__ import annotations

import pytest

from coordinator.engine.pauses import pause_scope_text
from coordinator.model import LimitKind, PauseKind, PauseScope, scope_text
from worker_sdk import _admin_types
from worker_sdk.cli.output import scope_text as cli_scope_text
from workflowjobs.v1 import admin_service_pb2 as apb

# A value per kind; a category travels by its number and is worded by its name.
VALUES = {"TENANT": "", "CATEGORY": "3"}


@pytest.mark.parametrize("name", [n for n in apb.PauseScopeKind.keys() if "UNSPECIFIED" not in n])
@pytest.mark.parametrize("tenant", ["acme", ""])
def test_coordinator_and_client_word_every_pause_scope_alike(name: str, tenant: str) -> None:
    number = apb.PauseScopeKind.Value(name)
    kind = PauseKind(number)
    value = VALUES.get(kind.name, "v-1")
    server = pause_scope_text(PauseScope(kind, tenant, value))
    client = _admin_types.pause_scope_text(
        apb.PauseScope(kind=number, tenant_id=tenant, value=value)
    )
    assert server == client


def test_the_words_of_each_kind() -> None:
    scoped = PauseScope(PauseKind.JOB_TYPE, "acme", "send-email")
    assert pause_scope_text(scoped) == "job type send-email (tenant acme)"
    assert pause_scope_text(scoped, with_tenant=False) == "job type send-email"
    assert pause_scope_text(PauseScope(PauseKind.TENANT, "acme")) == "tenant acme"
    assert pause_scope_text(PauseScope(PauseKind.TENANT, "acme"), with_tenant=False) == (
        "tenant acme"
    )
    assert pause_scope_text(PauseScope(PauseKind.CATEGORY, "", "3")) == "category integration"
    assert scope_text(LimitKind.CONCURRENCY_KEY, "k") == "concurrency key k"


def test_the_client_styles() -> None:
    scope = apb.PauseScope(kind=apb.PAUSE_SCOPE_KIND_JOB_TYPE, tenant_id="acme", value="x")
    assert cli_scope_text(scope) == "job-type x (tenant acme)"
    asked = {"in_tenant": " in tenant {}", "every_tenant": " in every tenant"}
    assert _admin_types.pause_scope_text(scope, **asked) == "job type x in tenant acme"
    scope.tenant_id = ""
    assert _admin_types.pause_scope_text(scope, **asked) == "job type x in every tenant"
    tenant = apb.PauseScope(kind=apb.PAUSE_SCOPE_KIND_TENANT, tenant_id="acme")
    assert cli_scope_text(tenant) == _admin_types.pause_scope_text(tenant, **asked) == "tenant acme"
