"""What the parsers of ``wfjobs`` share: argument types, the connection options, the job filter.

Each command group's module in :mod:`worker_sdk.cli.parsers` builds its
subcommands from these; :class:`CommandParsers` adds one command with the
connection options every command accepts.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

from worker_sdk import JobEventKind
from workflowjobs.contract import INT32_MAX, INT32_MIN

from .._admin_types import LIMIT_SCOPE_KINDS, PAUSE_SCOPE_KINDS
from .._connection import DEFAULT_TARGET

TARGET_ENV = "WFJOBS_TARGET"

STATUSES = ("pending", "running", "completed", "faulted", "cancelled")
# As the contract declares them, written as the CLI writes names (job-type).
PAUSE_KINDS = tuple(k.replace("_", "-") for k in PAUSE_SCOPE_KINDS)
LIMIT_KINDS = tuple(k.replace("_", "-") for k in LIMIT_SCOPE_KINDS)
# Category names a weight takes; "unspecified" names jobs enqueued without one.
CATEGORIES = (
    "unspecified",
    "continuation",
    "activity_work",
    "integration",
    "maintenance",
    "custom",
)

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


@dataclasses.dataclass(frozen=True)
class CommandParsers:
    """Adds commands that accept the connection options (``common``) before or after them."""

    common: argparse.ArgumentParser

    def add(
        self, parent: Subcommands, name: str, handler: str, help: str
    ) -> argparse.ArgumentParser:
        """A command ``name`` run by the ``Commands`` method named ``handler``."""
        p = parent.add_parser(name, help=help, description=help, parents=[self.common])
        p.set_defaults(handler=handler)
        return p


_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def parse_duration(text: str) -> timedelta:
    """``90``, ``90s``, ``5m``, ``2h``, ``1d``, ``250ms`` as a timedelta."""
    match = _DURATION_RE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 30s, 5m, 2h, 1d)")
    try:
        return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} is too long a duration") from None


def int32(text: str) -> int:
    """An integer argument the protocol carries as a 32-bit integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    low, high = INT32_MIN, INT32_MAX
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{text} is out of range ({low}..{high})")
    return value


def add_filter_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("filter")
    g.add_argument(
        "--status",
        action="append",
        metavar="STATUS",
        help=f"one of {', '.join(STATUSES)} (or JOB_STATUS_PENDING, ...; repeat or comma-separate)",
    )
    g.add_argument("--tenant", default="", help="tenant id")
    g.add_argument(
        "--job-type",
        "--type",  # the spelling before job-type was the one; kept for scripts
        dest="job_type",
        action="append",
        metavar="TYPE",
        help="job type (repeat or comma-separate for any of several; --type is the same)",
    )
    g.add_argument("--definition", default="", help="workflow definition id")
    g.add_argument("--instance", default="", help="workflow instance id")
    g.add_argument("--correlation", default="", help="correlation id")
    g.add_argument(
        "--parent", default="", help="only the child jobs of this job (its handler enqueued them)"
    )
    g.add_argument("--group", default="", help="only the members of this job group")
    g.add_argument(
        "--category",
        default=None,
        help="continuation, activity_work, integration, maintenance or custom",
    )


EVENT_KINDS = [k.value.lower() for k in JobEventKind if k != JobEventKind.UNSPECIFIED]


def event_kind(text: str) -> JobEventKind:
    name = text.strip().upper().removeprefix("JOB_EVENT_KIND_")
    if name.lower() not in EVENT_KINDS:
        raise argparse.ArgumentTypeError(
            f"--kind {text!r} is not an event kind; use one of: {', '.join(EVENT_KINDS)}"
        )
    return JobEventKind(name)


def utc_time(text: str) -> datetime:
    """An ISO 8601 time; one without an offset is UTC."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time (e.g. 2026-12-01T06:00:00Z)"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def common_options() -> argparse.ArgumentParser:
    """Options accepted before or after the command (SUPPRESS keeps the first value given)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--target",
        default=argparse.SUPPRESS,
        help=f"coordinator host:port (env {TARGET_ENV}; default {DEFAULT_TARGET})",
    )
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    p.add_argument(
        "--timeout",
        type=float,
        default=argparse.SUPPRESS,
        help="seconds to wait for each call (env WFJOBS_TIMEOUT; default 30)",
    )
    g = p.add_argument_group("connection (see also --profile)")
    g.add_argument(
        "--tls",
        action="store_true",
        default=argparse.SUPPRESS,
        help="connect with TLS, trusting the system CAs (env WFJOBS_TLS=1)",
    )
    g.add_argument(
        "--ca",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="CA bundle (PEM) to trust; implies --tls (env WFJOBS_CA)",
    )
    g.add_argument(
        "--cert",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="client certificate (PEM) for mTLS, with --key (env WFJOBS_CERT)",
    )
    g.add_argument(
        "--key",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="private key (PEM) of --cert (env WFJOBS_KEY)",
    )
    g.add_argument(
        "--token",
        default=argparse.SUPPRESS,
        help="bearer token (env WFJOBS_TOKEN, or a file named by WFJOBS_TOKEN_FILE)",
    )
    g.add_argument(
        "--profile",
        metavar="NAME",
        default=argparse.SUPPRESS,
        help="connection profile from ~/.config/wfjobs/config.toml (env WFJOBS_PROFILE; "
        "default: the profile named 'default', if any)",
    )
    return p


def limit_scope_arguments(p: argparse.ArgumentParser) -> None:
    """The KIND VALUE pair naming a limited scope (concurrency and rate limits)."""
    p.add_argument("kind", choices=LIMIT_KINDS, help="scope kind: " + ", ".join(LIMIT_KINDS))
    p.add_argument(
        "value",
        help="tenant id, job type, definition id, concurrency key or category name; "
        "'*' limits each value of the kind separately",
    )


def tenant_category_arguments(p: argparse.ArgumentParser) -> None:
    """The TENANT CATEGORY pair naming a category weight."""
    p.add_argument("tenant", help="the tenant id")
    p.add_argument("category", choices=CATEGORIES, help="the category: " + ", ".join(CATEGORIES))
