"""docs/api.md is what protos/api_reference.py makes of the protos' comments,
and every RPC has a comment to show there."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from wfj_testing import REPO


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "api_reference", REPO / "protos" / "api_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_page_is_what_the_protos_produce() -> None:
    page = (REPO / "docs" / "api.md").read_text()
    assert _generator().render() == page, "docs/api.md is stale: run make proto"


def test_every_service_and_rpc_is_on_the_page_with_its_comment() -> None:
    generator = _generator()
    files = [f for f in generator.descriptor_set().file if f.package == generator.PACKAGE]
    page = (REPO / "docs" / "api.md").read_text()
    uncommented = []
    for file in files:
        comments = generator._comments(file)
        for s, service in enumerate(file.service):
            assert f"### {service.name}\n" in page
            for m, method in enumerate(service.method):
                assert f"#### {service.name}.{method.name}\n" in page
                if (generator.SERVICE, s, generator.METHOD, m) not in comments:
                    uncommented.append(f"{service.name}.{method.name}")
    assert not uncommented, f"RPCs without a comment in protos/: {uncommented}"
    assert "Errors named: `NOT_FOUND`." in page  # codes come from the comments
