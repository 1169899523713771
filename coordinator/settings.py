"""Coordinator settings from command-line flags and ``WFJOBS_*`` environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_LISTEN = "127.0.0.1:50051"
DEFAULT_DATABASE_URL = "sqlite:///wfjobs.db"


@dataclass
class Settings:
    # host:port for the gRPC server; port 0 picks a free one (logged at start).
    listen: str = DEFAULT_LISTEN
    # SQLAlchemy URL: sqlite:///file.db (embedded default) or postgresql+psycopg://...
    database_url: str = DEFAULT_DATABASE_URL
    # Apply migrations at start instead of refusing an out-of-date schema.
    migrate_on_start: bool = False
    # Seconds to let running jobs finish on SIGTERM before stopping.
    drain_timeout_s: float = 30.0
    # Log format: "text" or "json".
    log_format: str = "text"
    log_level: str = "INFO"

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        return cls(
            listen=env.get("WFJOBS_LISTEN", DEFAULT_LISTEN),
            database_url=env.get("WFJOBS_DATABASE_URL", DEFAULT_DATABASE_URL),
            migrate_on_start=env.get("WFJOBS_MIGRATE_ON_START", "").lower() in ("1", "true", "yes"),
            drain_timeout_s=float(env.get("WFJOBS_DRAIN_TIMEOUT", "30")),
            log_format=env.get("WFJOBS_LOG_FORMAT", "text"),
            log_level=env.get("WFJOBS_LOG_LEVEL", "INFO"),
        )
