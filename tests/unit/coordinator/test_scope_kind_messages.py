"""An unknown scope kind on the wire is refused with a message naming every kind
the model has (coordinator/api/convert.py)."""

from __future__ import annotations

import pytest

from coordinator.api.convert import limit_from_proto, limit_kind_from_proto, scope_from_proto
from coordinator.errors import InvalidArgument
from workflowjobs.v1 import admin_service_pb2 as apb

PAUSE_KINDS = "TENANT, DEFINITION, INSTANCE, JOB_TYPE or CATEGORY"
LIMIT_KINDS = "TENANT, JOB_TYPE, DEFINITION, CONCURRENCY_KEY or CATEGORY"


@pytest.mark.parametrize("kind", [0, 42])
def test_an_unknown_kind_is_refused_naming_every_kind(kind: int) -> None:
    with pytest.raises(InvalidArgument) as pause:
        scope_from_proto(apb.PauseScope(kind=kind, value="x"))
    assert str(pause.value) == f"scope.kind must be {PAUSE_KINDS}"
    with pytest.raises(InvalidArgument) as limit:
        limit_from_proto(apb.ConcurrencyLimit(kind=kind, value="x", max_running=1))
    assert str(limit.value) == f"limit.kind must be {LIMIT_KINDS}"
    with pytest.raises(InvalidArgument) as rate:
        limit_kind_from_proto(kind, "kind")
    assert str(rate.value) == f"kind must be {LIMIT_KINDS}"


def test_the_messages_name_the_contract_s_kinds() -> None:
    for enum_type, prefix, text in (
        (apb.PauseScopeKind, "PAUSE_SCOPE_KIND_", PAUSE_KINDS),
        (apb.LimitScopeKind, "LIMIT_SCOPE_KIND_", LIMIT_KINDS),
    ):
        names = [n.removeprefix(prefix) for n in enum_type.keys()[1:]]
        assert text == f"{', '.join(names[:-1])} or {names[-1]}"
