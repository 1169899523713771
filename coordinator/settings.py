"""Coordinator settings from command-line flags and ``WFJOBS_*`` environment variables."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

from coordinator.masking import display_url
from coordinator.store.liveness import ConnectionBounds
from workflowjobs.contract import MAX_PAYLOAD_BYTES, MAX_STRING_LENGTH

DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_DATABASE_URL = "sqlite:///wfjobs.db"


@dataclass
class Settings:
    # host:port for the gRPC server; port 0 picks a free one (logged at start).
    listen: str = DEFAULT_LISTEN
    # SQLAlchemy URL: sqlite:///file.db (embedded default) or postgresql+psycopg://...
    database_url: str = DEFAULT_DATABASE_URL
    # PostgreSQL only: a direct connection (not through a transaction-mode
    # pooler) for the LISTEN session, when database_url goes through one.
    session_database_url: str | None = None
    # Apply migrations at start instead of refusing an out-of-date schema.
    migrate_on_start: bool = False
    # Seconds to let running jobs finish on SIGTERM before stopping.
    drain_timeout_s: float = 30.0
    # Log format: "text" or "json".
    log_format: str = "text"
    log_level: str = "INFO"
    # How long finished jobs are kept, per status (coordinator/chores/retention.py):
    # "7d", "completed=7d,cancelled=1d,faulted=30d", "faulted=forever" or "off".
    retention: str = "7d"
    # How long job events are kept (the WatchJobEvents log): "7d" or "forever".
    event_retention: str = "7d"
    # How long pauses are kept once lifted or expired: "7d" or "forever".
    pause_retention: str = "7d"

    # -- database liveness (PostgreSQL; docs/reliability.md) --
    # Seconds a liveness ping (health, the LISTEN connection) or a new
    # connection may wait for the database before it counts as gone.
    database_timeout_s: float = 5.0
    # Seconds sent bytes may stay unacknowledged before a connection is
    # dropped (tcp_user_timeout; the keepalives find a dead idle one within it).
    database_tcp_timeout_s: float = 10.0
    # Server-side limit on one statement, in seconds; 0 turns it off.
    statement_timeout_s: float = 30.0

    # host:port of the web dashboard (docs/dashboard.md); empty turns it off.
    dashboard_listen: str = ""
    # With --tokens-file: host names (name or name:port, comma-separated) the
    # dashboard answers besides its loopback ones (docs/dashboard.md).
    dashboard_allowed_hosts: str = ""

    # -- security (docs/security.md) --
    # PEM certificate chain and key: serve TLS instead of plaintext.
    tls_cert: str | None = None
    tls_key: str | None = None
    # PEM CA bundle: require client certificates signed by it (mTLS).
    tls_client_ca: str | None = None
    # JSON-lines token file; authentication is off without it.
    tokens_file: str | None = None
    # Leave health and reflection open when authentication is on.
    auth_open_health: bool = True
    auth_open_reflection: bool = True
    # Leave KEDA's external scaler open when authentication is on (KEDA sends
    # no bearer token); False makes it take any token of the token file.
    auth_open_scaler: bool = True
    # Allow serving a non-loopback address with authentication off.
    allow_unauthenticated: bool = False

    # -- limits (docs/limits.md) --
    max_payload_bytes: int = MAX_PAYLOAD_BYTES
    max_batch_size: int = 5_000
    max_string_length: int = MAX_STRING_LENGTH
    max_credits_per_stream: int = 10_000
    max_streams_per_connection: int = 1_000
    max_streams_total: int = 10_000
    # Open WatchJobEvents streams and waiting WaitForJob calls (docs/limits.md).
    max_watches_per_connection: int = 100
    max_watches_per_credential: int = 1_000
    max_watches_total: int = 10_000
    max_waits_per_connection: int = 1_000
    max_waits_total: int = 10_000
    # Open StreamIsActive streams of KEDA's scaler (docs/limits.md).
    max_scaler_streams_per_connection: int = 100
    max_scaler_streams_total: int = 1_000
    # Requests per second per credential (0 = unlimited) and the burst above it.
    rate_per_credential: float = 1_000.0
    rate_burst: int = 2_000

    def connection_bounds(self) -> ConnectionBounds:
        """The PostgreSQL connection limits these settings give (``ValueError`` when out of range)."""
        for flag, value, least in (
            ("--database-timeout", self.database_timeout_s, 0.1),
            ("--database-tcp-timeout", self.database_tcp_timeout_s, 1.0),
            ("--statement-timeout", self.statement_timeout_s, 0.0),
        ):
            if not least <= value <= 3600:
                raise ValueError(f"{flag} must be between {least:g} and 3600 seconds, got {value}")
        return ConnectionBounds(
            connect_timeout_s=max(2, math.ceil(self.database_timeout_s)),
            tcp_timeout_s=self.database_tcp_timeout_s,
            statement_timeout_s=self.statement_timeout_s,
            liveness_timeout_s=self.database_timeout_s,
        )

    def __repr__(self) -> str:
        # Settings get logged and printed; the database password must not be.
        fields = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("database_url", "session_database_url") and value is not None:
                value = display_url(value)
            fields.append(f"{f.name}={value!r}")
        return f"Settings({', '.join(fields)})"

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        return cls(
            listen=env.get("WFJOBS_LISTEN", DEFAULT_LISTEN),
            database_url=env.get("WFJOBS_DATABASE_URL", DEFAULT_DATABASE_URL),
            session_database_url=env.get("WFJOBS_SESSION_DATABASE_URL") or None,
            migrate_on_start=env.get("WFJOBS_MIGRATE_ON_START", "").lower() in ("1", "true", "yes"),
            drain_timeout_s=float(env.get("WFJOBS_DRAIN_TIMEOUT", "30")),
            log_format=env.get("WFJOBS_LOG_FORMAT", "text"),
            log_level=env.get("WFJOBS_LOG_LEVEL", "INFO"),
            retention=env.get("WFJOBS_RETENTION", "7d"),
            event_retention=env.get("WFJOBS_EVENT_RETENTION", "7d"),
            pause_retention=env.get("WFJOBS_PAUSE_RETENTION", "7d"),
            database_timeout_s=float(env.get("WFJOBS_DATABASE_TIMEOUT", "5")),
            database_tcp_timeout_s=float(env.get("WFJOBS_DATABASE_TCP_TIMEOUT", "10")),
            statement_timeout_s=float(env.get("WFJOBS_STATEMENT_TIMEOUT", "30")),
            dashboard_listen=env.get("WFJOBS_DASHBOARD_LISTEN", ""),
            dashboard_allowed_hosts=env.get("WFJOBS_DASHBOARD_ALLOWED_HOSTS", ""),
            tls_cert=env.get("WFJOBS_TLS_CERT") or None,
            tls_key=env.get("WFJOBS_TLS_KEY") or None,
            tls_client_ca=env.get("WFJOBS_TLS_CLIENT_CA") or None,
            tokens_file=env.get("WFJOBS_TOKENS_FILE") or None,
            auth_open_health=_flag(env.get("WFJOBS_AUTH_OPEN_HEALTH", "1")),
            auth_open_reflection=_flag(env.get("WFJOBS_AUTH_OPEN_REFLECTION", "1")),
            auth_open_scaler=_flag(env.get("WFJOBS_AUTH_OPEN_SCALER", "1")),
            allow_unauthenticated=_flag(env.get("WFJOBS_ALLOW_UNAUTHENTICATED", "")),
            max_payload_bytes=int(env.get("WFJOBS_MAX_PAYLOAD_BYTES", MAX_PAYLOAD_BYTES)),
            max_batch_size=int(env.get("WFJOBS_MAX_BATCH_SIZE", 5_000)),
            max_string_length=int(env.get("WFJOBS_MAX_STRING_LENGTH", MAX_STRING_LENGTH)),
            max_credits_per_stream=int(env.get("WFJOBS_MAX_CREDITS_PER_STREAM", 10_000)),
            max_streams_per_connection=int(env.get("WFJOBS_MAX_STREAMS_PER_CONNECTION", 1_000)),
            max_streams_total=int(env.get("WFJOBS_MAX_STREAMS_TOTAL", 10_000)),
            max_watches_per_connection=int(env.get("WFJOBS_MAX_WATCHES_PER_CONNECTION", 100)),
            max_watches_per_credential=int(env.get("WFJOBS_MAX_WATCHES_PER_CREDENTIAL", 1_000)),
            max_watches_total=int(env.get("WFJOBS_MAX_WATCHES_TOTAL", 10_000)),
            max_waits_per_connection=int(env.get("WFJOBS_MAX_WAITS_PER_CONNECTION", 1_000)),
            max_waits_total=int(env.get("WFJOBS_MAX_WAITS_TOTAL", 10_000)),
            max_scaler_streams_per_connection=int(
                env.get("WFJOBS_MAX_SCALER_STREAMS_PER_CONNECTION", 100)
            ),
            max_scaler_streams_total=int(env.get("WFJOBS_MAX_SCALER_STREAMS_TOTAL", 1_000)),
            rate_per_credential=float(env.get("WFJOBS_RATE_PER_CREDENTIAL", 1_000)),
            rate_burst=int(env.get("WFJOBS_RATE_BURST", 2_000)),
        )


def _flag(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")
