"""``python -m coordinator``: serve the gRPC API or migrate the database.

python -m coordinator serve   [--listen HOST:PORT] [--database-url URL] [--migrate]
python -m coordinator migrate [--database-url URL]
python -m coordinator hash-token < token   (the line to put in a token file)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
from typing import Any

from coordinator.errors import DatabaseInUse, SchemaMismatch, StoreUnavailable
from coordinator.masking import display_url
from coordinator.settings import Settings
from coordinator.telemetry.logs import configure_logging
from workflowjobs.addresses import is_loopback

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
        "--session-database-url",
        default=defaults.session_database_url,
        help="PostgreSQL: a direct connection for LISTEN when --database-url goes through a "
        "pooler in transaction mode such as PgBouncer (env WFJOBS_SESSION_DATABASE_URL)",
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
    serve.add_argument(
        "--retention",
        default=defaults.retention,
        help="how long finished jobs are kept before they are purged: one duration for "
        "every finished status (7d, the default) or per status "
        "(completed=7d,cancelled=1d,faulted=forever); 'off' keeps them all "
        "(env WFJOBS_RETENTION)",
    )
    serve.add_argument(
        "--event-retention",
        default=defaults.event_retention,
        help="how long job events (WatchJobEvents) are kept: a duration (7d, the default) "
        "or 'forever' (env WFJOBS_EVENT_RETENTION)",
    )
    serve.add_argument(
        "--pause-retention",
        default=defaults.pause_retention,
        help="how long pauses are kept once lifted or expired (ListPauses' history): a "
        "duration (7d, the default) or 'forever' (env WFJOBS_PAUSE_RETENTION)",
    )
    serve.add_argument(
        "--database-timeout",
        type=float,
        default=defaults.database_timeout_s,
        metavar="SECONDS",
        help="PostgreSQL: how long a liveness ping or a new connection may wait for the "
        "database before health turns NOT_SERVING and the LISTEN connection is replaced "
        "(default 5; env WFJOBS_DATABASE_TIMEOUT)",
    )
    serve.add_argument(
        "--database-tcp-timeout",
        type=float,
        default=defaults.database_tcp_timeout_s,
        metavar="SECONDS",
        help="PostgreSQL: how long sent bytes may go unacknowledged before a connection "
        "is dropped (tcp_user_timeout and keepalives; default 10; "
        "env WFJOBS_DATABASE_TCP_TIMEOUT)",
    )
    serve.add_argument(
        "--statement-timeout",
        type=float,
        default=defaults.statement_timeout_s,
        metavar="SECONDS",
        help="PostgreSQL: server-side limit on one statement (default 30, 0 turns it off; "
        "migrations are exempt; env WFJOBS_STATEMENT_TIMEOUT)",
    )
    serve.add_argument(
        "--dashboard-listen",
        default=defaults.dashboard_listen,
        metavar="HOST:PORT",
        help="serve the web dashboard here, e.g. 127.0.0.1:8080; empty (the default) turns "
        "it off (env WFJOBS_DASHBOARD_LISTEN)",
    )
    serve.add_argument(
        "--dashboard-allowed-hosts",
        default=defaults.dashboard_allowed_hosts,
        metavar="NAME[:PORT],...",
        help="with --tokens-file, the host names browsers reach the dashboard by, besides "
        "127.0.0.1/localhost; any other Host is answered 421 "
        "(env WFJOBS_DASHBOARD_ALLOWED_HOSTS)",
    )
    serve.add_argument(
        "--tls-cert", default=defaults.tls_cert, help="PEM certificate chain (env WFJOBS_TLS_CERT)"
    )
    serve.add_argument(
        "--tls-key", default=defaults.tls_key, help="PEM private key (env WFJOBS_TLS_KEY)"
    )
    serve.add_argument(
        "--tls-client-ca",
        default=defaults.tls_client_ca,
        help="PEM CA bundle; clients must present a certificate it signed (env WFJOBS_TLS_CLIENT_CA)",
    )
    serve.add_argument(
        "--tokens-file",
        default=defaults.tokens_file,
        help="bearer-token file (JSON lines); authentication is off without it "
        "(env WFJOBS_TOKENS_FILE)",
    )
    serve.add_argument(
        "--scaler-requires-token",
        action="store_true",
        default=not defaults.auth_open_scaler,
        help="with --tokens-file, KEDA's external scaler service takes only calls with a "
        "token of the file (any role); it is open without one by default "
        "(env WFJOBS_AUTH_OPEN_SCALER=0)",
    )
    serve.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        default=defaults.allow_unauthenticated,
        help="serve a non-loopback address without authentication "
        "(env WFJOBS_ALLOW_UNAUTHENTICATED=1)",
    )
    sub.add_parser("hash-token", help="read a token on stdin, print its token-file hash (SHA-256)")
    migrate = sub.add_parser("migrate", help="apply schema migrations and exit")
    migrate.add_argument("--database-url", default=defaults.database_url)
    return parser


def _engine_config(settings: Settings) -> Any:
    """The engine's config; ``ValueError`` names a setting that does not parse."""
    from coordinator.engine import EngineConfig

    return EngineConfig(
        max_payload_bytes=settings.max_payload_bytes,
        max_batch_size=settings.max_batch_size,
        max_string_length=settings.max_string_length,
    )


def _chores_config(settings: Settings) -> Any:
    """The chores' config; ``ValueError`` names a setting that does not parse."""
    from coordinator.chores import ChoresConfig
    from coordinator.chores.retention import (
        RetentionConfig,
        parse_event_retention,
        parse_pause_retention,
        parse_retention,
    )

    return ChoresConfig(
        retention=RetentionConfig(
            keep_s=parse_retention(settings.retention),
            keep_events_s=parse_event_retention(settings.event_retention),
            keep_pauses_s=parse_pause_retention(settings.pause_retention),
        )
    )


def _server_options(settings: Settings) -> dict[str, Any]:
    from coordinator.api.auth import AuthConfig
    from coordinator.api.request_limits import ApiLimits
    from coordinator.api.tls import TlsConfig

    options: dict[str, Any] = {
        "limits": ApiLimits(
            max_credits_per_stream=settings.max_credits_per_stream,
            max_streams_per_connection=settings.max_streams_per_connection,
            max_streams_total=settings.max_streams_total,
            max_watches_per_connection=settings.max_watches_per_connection,
            max_watches_per_credential=settings.max_watches_per_credential,
            max_watches_total=settings.max_watches_total,
            max_waits_per_connection=settings.max_waits_per_connection,
            max_waits_total=settings.max_waits_total,
            max_scaler_streams_per_connection=settings.max_scaler_streams_per_connection,
            max_scaler_streams_total=settings.max_scaler_streams_total,
            rate_per_credential=settings.rate_per_credential,
            rate_burst=settings.rate_burst,
        )
    }
    if settings.tls_cert and settings.tls_key:
        options["tls"] = TlsConfig(settings.tls_cert, settings.tls_key, settings.tls_client_ca)
        log.info(
            "TLS on%s", ", client certificates required (mTLS)" if settings.tls_client_ca else ""
        )
    if settings.tokens_file:
        options["auth"] = AuthConfig(
            settings.tokens_file,
            open_health=settings.auth_open_health,
            open_reflection=settings.auth_open_reflection,
            open_scaler=settings.auth_open_scaler,
        )
        log.info("bearer-token authentication on, tokens from %s", settings.tokens_file)
    else:
        log.warning(
            "AUTHENTICATION IS OFF: any client that reaches %s may enqueue, run and administer "
            "jobs of every tenant; set --tokens-file (WFJOBS_TOKENS_FILE) to require tokens",
            settings.listen,
        )
    return options


def _is_loopback(listen: str) -> bool:
    try:
        return is_loopback(listen)
    except ValueError:  # not HOST:PORT (a unix socket, say): not known to be loopback
        return False


def _check_security(settings: Settings) -> None:
    """Refuse settings that would expose an open coordinator, or half-configured TLS."""
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise ValueError("TLS needs both --tls-cert and --tls-key (WFJOBS_TLS_CERT/WFJOBS_TLS_KEY)")
    if settings.tls_client_ca and not settings.tls_cert:
        raise ValueError("--tls-client-ca (mTLS) needs TLS: set --tls-cert and --tls-key too")
    if settings.tokens_file:
        from coordinator.api.auth import TokenBook

        TokenBook(settings.tokens_file)  # a broken token file fails here, with its line
    elif not settings.allow_unauthenticated and not _is_loopback(settings.listen):
        raise ValueError(
            f"refusing to serve {settings.listen} without authentication: set --tokens-file "
            "(WFJOBS_TOKENS_FILE), or pass --allow-unauthenticated "
            "(WFJOBS_ALLOW_UNAUTHENTICATED=1) if a network boundary protects this port"
        )
    if not settings.auth_open_scaler and not settings.tokens_file:
        raise ValueError(
            "--scaler-requires-token (WFJOBS_AUTH_OPEN_SCALER=0) needs authentication: "
            "set --tokens-file (WFJOBS_TOKENS_FILE)"
        )
    if settings.dashboard_listen:
        _check_dashboard(settings)


def _check_dashboard(settings: Settings) -> None:
    """Refuse a dashboard that would be open beyond loopback or cannot reach this coordinator."""
    from wfjobs_dashboard import check_allowed_hosts, extra_missing, parse_allowed_hosts

    if extra_missing():
        raise ValueError(
            "--dashboard-listen needs the 'dashboard' extra: pip install "
            "'workflow-jobs[dashboard]' (or leave WFJOBS_DASHBOARD_LISTEN empty)"
        )
    try:
        loopback = is_loopback(settings.dashboard_listen, "dashboard address")
    except ValueError as e:
        raise ValueError(f"--dashboard-listen: {e}") from None
    if not loopback and not settings.tokens_file:
        raise ValueError(
            f"refusing to serve the dashboard on {settings.dashboard_listen} without "
            "authentication: set --tokens-file (WFJOBS_TOKENS_FILE) so operators log in "
            "with a token, or serve it on 127.0.0.1"
        )
    try:
        allowed = parse_allowed_hosts(settings.dashboard_allowed_hosts)
    except ValueError as e:
        raise ValueError(f"--dashboard-allowed-hosts: {e}") from None
    try:
        check_allowed_hosts(allowed, login=bool(settings.tokens_file))
    except ValueError as e:
        raise ValueError(f"--dashboard-allowed-hosts needs --tokens-file: {e}") from None
    if settings.tls_cert:
        raise ValueError(
            "the built-in dashboard talks plaintext to this coordinator, which serves TLS: "
            "leave --dashboard-listen empty and run `wfjobs dashboard --target HOST:PORT "
            "--ca FILE` instead"
        )


def _dashboard_target(settings: Settings, port: int) -> str:
    """Where the built-in dashboard reaches this coordinator."""
    host = settings.listen.rsplit(":", 1)[0].strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def migrate(url: str) -> None:
    from coordinator.store import open_store
    from coordinator.store.migrate import upgrade

    store = open_store(url)
    try:
        log.info(upgrade(store).describe(display_url(url)))
    finally:
        store.dispose()


async def serve(settings: Settings) -> None:
    """Run the coordinator until SIGTERM or SIGINT.

    Start order: the engine (schema check, clock, limits, listener,
    dispatcher), then its chores (``coordinator/chores``), then the gRPC port
    and the dashboard. Shutdown order, the reverse: the dashboard; the port
    (running RPCs get the drain timeout to finish); the chores; the engine
    (dispatcher, listener, store); telemetry flushed last.
    """
    from coordinator.api.server import CoordinatorServer
    from coordinator.chores import Chores
    from coordinator.engine import Engine
    from coordinator.store import open_store
    from coordinator.store.filelock import lock_sqlite_file
    from coordinator.telemetry import setup_telemetry

    # Held until the process exits: a second coordinator on the file refuses to start.
    file_lock = lock_sqlite_file(settings.database_url)
    if settings.migrate_on_start:
        migrate(settings.database_url)
    store = open_store(
        settings.database_url,
        session_url=settings.session_database_url,
        bounds=settings.connection_bounds(),
    )
    if store.capabilities.listen_notify:
        from coordinator.store.pooler import check_session_urls

        try:
            check_session_urls(settings.database_url, settings.session_database_url)
        except BaseException:
            store.dispose()
            raise
    telemetry = setup_telemetry()  # from OTEL_* and WFJOBS_METRICS_*; off by default
    engine = Engine(store, _engine_config(settings))
    chores = Chores(engine, _chores_config(settings))
    server = CoordinatorServer(engine, settings.listen, **_server_options(settings))
    telemetry.attach(engine)
    telemetry.start()

    async def shutdown(grace: float) -> None:
        await server.stop_serving(grace)
        await chores.stop()
        await engine.stop()

    await engine.start()
    await chores.start()
    await server.start()
    host = settings.listen.rsplit(":", 1)[0]
    log.info(
        "coordinator %s listening on %s:%d, store %s",
        server.engine.coordinator_id,
        host,
        server.port,
        display_url(settings.database_url),
    )
    if settings.session_database_url:
        log.info(
            "session connection (LISTEN) %s; statements without server-side prepares",
            display_url(settings.session_database_url),
        )
    from coordinator.chores.retention import describe_retention

    retention = chores.retention.config
    log.info(
        "finished jobs kept: %s; job events kept: %s; ended pauses kept: %s",
        describe_retention(retention.keep_s),
        "forever" if retention.keep_events_s is None else settings.event_retention,
        "forever" if retention.keep_pauses_s is None else settings.pause_retention,
    )
    dashboard = None
    if settings.dashboard_listen:
        from wfjobs_dashboard import (
            Dashboard,
            DashboardConfig,
            DashboardError,
            parse_allowed_hosts,
        )

        dashboard = Dashboard(
            DashboardConfig(
                target=_dashboard_target(settings, server.port),
                listen=settings.dashboard_listen,
                login=bool(settings.tokens_file),
                allowed_hosts=parse_allowed_hosts(settings.dashboard_allowed_hosts),
            )
        )
        try:
            await dashboard.start()
        except DashboardError as e:
            await shutdown(0)
            raise ValueError(str(e)) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down: draining for up to %.0fs", settings.drain_timeout_s)
    if dashboard is not None:
        await dashboard.stop()
    await shutdown(settings.drain_timeout_s)
    dispatcher = engine.dispatcher
    log.info(
        "dispatch: %d job(s) leased at insert (direct dispatch), %d by %d pass(es)",
        dispatcher.leased_at_insert,
        dispatcher.leased_by_pass,
        dispatcher.passes,
    )
    telemetry.shutdown()
    if file_lock is not None:
        file_lock.release()
    log.info("stopped")


def main(argv: list[str] | None = None) -> int:
    # Store calls run in threads; the default 5 ms GIL switch interval would
    # let a busy event loop hold them back that long on every round trip.
    sys.setswitchinterval(0.0005)
    defaults = Settings.from_env()
    args = _parser(defaults).parse_args(argv)
    configure_logging(defaults.log_format, defaults.log_level)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        if args.command == "migrate":
            migrate(args.database_url)
            return 0
        if args.command == "hash-token":
            from coordinator.api.auth import hash_token

            print(hash_token(sys.stdin.read().strip()))
            return 0
        settings = dataclasses.replace(
            defaults,
            listen=args.listen,
            database_url=args.database_url,
            session_database_url=args.session_database_url,
            migrate_on_start=args.migrate,
            drain_timeout_s=args.drain_timeout,
            retention=args.retention,
            event_retention=args.event_retention,
            pause_retention=args.pause_retention,
            database_timeout_s=args.database_timeout,
            database_tcp_timeout_s=args.database_tcp_timeout,
            statement_timeout_s=args.statement_timeout,
            dashboard_listen=args.dashboard_listen,
            dashboard_allowed_hosts=args.dashboard_allowed_hosts,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            tls_client_ca=args.tls_client_ca,
            tokens_file=args.tokens_file,
            auth_open_scaler=not args.scaler_requires_token,
            allow_unauthenticated=args.allow_unauthenticated,
        )
        _check_security(settings)
        # A malformed setting fails here, before anything starts.
        _engine_config(settings)
        _chores_config(settings)
        settings.connection_bounds()
        asyncio.run(serve(settings))
        return 0
    except SchemaMismatch as e:
        log.error("%s", e)
        return 2
    except DatabaseInUse as e:
        log.error("%s", e)
        return 6
    except ValueError as e:
        log.error("%s", e)
        return 5
    except StoreUnavailable as e:
        log.error("cannot reach the database: %s", e)
        return 3
    except OSError as e:
        log.error("%s", e)
        return 4


if __name__ == "__main__":
    sys.exit(main())
