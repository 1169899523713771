"""The operator dashboard: a small web application over the public gRPC API.

It runs beside the coordinator (``python -m coordinator serve
--dashboard-listen 127.0.0.1:8080``; ``make run`` does this) or on its own
against any cluster (``wfjobs dashboard --target HOST:PORT --listen
127.0.0.1:8080``). A package of its own beside ``worker_sdk``: it calls only
``AdminService`` through the SDK's public :class:`~worker_sdk.AdminClient`,
and follows ``WatchJobEvents`` (the SDK's ``watch_events``) to update open
pages as jobs change, so it needs the worker install plus the ``dashboard``
extra (aiohttp, Jinja2). It imports nothing of ``coordinator``; the coordinator
reaches it through this module only.

Modules: :mod:`.app` (the middleware and routes), one per page
(:mod:`.overview`, :mod:`.jobs`, :mod:`.pauses`, :mod:`.tenants`,
:mod:`.limits`, :mod:`.workers`), :mod:`.actions` (the one table of
actions), :mod:`.login` and :mod:`.session`, :mod:`.site` (what handlers
share), :mod:`.events` (live updates), :mod:`.guard` (host names, login
throttling), :mod:`.backend` (the coordinator, through the SDK), :mod:`.filters`
(the jobs list's filter fields, spelled once), :mod:`.views` (what pages show,
as values), :mod:`.templating` and ``templates/`` (the HTML: one Jinja2
template per page over a shared layout, autoescaped), :mod:`.command`
(``wfjobs dashboard``).

Login: on a loopback address the dashboard needs none and calls with its own
token (``--token``, if the coordinator wants one). Anywhere else it requires a
token login, and refuses to start when the coordinator accepts calls without
a token (a login could not be checked). A logged-in session calls with its own
token, so the coordinator applies that token's role and tenant scope.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
from typing import TYPE_CHECKING

import grpc

from worker_sdk import AdminClient, WorkflowJobsError
from workflowjobs import addresses

if TYPE_CHECKING:
    from aiohttp import web

    from .backend import Backend

from .guard import check_allowed_hosts, parse_allowed_hosts

# What the 'dashboard' extra installs (pyproject.toml).
EXTRA_MODULES = ("aiohttp", "jinja2")


def extra_missing() -> list[str]:
    """The modules of the 'dashboard' extra that are not installed."""
    import importlib.util

    return [m for m in EXTRA_MODULES if importlib.util.find_spec(m) is None]


__all__ = [
    "Dashboard",
    "DashboardConfig",
    "DashboardError",
    "check_allowed_hosts",
    "extra_missing",
    "is_loopback",
    "parse_allowed_hosts",
    "run_dashboard",
    "split_listen",
]

log = logging.getLogger("wfjobs_dashboard")

DEFAULT_LISTEN = "127.0.0.1:8080"


class DashboardError(Exception):
    """The dashboard cannot start as configured; the message says what to change."""


def split_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) into its parts; ValueError says what is wrong."""
    return addresses.split_listen(listen, "dashboard address")


def is_loopback(listen: str) -> bool:
    """True when the dashboard's ``listen`` is reachable from this machine only."""
    return addresses.is_loopback(listen, "dashboard address")


@dataclasses.dataclass(frozen=True)
class DashboardConfig:
    """Where the dashboard listens and how it reaches the coordinator.

    Attributes:
        target: ``host:port`` of the coordinator.
        listen: ``host:port`` to serve HTTP on (port 0 picks a free one).
        credentials: TLS channel credentials to the coordinator; None for plaintext.
        token: The dashboard's own token, used when there is no login.
        timeout: Seconds per call to the coordinator for an action.
        page_timeout: Seconds per call a page makes (a hung coordinator shows
            as not answering this soon).
        login: Require a token login even on loopback (always required elsewhere).
        actor: Who pauses are recorded as when the coordinator runs without
            authentication (otherwise the coordinator records the token's name).
        secure_cookie: Mark the session cookie Secure (when HTTPS terminates in front).
        allowed_hosts: With login, the host names (``name`` or ``name:port``)
            browsers reach the dashboard by, besides the loopback ones; every
            other ``Host`` is answered 421 (a DNS-rebinding defence).
    """

    target: str
    listen: str = DEFAULT_LISTEN
    credentials: grpc.ChannelCredentials | None = None
    token: str = ""
    timeout: float = 30.0
    page_timeout: float = 5.0
    login: bool = False
    actor: str = "dashboard"
    secure_cookie: bool = False
    allowed_hosts: tuple[str, ...] = ()

    @property
    def login_required(self) -> bool:
        return self.login or not is_loopback(self.listen)


class Dashboard:
    """A running dashboard: :meth:`start` it inside an event loop, :meth:`stop` it after."""

    def __init__(self, config: DashboardConfig) -> None:
        self.config = config
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._backend: Backend | None = None
        self._channel: grpc.Channel | None = None
        self._events_channel: grpc.aio.Channel | None = None
        # Who the sessions without login are: the dashboard token's name, when it has one.
        self._actor = config.actor

    @property
    def url(self) -> str:
        host, _ = split_listen(self.config.listen)
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Check the coordinator, then serve.

        Raises:
            DashboardError: Login is required but the coordinator takes
                anonymous calls, the token is refused, or the address is unusable.
        """
        from aiohttp import web

        from .app import AppConfig, build_app
        from .backend import Backend
        from .guard import HostCheck

        config = self.config
        try:
            host, port = split_listen(config.listen)
            hosts = HostCheck(config.allowed_hosts, login=config.login_required)
        except ValueError as exc:
            raise DashboardError(str(exc)) from None
        try:
            check_allowed_hosts(config.allowed_hosts, login=config.login_required)
        except ValueError as exc:
            raise DashboardError(
                f"{exc}; turn login on (--login, or --tokens-file for the built-in dashboard)"
            ) from None
        if config.credentials is not None:
            self._channel = grpc.secure_channel(config.target, config.credentials)
            self._events_channel = grpc.aio.secure_channel(config.target, config.credentials)
        else:
            self._channel = grpc.insecure_channel(config.target)
            self._events_channel = grpc.aio.insecure_channel(config.target)
        backend = Backend(
            self._channel,
            timeout=config.timeout,
            events_channel=self._events_channel,
            page_timeout=config.page_timeout,
            target=config.target,
        )
        self._backend = backend
        try:
            await self._check(backend)
            app = build_app(
                backend,
                AppConfig(
                    login=config.login_required,
                    token="" if config.login_required else config.token,
                    actor=self._actor,
                    secure_cookie=config.secure_cookie,
                ),
                hosts=hosts,
            )
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, host, port)
            try:
                await site.start()
            except OSError as exc:
                await runner.cleanup()
                raise DashboardError(
                    f"cannot serve the dashboard on {config.listen}: {exc}"
                ) from None
        except BaseException:
            backend.close()
            self._channel.close()
            self._channel = None
            await self._events_channel.close(None)
            self._events_channel = None
            raise
        self._runner = runner
        addresses = runner.addresses
        self.port = hosts.port = int(addresses[0][1]) if addresses else port
        log.info(
            "dashboard listening on %s (coordinator %s, %s)",
            self.url,
            config.target,
            "token login required" if config.login_required else "no login: loopback only",
        )
        if config.login_required and not is_loopback(config.listen) and not config.allowed_hosts:
            log.warning(
                "dashboard: no --allowed-hosts, so it answers only loopback host names "
                "(127.0.0.1, localhost); name the host browsers use to reach it"
            )

    async def _check(self, backend: Backend) -> None:
        config = self.config
        call = backend.call
        if config.login_required:
            try:
                await call("", AdminClient.get_stats)
            except WorkflowJobsError as exc:
                if exc.code in (
                    grpc.StatusCode.UNAUTHENTICATED,
                    grpc.StatusCode.PERMISSION_DENIED,
                ):
                    return
                raise DashboardError(
                    f"cannot check that the coordinator at {config.target} authenticates "
                    f"callers ({exc.message}, {exc.code.name}); the dashboard needs that to "
                    "check logins"
                ) from None
            where = "with login on" if is_loopback(config.listen) else "beyond loopback"
            raise DashboardError(
                f"refusing to serve the dashboard on {config.listen} {where}: the "
                f"coordinator at {config.target} accepts calls without a token, so a login "
                "could not be checked; turn on its authentication (--tokens-file) or serve "
                "the dashboard on 127.0.0.1"
            )
        try:
            await call(config.token, AdminClient.get_stats)
            me = await call(config.token, AdminClient.who_am_i)
            if me.authenticated:
                self._actor = me.name
        except WorkflowJobsError as exc:
            if exc.code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                raise DashboardError(
                    f"the coordinator at {config.target} refuses the dashboard's token "
                    f"({exc.message}); give an admin token for every tenant (--token, "
                    "WFJOBS_TOKEN), or turn on login (--login) so each operator logs in "
                    "with their own"
                ) from None
            log.warning(
                "dashboard: the coordinator at %s does not answer yet (%s); pages show "
                "the error until it does",
                config.target,
                exc.message,
            )

    async def stop(self) -> None:
        """Stop serving and close the channel."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._backend is not None:
            self._backend.close()
            self._backend = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._events_channel is not None:
            await self._events_channel.close(None)
            self._events_channel = None


async def _serve_until_signalled(config: DashboardConfig) -> None:
    dashboard = Dashboard(config)
    await dashboard.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await dashboard.stop()


def run_dashboard(config: DashboardConfig) -> None:
    """Serve the dashboard until SIGTERM or SIGINT.

    Raises:
        DashboardError: It cannot start (see :meth:`Dashboard.start`).
    """
    asyncio.run(_serve_until_signalled(config))
