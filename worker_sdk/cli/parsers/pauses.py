"""``wfjobs pause``, ``unpause`` and ``pauses``: pause scopes and their history."""

from __future__ import annotations

import os

from ..arguments import PAUSE_KINDS, CommandParsers, Subcommands, parse_duration


def add_commands(sub: Subcommands, parsers: CommandParsers) -> None:
    for name, text in (
        ("pause", "pause a tenant, definition, instance, job type or job category"),
        ("unpause", "lift the pauses of a tenant, definition, instance, job type or category"),
    ):
        p = parsers.add(sub, name, name, text)
        p.add_argument("kind", choices=PAUSE_KINDS, help="what to pause: " + ", ".join(PAUSE_KINDS))
        p.add_argument(
            "value",
            nargs="?",
            default="",
            help="tenant id, definition id, instance id, job type or category "
            "(continuation, activity_work, integration, maintenance, custom)",
        )
        p.add_argument("--tenant", default="", help="limit the pause to one tenant")
        p.add_argument(
            "--actor",
            default=os.environ.get("USER", ""),
            help="who (default $USER); recorded as such only when the coordinator runs "
            "without authentication; else the token's name is (a pause keeps this as a note)",
        )
        if name == "pause":
            p.add_argument("--reason", default="", help="why (kept in the audit history)")
            p.add_argument(
                "--for",
                dest="duration",
                type=parse_duration,
                help="lift by itself after this long (a duration: 90s, 5m, 2h, 1d, 250ms (a bare number is seconds))",
            )
    p = parsers.add(sub, "pauses", "pauses", "list active pauses (--all: the audit history)")
    p.add_argument("--all", action="store_true", help="include lifted pauses")
    p.add_argument("--tenant", default="", help="only the pauses of this tenant")
