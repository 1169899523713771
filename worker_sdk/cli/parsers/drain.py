"""``wfjobs drain`` and ``undrain``: stop and resume handing out jobs."""

from __future__ import annotations

from ..arguments import CommandParsers, Subcommands


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    p = parsers.add(
        sub, "drain", "drain", "stop handing out jobs: this coordinator, the cluster or one worker"
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--cluster", action="store_true", help="every coordinator on the store")
    group.add_argument("--worker", metavar="WORKER_ID", help="one worker (see wfjobs workers)")
    p = parsers.add(
        sub,
        "undrain",
        "undrain",
        "hand out jobs again: this coordinator, the cluster or one worker",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--cluster", action="store_true", help="lift the cluster-wide drain")
    group.add_argument("--worker", metavar="WORKER_ID", help="one worker drained with --worker")
