"""docs/protocol.md and the kit agree: every message of worker_service.proto is
described, and every scenario is in its conformance table under a section
that exists (a rule in one and not the other is a defect)."""

from __future__ import annotations

import re

from conformance import scenarios
from conformance.kit import REPO

from workflowjobs.v1 import worker_service_pb2

DOC = (REPO / "docs" / "protocol.md").read_text()


def test_every_message_and_enum_of_the_worker_service_is_described() -> None:
    names = [*worker_service_pb2.DESCRIPTOR.message_types_by_name]
    names += [*worker_service_pb2.DESCRIPTOR.enum_types_by_name]
    names += [
        m.name for m in worker_service_pb2.DESCRIPTOR.services_by_name["WorkerService"].methods
    ]
    missing = [name for name in names if not re.search(rf"\b{name}\b", DOC)]
    assert missing == []


def test_every_scenario_is_in_the_conformance_table_under_existing_sections() -> None:
    headings = set(re.findall(r"^## (.+)$", DOC, flags=re.M))
    table = DOC.split("## Conformance", 1)[1]
    rows = dict(re.findall(r"^\| `(test_\w+)` \| (.+) \|$", table, flags=re.M))
    tests = {name for name in dir(scenarios) if name.startswith("test_")}
    assert set(rows) == tests
    for name, sections in rows.items():
        for section in sections.split(", "):
            assert section in headings, f"{name} cites a section protocol.md lacks: {section}"
    # Each scenario's banner in scenarios.py names sections of the doc too.
    source = (REPO / "tests" / "conformance" / "scenarios.py").read_text()
    for banner in re.findall(r"^# -- protocol\.md (.+?) -+$", source, flags=re.M):
        for section in re.findall(r'"([^"]+)"', banner):
            assert section in headings, f"scenarios.py cites a missing section: {section}"
