"""``wfjobs`` against a coordinator serving TLS and requiring tokens: options,
environment variables and profiles, and what it says when one is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from faults.harness import CoordinatorProcess
from security.certs import make_pems
from security.conftest import CREDENTIALS, write_tokens

from wfj_testing import subprocess_env

pytestmark = pytest.mark.e2e

WFJOBS = Path(sys.executable).parent / "wfjobs"
_CLIENT_VARIABLES = tuple(
    name for name in os.environ if name.startswith("WFJOBS_") or name in ("XDG_CONFIG_HOME", "HOME")
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("cli-tls")
    pems = make_pems(tmp)
    tokens = tmp / "tokens.jsonl"
    write_tokens(tokens, CREDENTIALS)
    coordinator = CoordinatorProcess(
        f"sqlite:///{tmp / 'cli.db'}",
        tmp,
        args=["--tls-cert", str(pems.server_cert), "--tls-key", str(pems.server_key)],
        env={"WFJOBS_TOKENS_FILE": str(tokens)},
    )
    try:
        yield coordinator, pems
    finally:
        coordinator.stop()


def wfjobs(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the installed ``wfjobs`` as a user with ``home`` and only ``env`` set."""
    environment = subprocess_env({"HOME": str(home), **env}, without=_CLIENT_VARIABLES)
    environment["HOME"] = str(home)
    return subprocess.run(
        [str(WFJOBS), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environment,
    )


def test_options_reach_a_tls_coordinator_with_a_token(cluster, tmp_path: Path) -> None:
    coordinator, pems = cluster
    target = coordinator.target

    result = wfjobs(
        tmp_path, "--target", target, "--ca", str(pems.ca), "--token", "root-secret", "stats"
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("pending 0  running 0")


def test_environment_variables_reach_it_too(cluster, tmp_path: Path) -> None:
    coordinator, pems = cluster

    result = wfjobs(
        tmp_path,
        "stats",
        WFJOBS_TARGET=coordinator.target,
        WFJOBS_CA=str(pems.ca),
        WFJOBS_TOKEN="root-secret",
    )

    assert result.returncode == 0, result.stderr
    assert "pending 0" in result.stdout


def test_profiles_from_the_config_file(cluster, tmp_path: Path) -> None:
    coordinator, pems = cluster
    config = tmp_path / ".config" / "wfjobs"
    config.mkdir(parents=True)
    (config / "prod.token").write_text("root-secret\n")
    (config / "config.toml").write_text(
        f"""
[profiles.prod]
target = "{coordinator.target}"
ca = "{pems.ca}"
token_file = "~/.config/wfjobs/prod.token"

[profiles.default]
target = "{coordinator.target}"
ca = "{pems.ca}"
token = "admin-a-secret"
"""
    )

    named = wfjobs(tmp_path, "--profile", "prod", "stats")
    by_env = wfjobs(tmp_path, "stats", WFJOBS_PROFILE="prod")
    default = wfjobs(tmp_path, "stats", "--tenant", "a")
    unknown = wfjobs(tmp_path, "--profile", "staging", "stats")

    assert named.returncode == 0, named.stderr
    assert "pending 0" in named.stdout
    assert by_env.returncode == 0, by_env.stderr
    assert default.returncode == 0, default.stderr
    assert unknown.returncode == 2
    assert unknown.stderr == (
        f"wfjobs: no profile 'staging' in {config / 'config.toml'} (profiles: default, prod)\n"
    )


def test_no_token_says_which_options_give_one(cluster, tmp_path: Path) -> None:
    coordinator, pems = cluster

    result = wfjobs(tmp_path, "--target", coordinator.target, "--ca", str(pems.ca), "stats")

    assert result.returncode == 7
    first, second = result.stderr.splitlines()
    assert first.startswith(
        f"wfjobs: the coordinator at {coordinator.target} wants a valid bearer token"
    )
    assert first.endswith("; no token was given.")
    assert second == (
        "  Pass --token TOKEN, or set WFJOBS_TOKEN / WFJOBS_TOKEN_FILE, or put "
        "token / token_file in a profile (--profile)."
    )


def test_plaintext_against_tls_suggests_tls_options(cluster, tmp_path: Path) -> None:
    coordinator, _ = cluster

    result = wfjobs(
        tmp_path,
        "--target",
        coordinator.target,
        "--token",
        "root-secret",
        "stats",
        "--timeout",
        "5",
    )

    assert result.returncode == 5
    assert result.stderr.startswith(f"wfjobs: cannot reach the coordinator at {coordinator.target}")
    assert "--tls" in result.stderr and "--ca FILE" in result.stderr


def test_half_a_client_certificate_is_a_usage_error(cluster, tmp_path: Path) -> None:
    _, pems = cluster

    result = wfjobs(tmp_path, "--cert", str(pems.client_cert), "stats")

    assert result.returncode == 2
    assert (
        result.stderr == "wfjobs: a client certificate needs both --cert and --key (or neither)\n"
    )


def test_whoami_prints_the_tokens_own_name_and_scope(cluster, tmp_path: Path) -> None:
    coordinator, pems = cluster
    connect = ("--target", coordinator.target, "--ca", str(pems.ca))

    scoped = wfjobs(tmp_path, *connect, "--token", "worker-a-mail-secret", "whoami")

    assert scoped.returncode == 0, scoped.stderr
    assert scoped.stdout.splitlines() == [
        "name:      worker-a-mail",
        "roles:     worker",
        "tenants:   a",
        "job types: mail",
    ]
    root = wfjobs(tmp_path, *connect, "--token", "root-secret", "--json", "whoami")
    assert root.returncode == 0, root.stderr
    assert '"tenants": [\n    "*"\n  ]' in root.stdout and '"name": "root"' in root.stdout


def test_tenant_weights_are_set_and_listed(cluster, tmp_path: Path) -> None:
    coordinator, pems = cluster
    connect = ("--target", coordinator.target, "--ca", str(pems.ca), "--token", "root-secret")

    set_weight = wfjobs(tmp_path, *connect, "tenants", "set-weight", "cli-weights", "4")
    listed = wfjobs(tmp_path, *connect, "tenants", "weights", "--tenant", "cli-weights")

    assert set_weight.returncode == 0, set_weight.stderr
    assert set_weight.stdout == "tenant cli-weights now has weight 4\n"
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["TENANT", "WEIGHT"]
    assert lines[1].split() == ["cli-weights", "4"]
    assert lines[-1] == "every other tenant: weight 1"


def test_category_weights_are_set_listed_and_removed(cluster, tmp_path: Path) -> None:
    coordinator, pems = cluster
    connect = ("--target", coordinator.target, "--ca", str(pems.ca), "--token", "root-secret")

    set_weight = wfjobs(
        tmp_path, *connect, "tenants", "set-category-weight", "cli-cw", "integration", "3"
    )
    listed = wfjobs(tmp_path, *connect, "tenants", "category-weights", "--tenant", "cli-cw")
    as_json = wfjobs(
        tmp_path, *connect, "--json", "tenants", "category-weights", "--tenant", "cli-cw"
    )
    removed = wfjobs(
        tmp_path, *connect, "tenants", "remove-category-weight", "cli-cw", "integration"
    )
    again = wfjobs(tmp_path, *connect, "tenants", "remove-category-weight", "cli-cw", "integration")
    bad = wfjobs(tmp_path, *connect, "tenants", "set-category-weight", "cli-cw", "nope", "3")

    assert set_weight.returncode == 0, set_weight.stderr
    assert set_weight.stdout == "category integration of tenant cli-cw now has weight 3\n"
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["TENANT", "CATEGORY", "WEIGHT"]
    assert lines[1].split() == ["cli-cw", "integration", "3"]
    assert lines[-1] == "every other category: weight 1"
    assert json.loads(as_json.stdout)["weights"] == [
        {"tenant_id": "cli-cw", "category": "JOB_CATEGORY_INTEGRATION", "weight": 3}
    ]
    assert removed.stdout == "category integration of tenant cli-cw is back to weight 1\n"
    assert again.stdout == "no weight was set for category integration of tenant cli-cw\n"
    assert bad.returncode == 2 and "invalid choice: 'nope'" in bad.stderr


def test_jobs_list_takes_several_types(cluster, tmp_path: Path) -> None:
    coordinator, pems = cluster
    connect = ("--target", coordinator.target, "--ca", str(pems.ca), "--token", "root-secret")
    ids = {}
    for job_type in ("cli-mail", "cli-sms", "cli-push"):
        made = wfjobs(
            tmp_path,
            *connect,
            "--json",
            "enqueue",
            job_type,
            "{}",
            "--tenant",
            "a",
            "--delay",
            "1h",
        )
        assert made.returncode == 0, made.stderr
        ids[job_type] = json.loads(made.stdout)["id"]

    def listed(*types: str) -> set[str]:
        result = wfjobs(tmp_path, *connect, "--json", "jobs", "list", "--tenant", "a", *types)
        assert result.returncode == 0, result.stderr
        return {job["id"] for job in json.loads(result.stdout)["jobs"]}

    assert listed("--type", "cli-mail", "--type", "cli-sms") == {ids["cli-mail"], ids["cli-sms"]}
    assert listed("--type", "cli-sms,cli-push") == {ids["cli-sms"], ids["cli-push"]}
    assert listed("--type", "cli-push") == {ids["cli-push"]}
