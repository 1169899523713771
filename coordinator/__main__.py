"""``python -m coordinator``: serve the gRPC API or migrate the database.

python -m coordinator serve   [--listen HOST:PORT] [--database-url URL] [--migrate]
python -m coordinator migrate [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from coordinator.errors import SchemaMismatch, StoreUnavailable
from coordinator.settings import Settings
from coordinator.telemetry.logs import configure_logging

log = logging.getLogger("coordinator")


def _parser(defaults: Settings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m coordinator", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the coordinator")
    serve.add_argument("--listen", default=defaults.listen, help="host:port (env WFJOBS_LISTEN)")
    serve.add_argument(
        "--database-url",
        default=defaults.database_url,
        help="SQLAlchemy URL (env WFJOBS_DATABASE_URL)",
    )
    serve.add_argument(
        "--migrate",
        action="store_true",
        default=defaults.migrate_on_start,
        help="apply schema migrations before serving (env WFJOBS_MIGRATE_ON_START=1)",
    )
    serve.add_argument(
        "--drain-timeout",
        type=float,
        default=defaults.drain_timeout_s,
        help="seconds running RPCs get to finish on SIGTERM (env WFJOBS_DRAIN_TIMEOUT)",
    )
    migrate = sub.add_parser("migrate", help="apply schema migrations and exit")
    migrate.add_argument("--database-url", default=defaults.database_url)
    return parser


def _describe(url: str) -> str:
    if "@" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://…@{rest.split('@', 1)[1]}"
    return url


def migrate(url: str) -> None:
    from coordinator.store import open_store
    from coordinator.store.migrate import upgrade

    store = open_store(url)
    try:
        upgrade(store)
        log.info("schema of %s is up to date", _describe(url))
    finally:
        store.dispose()


async def serve(settings: Settings) -> None:
    from coordinator.api.server import CoordinatorServer
    from coordinator.engine import Engine
    from coordinator.store import open_store
    from coordinator.telemetry import setup_telemetry

    if settings.migrate_on_start:
        migrate(settings.database_url)
    store = open_store(settings.database_url)
    telemetry = setup_telemetry()  # from OTEL_* and WFJOBS_METRICS_*; off by default
    server = CoordinatorServer(Engine(store), settings.listen)
    telemetry.attach(server.engine)
    telemetry.start()
    await server.start()
    host = settings.listen.rsplit(":", 1)[0]
    log.info(
        "coordinator %s listening on %s:%d, store %s",
        server.engine.coordinator_id,
        host,
        server.port,
        _describe(settings.database_url),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down: draining for up to %.0fs", settings.drain_timeout_s)
    await server.stop(settings.drain_timeout_s)
    telemetry.shutdown()
    log.info("stopped")


def main(argv: list[str] | None = None) -> int:
    defaults = Settings.from_env()
    args = _parser(defaults).parse_args(argv)
    configure_logging(defaults.log_format, defaults.log_level)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        if args.command == "migrate":
            migrate(args.database_url)
            return 0
        settings = Settings(
            listen=args.listen,
            database_url=args.database_url,
            migrate_on_start=args.migrate,
            drain_timeout_s=args.drain_timeout,
            log_format=defaults.log_format,
            log_level=defaults.log_level,
        )
        asyncio.run(serve(settings))
        return 0
    except SchemaMismatch as e:
        log.error("%s", e)
        return 2
    except StoreUnavailable as e:
        log.error("cannot reach the database: %s", e)
        return 3
    except OSError as e:
        log.error("%s", e)
        return 4


if __name__ == "__main__":
    sys.exit(main())
