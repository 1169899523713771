"""``wfjobs``: the operator's command line, over the worker SDK's clients.

    wfjobs [--target HOST:PORT] [--json] COMMAND ...

Commands: ``jobs list|show|retry|cancel|unlock|replay|explain``, ``pause``,
``unpause``, ``pauses``, ``drain``, ``undrain``, ``stats``, ``workers``,
``enqueue``. Output is a table for people, or JSON (protobuf field names, as
grpcurl prints them) with ``--json``. The coordinator's address comes from
``--target``, else ``WFJOBS_TARGET``, else 127.0.0.1:50051. The exit codes are
stable (see :data:`~worker_sdk.cli.commands.EXIT_CODES_HELP`, also printed by
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

from .commands import (
    DEFAULT_TARGET,
    EXIT_BY_CODE,
    EXIT_ERROR,
    EXIT_USAGE,
    TARGET_ENV,
    Commands,
    UsageError,
    build_parser,
)
from .output import Output

__all__ = ["build_parser", "main"]


def _connection_hint(target: str, error: WorkflowJobsError) -> str:
    source = (
        "--target"
        if "--target" in " ".join(sys.argv)
        else (f"{TARGET_ENV}" if os.environ.get(TARGET_ENV) else "the default")
    )
    reason = "connection refused" if "refused" in error.message.lower() else error.message
    return (
        f"wfjobs: cannot reach the coordinator at {target} ({reason}).\n"
        f"  Is it running and listening there? The address came from {source}; "
        f"set --target HOST:PORT or {TARGET_ENV}."
    )


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> int:
    """Run one command; returns the exit code (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    args.target = getattr(args, "target", None) or os.environ.get(TARGET_ENV) or DEFAULT_TARGET
    args.json = getattr(args, "json", False)
    args.timeout = getattr(args, "timeout", 30.0)
    out = Output(args.json, stdout or sys.stdout)
    commands = Commands(args, out)
    try:
        return getattr(commands, args.handler)()
    except UsageError as e:
        sys.stderr.write(f"wfjobs: {e}\n")
        return EXIT_USAGE
    except ValueError as e:  # from the SDK's argument checks (unknown enum names, ...)
        sys.stderr.write(f"wfjobs: {e}\n")
        return EXIT_USAGE
    except WorkflowJobsError as e:
        if e.code == grpc.StatusCode.UNAVAILABLE:
            sys.stderr.write(_connection_hint(args.target, e) + "\n")
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
