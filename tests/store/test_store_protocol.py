"""The concrete store implements the ``Store`` protocol exactly: every listed query
under the same parameters, and nothing public that the list leaves out."""

from __future__ import annotations

import inspect

from coordinator.store import SqlStore, Store


def _protocol_members() -> set[str]:
    names = {n for n in vars(Store) if not n.startswith("_")}
    names |= {n for n in Store.__annotations__ if not n.startswith("_")}
    return names


def _public_members(store: SqlStore) -> set[str]:
    return {n for n in dir(store) if not n.startswith("_")}


def _parameters(fn: object) -> list[tuple[str, object, object]]:
    params = list(inspect.signature(fn).parameters.values())  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in params]


def test_the_protocol_lists_every_query_of_the_concrete_store(store: SqlStore) -> None:
    unlisted = _public_members(store) - _protocol_members()
    assert unlisted == set(), f"public on SqlStore but missing from store/protocol.py: {unlisted}"


def test_the_concrete_store_implements_every_protocol_member(store: SqlStore) -> None:
    missing = _protocol_members() - _public_members(store)
    assert missing == set(), f"listed in store/protocol.py but not implemented: {missing}"


def test_every_query_takes_the_parameters_the_protocol_names() -> None:
    differ = {}
    for name, member in vars(Store).items():
        if name.startswith("_") or not callable(member):
            continue
        concrete = getattr(SqlStore, name)
        if _parameters(member) != _parameters(concrete):
            differ[name] = (_parameters(member), _parameters(concrete))
    assert differ == {}


def test_attributes_the_protocol_declares_are_plain_values(store: SqlStore) -> None:
    for name in Store.__annotations__:
        assert not callable(getattr(store, name)), name


# Every query answers a typed value: a dataclass of coordinator/model.py (as
# ``PauseRecord``) or, for rows read as stored, a protocol of store/rows.py.
def test_no_query_answers_untyped_rows() -> None:
    untyped = {
        name
        for name, member in vars(Store).items()
        if not name.startswith("_")
        and callable(member)
        and "Any" in str(inspect.signature(member).return_annotation)
    }
    assert untyped == set()
