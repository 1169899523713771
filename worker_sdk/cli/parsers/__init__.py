"""The argument parser of ``wfjobs``: one module per command group, each adding its commands.

A command's parser sets ``handler``, the name of the
:class:`~worker_sdk.cli.commands.Commands` method that runs it. A new command
goes into its group's module (a new group into a new module, registered in
:data:`_GROUPS`); the options every command shares are in
:mod:`worker_sdk.cli.arguments`.
"""

from __future__ import annotations

import argparse

from ..._version import __version__
from ..arguments import CommandParsers, common_options
from ..exit_codes import EXIT_CODES_HELP
from . import (
    cluster,
    drain,
    enqueue,
    events,
    groups,
    jobs,
    limits,
    pauses,
    rate_limits,
    tenants,
    tools,
)

__all__ = ["build_parser"]

# In the order ``wfjobs --help`` lists them.
_GROUPS = (
    jobs,
    groups,
    events,
    pauses,
    drain,
    limits,
    tenants,
    rate_limits,
    cluster,
    tools,
    enqueue,
)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``wfjobs`` command line."""
    common = common_options()
    parser = argparse.ArgumentParser(
        prog="wfjobs",
        description="Operate a workflow-jobs coordinator.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"wfjobs {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parsers = CommandParsers(common)
    for group in _GROUPS:
        group.add_commands(sub, parsers)
    return parser
