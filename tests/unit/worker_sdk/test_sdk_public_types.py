"""No public method of the SDK returns a protobuf message and no public value
read from an answer holds one except as ``raw``: what a caller reads is the SDK's own types
(``to_proto`` builds the contract's message on purpose and is the exception)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any

from google.protobuf.message import Message

import worker_sdk
from worker_sdk import _convert


def _messages(hint: Any) -> list[type]:
    """The protobuf message classes named anywhere in a type hint."""
    found: list[type] = []
    if isinstance(hint, type) and issubclass(hint, Message):
        found.append(hint)
    for arg in typing.get_args(hint):
        found.extend(_messages(arg))
    return found


def _hints(function: Any) -> dict[str, Any]:
    # Modules annotate with names imported only for type checking (JobView in
    # _context): resolve them against the SDK's public names.
    return typing.get_type_hints(function, localns={**vars(_convert), **vars(worker_sdk)})


def _public_classes() -> list[tuple[str, type]]:
    return [
        (name, obj)
        for name in worker_sdk.__all__
        if inspect.isclass(obj := getattr(worker_sdk, name))
    ]


def test_no_public_method_returns_protobuf() -> None:
    leaks = []
    for name, cls in _public_classes():
        for method, function in inspect.getmembers(cls, inspect.isfunction):
            if method.startswith("_") or method == "to_proto":
                continue
            returned = _hints(function).get("return")
            if _messages(returned):
                leaks.append(f"{name}.{method} -> {returned}")
    assert leaks == []


def test_no_value_read_from_the_coordinator_holds_protobuf_but_as_raw() -> None:
    # Values built by callers (JobRequest) may take a message as input; those
    # read from answers (they have ``from_proto``) hold the SDK's types.
    leaks, read = [], 0
    for name, cls in _public_classes():
        if not dataclasses.is_dataclass(cls) or not hasattr(cls, "from_proto"):
            continue
        read += 1
        hints = _hints(cls)
        for field in dataclasses.fields(cls):
            if field.name != "raw" and _messages(hints[field.name]):
                leaks.append(f"{name}.{field.name}: {hints[field.name]}")
    assert leaks == []
    assert read >= 15  # the check reaches the values it is about


def test_the_admin_values_are_the_sdks_own_and_documented() -> None:
    for name in (
        "Identity",
        "JobStats",
        "StatusCount",
        "WindowCounts",
        "WorkerView",
        "PauseRecord",
        "PauseScope",
        "PauseKind",
    ):
        value = getattr(worker_sdk, name)
        assert name in worker_sdk.__all__
        assert value.__module__.startswith("worker_sdk."), name
        assert not issubclass(value, Message)
        assert value.__doc__
    client = worker_sdk.AdminClient
    returns = {
        m: _hints(getattr(client, m))["return"]
        for m in ("who_am_i", "get_stats", "list_workers", "pause", "unpause", "list_pauses")
    }
    assert returns == {
        "who_am_i": worker_sdk.Identity,
        "get_stats": worker_sdk.JobStats,
        "list_workers": list[worker_sdk.WorkerView],
        "pause": worker_sdk.PauseRecord,
        "unpause": list[worker_sdk.PauseRecord],
        "list_pauses": list[worker_sdk.PauseRecord],
    }
