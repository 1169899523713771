"""``wfjobs`` help, version, status names and shell completion, as a user meets them."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from wfj_testing import Coordinator
from worker_sdk import AdminClient, SchedulerClient, __version__
from worker_sdk.cli import build_parser

WFJOBS = str(Path(sys.executable).parent / "wfjobs")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([WFJOBS, *args], capture_output=True, text=True, timeout=60, check=False)


def _parsers(parser: argparse.ArgumentParser, path: str = "wfjobs"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, f"{path} {name}")


def test_every_option_and_argument_has_help_and_durations_name_their_units() -> None:
    missing = []
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            name = "/".join(action.option_strings) or action.dest
            if not action.help:
                missing.append(f"{path} {name}")
            elif action.type is not None and getattr(action.type, "__name__", "") == (
                "parse_duration"
            ):
                assert "90s" in action.help or "30s" in action.help, f"{path} {name}"
            elif action.dest == "timeout":
                assert "seconds" in action.help, f"{path} {name}"

    assert missing == []


def test_version() -> None:
    result = run("--version")

    assert result.returncode == 0
    assert result.stdout == f"wfjobs {__version__}\n"


@pytest.fixture(scope="module")
def jobs_in_two_statuses(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, set[str]]]]:
    """A real coordinator holding two pending jobs and one cancelled job."""
    tmp = tmp_path_factory.mktemp("statuses")
    coordinator = Coordinator(f"sqlite:///{tmp / 'statuses.db'}", tmp / "coordinator.log")
    try:
        target = coordinator.target
        with SchedulerClient(target) as client, AdminClient(target) as admin:
            pending = {client.enqueue("nobody-serves-this", {}).id for _ in range(2)}
            cancelled = client.enqueue("nobody-serves-this", {}).id
            admin.cancel_job(cancelled)
        yield target, {"pending": pending, "cancelled": {cancelled}}
    finally:
        coordinator.stop()


def listed(target: str, *status_options: str) -> set[str]:
    result = run("--target", target, "--json", "jobs", "list", *status_options)
    assert result.returncode == 0, result.stderr
    return {job["id"] for job in json.loads(result.stdout)["jobs"]}


@pytest.mark.parametrize("status", ["JOB_STATUS_PENDING", "job_status_pending", "Pending"])
def test_status_names_in_grpcurl_form_list_the_same_jobs_as_the_short_name(
    jobs_in_two_statuses: tuple[str, dict[str, set[str]]], status: str
) -> None:
    target, ids = jobs_in_two_statuses

    assert listed(target, "--status", "pending") == ids["pending"]
    assert listed(target, "--status", status) == ids["pending"]


@pytest.mark.parametrize(
    "options",
    [
        ("--status", "JOB_STATUS_CANCELLED,pending"),
        ("--status", "job_status_cancelled", "--status", "JOB_STATUS_PENDING"),
    ],
)
def test_several_statuses_mix_both_forms(
    jobs_in_two_statuses: tuple[str, dict[str, set[str]]], options: tuple[str, ...]
) -> None:
    target, ids = jobs_in_two_statuses

    assert listed(target, "--status", "cancelled") == ids["cancelled"]
    assert listed(target, *options) == ids["pending"] | ids["cancelled"]


def test_an_unknown_status_is_named() -> None:
    result = run("--target", "127.0.0.1:1", "jobs", "list", "--status", "JOB_STATUS_SLEEPING")

    assert result.returncode == 2
    assert result.stderr == (
        "wfjobs: unknown status 'JOB_STATUS_SLEEPING'; expected one of: "
        "pending, running, completed, faulted, cancelled\n"
    )


def complete(*words: str) -> list[str]:
    script = run("completion", "bash").stdout
    line = " ".join(f"'{w}'" for w in ("wfjobs", *words))
    program = (
        f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _wfjobs; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    result = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_bash_completion_completes_commands_actions_options_and_choices() -> None:
    assert complete("jo") == ["jobs"]
    assert complete("jobs", "re") == ["replay", "retry"]
    assert complete("jobs", "list", "--st") == ["--status"]
    assert complete("--json", "jobs", "cancel", "--y") == ["--yes"]
    assert {"tenant", "definition", "instance", "job-type"} <= set(complete("pause", ""))
    assert complete("completion", "z") == ["zsh"]


def test_zsh_completion_is_the_bash_function_behind_bashcompinit() -> None:
    zsh = run("completion", "zsh").stdout
    bash = run("completion", "bash").stdout

    assert zsh.startswith("autoload -U +X bashcompinit && bashcompinit\n")
    assert (
        zsh.split("\n", 1)[1]
        .replace("(zsh)", "(bash)")
        .replace("completion zsh", "completion bash")
        == bash
    )


def _contract_kinds(enum_type: object, prefix: str) -> tuple[str, ...]:
    names = enum_type.keys()  # type: ignore[attr-defined]
    return tuple(n.removeprefix(prefix).lower().replace("_", "-") for n in names[1:])


def test_scope_kinds_are_the_contract_s_in_its_order() -> None:
    from workflowjobs.v1 import admin_service_pb2 as apb

    pause = ("tenant", "definition", "instance", "job-type", "category")
    limit = ("tenant", "job-type", "definition", "concurrency-key", "category")
    assert _contract_kinds(apb.PauseScopeKind, "PAUSE_SCOPE_KIND_") == pause
    assert _contract_kinds(apb.LimitScopeKind, "LIMIT_SCOPE_KIND_") == limit
    parsers = dict(_parsers(build_parser()))
    for path, kinds, help_text in (
        ("wfjobs pause", pause, "what to pause: "),
        ("wfjobs unpause", pause, "what to pause: "),
        ("wfjobs limits set", limit, "scope kind: "),
        ("wfjobs rate-limits set", limit, "scope kind: "),
        ("wfjobs rate-limits remove", limit, "scope kind: "),
    ):
        [kind] = [a for a in parsers[path]._actions if a.dest == "kind"]
        assert (tuple(kind.choices), kind.help) == (kinds, help_text + ", ".join(kinds)), path
