"""One configuration source: a Worker or client created without a target,
credentials or token reads them as ``wfjobs`` does (arguments, then
``WFJOBS_*``, then the profile, then the defaults), load-balancing policy
included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker_sdk import AdminClient, ConfigError, SchedulerClient, Worker, resolve_connection
from worker_sdk._transport import ChannelConfig

SETTINGS_ENV = (
    "WFJOBS_TARGET",
    "WFJOBS_TLS",
    "WFJOBS_CA",
    "WFJOBS_CERT",
    "WFJOBS_KEY",
    "WFJOBS_TOKEN",
    "WFJOBS_TOKEN_FILE",
    "WFJOBS_LOAD_BALANCING",
    "WFJOBS_PROFILE",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.toml"
    monkeypatch.setenv("WFJOBS_CONFIG", str(config))
    return config


def _service_config(config: ChannelConfig) -> dict[str, object] | None:
    values = [v for k, v in config.options if k == "grpc.service_config"]
    return json.loads(str(values[0])) if values else None


def test_without_settings_the_defaults_apply() -> None:
    config = ChannelConfig()
    assert config.target == "127.0.0.1:50051"
    assert config.credentials is None
    assert not any(k == "authorization" for k, _ in config.metadata)
    assert _service_config(config) is None  # gRPC's pick_first


def test_the_environment_gives_target_token_tls_and_policy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    monkeypatch.setenv("WFJOBS_TARGET", "dns:///coordinators:50051")
    monkeypatch.setenv("WFJOBS_TOKEN_FILE", str(token_file))
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("WFJOBS_CA", str(ca))
    monkeypatch.setenv("WFJOBS_LOAD_BALANCING", "round_robin")
    config = ChannelConfig()
    assert config.target == "dns:///coordinators:50051"
    assert ("authorization", "Bearer s3cret") in config.metadata
    assert config.credentials is not None
    assert _service_config(config) == {"loadBalancingConfig": [{"round_robin": {}}]}
    # The same settings reach every entry point.
    worker = Worker(concurrency=1)
    assert worker._channel_config.target == "dns:///coordinators:50051"


def test_the_profile_applies_and_arguments_win(clean_env: Path, tmp_path: Path) -> None:
    clean_env.write_text(
        "[profiles.default]\n"
        'target = "ipv4:127.0.0.1:7001,127.0.0.1:7002"\n'
        'token = "from-profile"\n'
        'load_balancing = "round_robin"\n'
    )
    config = ChannelConfig()
    assert config.target == "ipv4:127.0.0.1:7001,127.0.0.1:7002"
    assert ("authorization", "Bearer from-profile") in config.metadata
    assert _service_config(config) == {"loadBalancingConfig": [{"round_robin": {}}]}
    given = ChannelConfig("127.0.0.1:7003", token="given", load_balancing="pick_first")
    assert given.target == "127.0.0.1:7003"
    assert ("authorization", "Bearer given") in given.metadata
    assert _service_config(given) == {"loadBalancingConfig": [{"pick_first": {}}]}
    # A policy set in the channel options is left alone.
    own = ChannelConfig(options=[("grpc.lb_policy_name", "pick_first")])
    assert _service_config(own) is None
    # The CLI resolves the same way.
    assert resolve_connection({}).target == "ipv4:127.0.0.1:7001,127.0.0.1:7002"
    with AdminClient() as admin, SchedulerClient() as scheduler:
        assert admin._metadata == scheduler._metadata == config.metadata


def test_an_unknown_policy_or_profile_is_refused(
    monkeypatch: pytest.MonkeyPatch, clean_env: Path
) -> None:
    with pytest.raises(
        ConfigError, match="load_balancing .* must be one of pick_first, round_robin"
    ):
        ChannelConfig(load_balancing="round-robin")
    monkeypatch.setenv("WFJOBS_PROFILE", "prod")
    with pytest.raises(ValueError, match="profile 'prod' given, but there is no config file"):
        Worker()
