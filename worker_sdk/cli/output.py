"""How ``wfjobs`` prints: tables and key/value blocks for people, JSON for scripts.

JSON uses protobuf field names, as grpcurl prints them; times for people are
written as the dashboard and the text logs write them (``2026-12-04 03:12:45 UTC``,
:mod:`workflowjobs.times`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO, cast

from google.protobuf import json_format
from google.protobuf.message import Message

from worker_sdk import JobView
from worker_sdk._admin_types import category_name, pause_scope_text
from workflowjobs import times
from workflowjobs.v1 import admin_service_pb2 as apb

__all__ = [
    "Output",
    "cell",
    "duration_text",
    "enum_name",
    "job_json",
    "message_dict",
    "payload_json",
    "limit_kind_text",
    "limit_value_text",
    "payload_text",
    "scope_text",
    "time_text",
    "timestamp",
]


class Output:
    """Prints tables or JSON."""

    def __init__(self, as_json: bool, stream: TextIO) -> None:
        self.as_json = as_json
        self._stream = stream

    def json(self, value: Any) -> None:
        self._stream.write(json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")

    def line(self, text: str = "") -> None:
        self._stream.write(text + "\n")

    def flush(self) -> None:
        """Push what was written to the reader now (a stream of lines)."""
        self._stream.flush()

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            self.line("(none)")
            return
        cells = [[cell(v) for v in row] for row in rows]
        widths = [len(h) for h in headers]
        for row in cells:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        self.line(fmt.format(*headers).rstrip())
        for row in cells:
            self.line(fmt.format(*row).rstrip())


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return time_text(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def time_text(value: datetime | None, *, milliseconds: bool = False) -> str:
    """A time as every surface writes it for people (:mod:`workflowjobs.times`); "-" for none."""
    if value is None:
        return "-"
    return times.time_text(value, milliseconds=milliseconds)


def timestamp(ts: Any) -> datetime | None:
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    return cast(datetime, ts.ToDatetime(tzinfo=UTC))


def message_dict(msg: Message) -> dict[str, Any]:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def raw_dict(value: Any) -> dict[str, Any]:
    """An SDK value as the contract's JSON (its ``raw`` message), as grpcurl prints it."""
    return message_dict(value.raw)


def job_json(job: JobView) -> dict[str, Any]:
    """The job as grpcurl prints it, plus the payload and result decoded.

    ``payload`` and ``result`` keep grpcurl's ``data`` (base64) and
    ``content_type`` and gain ``value`` (a JSON payload, decoded) or ``hex``
    and ``size`` (any other bytes).
    """
    data = message_dict(job.raw)
    for key, raw, content_type in (
        ("payload", job.payload, job.payload_content_type),
        ("result", job.result, job.result_content_type),
    ):
        if key in data and raw:
            data[key].update(payload_json(raw, content_type))
    return data


_NOT_JSON = object()


def _json_value(data: bytes, content_type: str) -> Any:
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in ("", "application/json") and not media.endswith("+json"):
        return _NOT_JSON
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return _NOT_JSON


def payload_json(data: bytes, content_type: str) -> dict[str, Any]:
    """``{"value": ...}`` for a JSON payload, else ``{"hex": ..., "size": ...}``."""
    value = _json_value(data, content_type)
    if value is not _NOT_JSON:
        return {"value": value}
    return {"hex": data.hex(), "size": len(data)}


def payload_text(data: bytes, content_type: str, *, limit: int = 64) -> str:
    """A payload as a person reads it: JSON decoded, text as is, other bytes as hex with size.

    Hex shows at most ``limit`` bytes.
    """
    if not data:
        return "(empty)"
    value = _json_value(data, content_type)
    if value is not _NOT_JSON:
        return json.dumps(value, ensure_ascii=False)
    if content_type.lower().startswith("text/"):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    shown = data[:limit].hex(" ")
    more = " ..." if len(data) > limit else ""
    kind = f" {content_type}" if content_type else ""
    return f"{len(data)} bytes{kind}: {shown}{more}"


def enum_name(value: Any) -> str:
    return getattr(value, "name", str(value)).lower()


def duration_text(start: datetime | None, end: datetime | None) -> str | None:
    if start is None or end is None:
        return None
    return f"{(end - start).total_seconds():.3f}s"


def scope_text(scope: Any) -> str:
    """A pause scope in the CLI's words ("job-type send-email (tenant acme)")."""
    return pause_scope_text(scope, kind_words="-")


def limit_kind_text(kind: int) -> str:
    """A ``LimitScopeKind`` as the CLI names it (``concurrency-key``)."""
    name = apb.LimitScopeKind.Name(kind).removeprefix("LIMIT_SCOPE_KIND_")
    return name.lower().replace("_", "-")


def limit_value_text(kind: int, value: str) -> str:
    """A limit's value; a category's by its name."""
    return category_name(value) if kind == apb.LIMIT_SCOPE_KIND_CATEGORY else value
