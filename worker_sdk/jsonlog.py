"""JSON log lines for workers: one object per record (the coordinator writes the same).

Every line has ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``;
the job fields that :attr:`JobContext.logger` adds (``job_id``, ``job_type``,
``tenant_id``, ``attempt``) and any of ``worker_id``, ``trace_id`` and
``span_id`` given as ``extra`` are copied as they are. When OpenTelemetry is in
use and a span is current, its trace and span ids are added. Exceptions
appear as ``exception`` (the formatted traceback). The format lives in
:mod:`workflowjobs.jsonlog`, beside the contract both sides share.

Use it in a worker process::

    from worker_sdk import jsonlog

    jsonlog.configure("INFO")
"""

from __future__ import annotations

from workflowjobs.jsonlog import JsonFormatter, configure

__all__ = ["JsonFormatter", "configure"]
