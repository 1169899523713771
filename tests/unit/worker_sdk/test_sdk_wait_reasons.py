"""ExplainJob's reasons come back as the SDK's WaitReason, not protobuf: they
print as ``wfjobs jobs explain`` does, their times are datetimes, and their
kinds still compare equal to the contract's numbers."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from worker_sdk import WaitReason, WaitReasonKind
from workflowjobs.v1 import admin_service_pb2 as apb


def test_a_reason_reads_as_a_person_would() -> None:
    until = Timestamp()
    until.FromDatetime(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))
    reason = WaitReason.from_proto(
        apb.WaitReason(
            kind=apb.WaitReason.KIND_RATE_LIMIT,
            message="rate limited by job type noop until 12:00:00.000",
            until=until,
            limit=10,
        )
    )
    assert reason.kind is WaitReasonKind.RATE_LIMIT
    assert reason.kind == apb.WaitReason.KIND_RATE_LIMIT
    assert reason.until == datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert (reason.limit, reason.count, reason.pause_id) == (10, 0, "")
    assert str(reason) == "rate_limit: rate limited by job type noop until 12:00:00.000"
    assert "seconds:" not in repr(reason)  # no protobuf text inside
    assert WaitReason.from_proto(apb.WaitReason(kind=apb.WaitReason.KIND_NO_WORKER)).until is None


def test_every_kind_of_the_contract_has_a_name() -> None:
    for name, number in apb.WaitReason.Kind.items():
        assert WaitReasonKind(number).name == name.removeprefix("KIND_")
