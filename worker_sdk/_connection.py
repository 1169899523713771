"""How the SDK reaches a coordinator: one configuration source for the
workers, the clients and ``wfjobs``: address, TLS, client certificate, token,
load-balancing policy, profiles.

Each setting comes from, first to last: the argument (the command-line option
for ``wfjobs``), its environment variable, the profile, the built-in default.
A :class:`~worker_sdk.Worker`, :class:`~worker_sdk.SchedulerClient`,
:class:`~worker_sdk.AdminClient`, :class:`~worker_sdk.AsyncSchedulerClient` or
:class:`~worker_sdk.InlineRunner` created without a target, credentials or a
token reads them here, as ``wfjobs`` does; arguments given win.

==================  ==========================  ==================  ============================
option              environment                 profile key         meaning
==================  ==========================  ==================  ============================
``--target``        ``WFJOBS_TARGET``           ``target``          ``host:port`` (127.0.0.1:50051)
``--tls``           ``WFJOBS_TLS=1``            ``tls = true``      TLS, trusting the system CAs
``--ca``            ``WFJOBS_CA``               ``ca``              CA bundle (PEM); implies TLS
``--cert``          ``WFJOBS_CERT``             ``cert``            client certificate (mTLS, PEM)
``--key``           ``WFJOBS_KEY``              ``key``             its private key (PEM)
``--token``         ``WFJOBS_TOKEN``            ``token``           bearer token
(none)              ``WFJOBS_TOKEN_FILE``       ``token_file``      file holding the bearer token
(none)              ``WFJOBS_LOAD_BALANCING``   ``load_balancing``  gRPC policy (``round_robin``)
``--timeout``       ``WFJOBS_TIMEOUT``          ``timeout``         seconds per call (30; CLI)
``--profile``       ``WFJOBS_PROFILE``                              profile to use (``default``)
==================  ==========================  ==================  ============================

Profiles live in ``~/.config/wfjobs/config.toml`` (``$XDG_CONFIG_HOME`` is
honoured, ``WFJOBS_CONFIG`` names another file), one table per profile::

    [profiles.prod]
    target = "dns:///jobs.example.com:443"
    ca = "~/.config/wfjobs/prod-ca.pem"
    token_file = "~/.config/wfjobs/prod.token"
    load_balancing = "round_robin"

Without ``--profile`` (``WFJOBS_PROFILE``) the profile named ``default``
applies when the file has one. Paths may start with ``~``.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grpc

__all__ = [
    "LOAD_BALANCING_POLICIES",
    "ConfigError",
    "ConnectionSettings",
    "config_path",
    "resolve_connection",
]

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_TIMEOUT = 30.0
_PROFILE_KEYS = frozenset(
    {"target", "tls", "ca", "cert", "key", "token", "token_file", "timeout", "load_balancing"}
)
# gRPC's built-in policies a service config may name (``pick_first``: gRPC's default).
LOAD_BALANCING_POLICIES = ("pick_first", "round_robin")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


class ConfigError(ValueError):
    """A connection setting that cannot be used; the message says which and why."""


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """The resolved connection settings, with where the target came from.

    Attributes:
        target: The coordinator's address (``host:port``, ``dns:///…``, ``ipv4:a,b``).
        target_source: Where ``target`` came from (``--target``, ``WFJOBS_TARGET``, …).
        tls: Whether to speak TLS.
        ca: The CA bundle to trust (None: the system CAs).
        cert: The client certificate (mTLS).
        key: Its private key.
        token: The bearer token.
        timeout: Seconds per call (used by ``wfjobs``).
        profile: The profile read, if any.
        load_balancing: gRPC load-balancing policy (None: gRPC's default, pick_first).
    """

    target: str
    target_source: str
    tls: bool = False
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    token: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    profile: str | None = None
    load_balancing: str | None = None

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~worker_sdk.AdminClient` and the other clients."""
        return {
            "credentials": self.credentials(),
            "token": self.token,
            "timeout": self.timeout,
            "load_balancing": self.load_balancing,
        }

    def credentials(self) -> grpc.ChannelCredentials | None:
        """TLS channel credentials, or None for plaintext.

        Raises:
            ConfigError: A PEM file cannot be read.
        """
        if not self.tls:
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca, "--ca") if self.ca else None,
            private_key=_read(self.key, "--key") if self.key else None,
            certificate_chain=_read(self.cert, "--cert") if self.cert else None,
        )


def _read(path: Path, option: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {option} {path}: {exc.strerror}") from None


def config_path(env: Mapping[str, str]) -> Path:
    """Where the profiles file is looked for."""
    if env.get("WFJOBS_CONFIG"):
        return Path(env["WFJOBS_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")) / ".config")
    return Path(base).expanduser() / "wfjobs" / "config.toml"


def _load_profile(name: str | None, env: Mapping[str, str]) -> tuple[str | None, dict[str, Any]]:
    path = config_path(env)
    explicit = name is not None
    if not path.exists():
        if explicit:
            raise ConfigError(f"profile {name!r} given, but there is no config file at {path}")
        return None, {}
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc}") from None
    profiles = document.get("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(f"{path}: 'profiles' must be a table of [profiles.NAME] tables")
    name = name or "default"
    profile = profiles.get(name)
    if profile is None:
        if explicit:
            known = ", ".join(sorted(profiles)) or "none"
            raise ConfigError(f"no profile {name!r} in {path} (profiles: {known})")
        return None, {}
    if not isinstance(profile, dict):
        raise ConfigError(f"{path}: [profiles.{name}] must be a table")
    unknown = sorted(set(profile) - _PROFILE_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: [profiles.{name}] has unknown key(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_PROFILE_KEYS))}"
        )
    return name, profile


def _flag(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{what} must be true or false, not {value!r}")


def _path(value: Any) -> Path | None:
    return Path(str(value)).expanduser() if value else None


def resolve_connection(
    options: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> ConnectionSettings:
    """Combine command-line ``options``, the environment and the profile.

    Args:
        options: Values given on the command line (absent or None when not given),
            keyed ``target``, ``tls``, ``ca``, ``cert``, ``key``, ``token``,
            ``timeout``, ``load_balancing`` and ``profile``.
        env: The environment; ``os.environ`` when None.

    Raises:
        ConfigError: A setting is unusable (unknown profile, half a client
            certificate, unreadable token file, ...).
    """
    env = os.environ if env is None else env
    profile_name, profile = _load_profile(
        options.get("profile") or env.get("WFJOBS_PROFILE") or None, env
    )
    in_profile = f"profile {profile_name!r}"

    def pick(option: str, variable: str) -> tuple[Any, str]:
        if options.get(option) not in (None, False):
            return options[option], f"--{option}"
        if env.get(variable):
            return env[variable], variable
        key = option.replace("-", "_")
        if profile.get(key) not in (None, ""):
            return profile[key], in_profile
        return None, ""

    target, target_source = pick("target", "WFJOBS_TARGET")
    if target is None:
        target, target_source = DEFAULT_TARGET, "the default"
    tls_value, tls_source = pick("tls", "WFJOBS_TLS")
    ca = _path(pick("ca", "WFJOBS_CA")[0])
    cert = _path(pick("cert", "WFJOBS_CERT")[0])
    key = _path(pick("key", "WFJOBS_KEY")[0])
    tls = (_flag(tls_value, tls_source) if tls_value is not None else False) or bool(
        ca or cert or key
    )
    if bool(cert) != bool(key):
        raise ConfigError("a client certificate needs both --cert and --key (or neither)")
    token, _ = pick("token", "WFJOBS_TOKEN")
    if token is None:
        token_file, source = pick("token_file", "WFJOBS_TOKEN_FILE")
        if token_file:
            path = Path(str(token_file)).expanduser()
            try:
                token = path.read_text().strip()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read the token file {path} ({source}): {exc.strerror}"
                ) from None
    timeout_value, timeout_source = pick("timeout", "WFJOBS_TIMEOUT")
    try:
        timeout = float(timeout_value) if timeout_value is not None else DEFAULT_TIMEOUT
    except (TypeError, ValueError):
        raise ConfigError(
            f"timeout ({timeout_source}) must be a number of seconds, not {timeout_value!r}"
        ) from None
    if not timeout > 0:
        raise ConfigError(f"timeout ({timeout_source}) must be more than 0 seconds")
    load_balancing, lb_source = pick("load_balancing", "WFJOBS_LOAD_BALANCING")
    if load_balancing is not None and load_balancing not in LOAD_BALANCING_POLICIES:
        raise ConfigError(
            f"load_balancing ({lb_source}) must be one of {', '.join(LOAD_BALANCING_POLICIES)}, "
            f"not {load_balancing!r}"
        )
    return ConnectionSettings(
        target=str(target),
        target_source=target_source,
        tls=tls,
        ca=ca,
        cert=cert,
        key=key,
        token=str(token) if token else None,
        timeout=timeout,
        profile=profile_name,
        load_balancing=load_balancing,
    )
