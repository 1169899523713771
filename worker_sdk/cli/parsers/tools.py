"""``wfjobs dashboard`` and ``completion``: the web dashboard and shell completion."""

from __future__ import annotations

from ..arguments import CommandParsers, Subcommands
from ..completion import SHELLS


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    p = parsers.add(
        sub, "dashboard", "dashboard", "serve the web dashboard (see docs/dashboard.md)"
    )
    from wfjobs_dashboard.command import add_arguments as dashboard_arguments

    dashboard_arguments(p)

    p = parsers.add(sub, "completion", "completion", "print a shell completion script")
    p.add_argument(
        "shell",
        choices=SHELLS,
        help="bash: source <(wfjobs completion bash); zsh: source <(wfjobs completion zsh)",
    )
