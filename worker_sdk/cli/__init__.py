"""``wfjobs``: the operator's command line, over the worker SDK's clients.

    wfjobs [--target HOST:PORT] [--json] COMMAND ...

Commands: ``jobs list|show|retry|cancel|unlock|replay|explain``, ``pause``,
``unpause``, ``pauses``, ``drain``, ``undrain``, ``stats``, ``workers``,
``enqueue``. Output is a table for people, or JSON (protobuf field names, as
grpcurl prints them) with ``--json``. The coordinator's address comes from
``--target``, else ``WFJOBS_TARGET``, else a profile, else 127.0.0.1:50051;
TLS, client certificates and tokens likewise (see
:mod:`worker_sdk._connection`, shared with the SDK). The exit codes are
stable (see :data:`~worker_sdk.cli.exit_codes.EXIT_CODES_HELP`, also printed by
``wfjobs --help``).

The CLI needs only the worker install (``pip install workflow-jobs``): it
talks to the coordinator through the SDK's clients.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TextIO

import grpc

from worker_sdk import WorkflowJobsError

from .._connection import ConfigError, ConnectionSettings, resolve_connection
from .arguments import TARGET_ENV
from .commands import Commands, UsageError
from .exit_codes import EXIT_BY_CODE, EXIT_ERROR, EXIT_USAGE
from .output import Output
from .parsers import build_parser

__all__ = ["build_parser", "console", "main"]

# 128 + SIGPIPE, what a shell reports for a tool killed by a closed pipe.
EXIT_BROKEN_PIPE = 141

_CONNECTION_OPTIONS = ("target", "tls", "ca", "cert", "key", "token", "timeout", "profile")


def _unavailable_hint(connection: ConnectionSettings, error: WorkflowJobsError) -> str:
    target, source = connection.target, connection.target_source
    text = error.message.lower()
    reason = "connection refused" if "refused" in text else error.message
    lines = [f"wfjobs: cannot reach the coordinator at {target} ({reason})."]
    if any(word in text for word in ("ssl", "handshake", "certificate", "tls")):
        if connection.tls:
            lines.append(
                "  The TLS handshake failed: check that --ca (WFJOBS_CA) is the CA that "
                "signed the coordinator's certificate, and --cert/--key if it requires "
                "client certificates."
            )
        else:
            lines.append("  It may serve TLS: pass --tls (system CAs) or --ca FILE (WFJOBS_CA).")
    else:
        lines.append(
            f"  Is it running and listening there? The address came from {source}; "
            f"set --target HOST:PORT, {TARGET_ENV} or a profile (--profile)."
        )
        if not connection.tls:
            lines.append("  If it serves TLS, pass --tls or --ca FILE.")
    return "\n".join(lines)


def _denied_hint(connection: ConnectionSettings, error: WorkflowJobsError) -> str:
    if error.code == grpc.StatusCode.UNAUTHENTICATED:
        given = "the token given was refused" if connection.token else "no token was given"
        return (
            f"wfjobs: the coordinator at {connection.target} wants a valid bearer token "
            f"({error.message}); {given}.\n"
            "  Pass --token TOKEN, or set WFJOBS_TOKEN / WFJOBS_TOKEN_FILE, or put "
            "token / token_file in a profile (--profile)."
        )
    return (
        f"wfjobs: {error.message} (PERMISSION_DENIED).\n"
        "  The token is valid but lacks the role or tenant this command needs "
        "(admin role for most commands, scheduler role for enqueue)."
    )


# Set either and gRPC core's own log lines reach stderr as usual (asked for).
GRPC_LOG_ENV = ("GRPC_VERBOSITY", "GRPC_TRACE")


def console() -> None:
    """The ``wfjobs`` console script: :func:`main`, with gRPC core's log lines
    (``I1201 ... ssl_transport_security.cc ... Handshake failed``) kept off
    stderr unless ``GRPC_VERBOSITY`` or ``GRPC_TRACE`` asks for them; the CLI
    says what went wrong itself."""
    if not any(os.environ.get(name) for name in GRPC_LOG_ENV):
        _python_only_stderr()
    sys.exit(main())


def _python_only_stderr() -> None:
    """Point file descriptor 2 at /dev/null and ``sys.stderr`` at a copy of it.

    gRPC core reads its verbosity when grpc is imported (before any of our
    code runs) and writes to descriptor 2 directly, so its lines are dropped
    there while Python's own writes (our messages, tracebacks) go on as before.
    """
    sys.stderr.flush()
    kept = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    sys.stderr = os.fdopen(
        kept, "w", buffering=1, encoding=sys.stderr.encoding, errors="backslashreplace"
    )


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    """Run one command; returns the exit code (see the module docstring)."""
    try:
        code = _run(argv, stdout or sys.stdout)
        (stdout or sys.stdout).flush()
        return code
    except BrokenPipeError:
        # The reader went away (`wfjobs ... | head`): stop quietly, as other
        # command-line tools do, and keep the interpreter from complaining
        # when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _run(argv: Sequence[str] | None, stdout: TextIO) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        connection = resolve_connection(
            {name: getattr(args, name, None) for name in _CONNECTION_OPTIONS}
        )
    except ConfigError as e:
        sys.stderr.write(f"wfjobs: {e}\n")
        return EXIT_USAGE
    args.target = connection.target
    args.timeout = connection.timeout
    args.json = getattr(args, "json", False)
    out = Output(args.json, stdout)
    commands = Commands(args, out, connection)
    try:
        return int(getattr(commands, args.handler)())
    except (UsageError, ConfigError) as e:
        sys.stderr.write(f"wfjobs: {e}\n")
        return EXIT_USAGE
    except ValueError as e:  # from the SDK's argument checks (unknown enum names, ...)
        sys.stderr.write(f"wfjobs: {e}\n")
        return EXIT_USAGE
    except WorkflowJobsError as e:
        if e.code == grpc.StatusCode.UNAVAILABLE:
            sys.stderr.write(_unavailable_hint(connection, e) + "\n")
        elif e.code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            sys.stderr.write(_denied_hint(connection, e) + "\n")
        elif e.code == grpc.StatusCode.UNIMPLEMENTED:
            sys.stderr.write(
                f"wfjobs: the coordinator at {args.target} does not implement this call "
                f"({e.message}); it is probably older than this CLI\n"
            )
        elif e.code == grpc.StatusCode.DEADLINE_EXCEEDED:
            sys.stderr.write(
                f"wfjobs: the coordinator at {args.target} did not answer within "
                f"{args.timeout:g}s (--timeout)\n"
            )
        else:
            sys.stderr.write(f"wfjobs: {e.message} ({e.code.name})\n")
        return EXIT_BY_CODE.get(e.code, EXIT_ERROR)
    except KeyboardInterrupt:
        return 130
    finally:
        commands.close()
