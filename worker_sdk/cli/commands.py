"""The commands of ``wfjobs``.

One :class:`Commands` method per command, each returning an exit code; the
parser (:mod:`worker_sdk.cli.parsers`, one module per command group) maps
command lines onto them by name. Printing is :mod:`worker_sdk.cli.output`,
running one command line is :func:`worker_sdk.cli.main`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc

from worker_sdk import (
    AdminClient,
    DeadlineExceededError,
    EnqueueResult,
    GroupView,
    JobEvent,
    JobEventFilter,
    JobFilter,
    JobRequest,
    JobStats,
    JobStatus,
    JobView,
    PermissionDeniedError,
    SchedulerClient,
    UnauthenticatedError,
    Uniqueness,
    WorkflowJobsError,
)
from worker_sdk import WorkflowRef as SdkWorkflowRef
from workflowjobs.v1 import admin_service_pb2 as apb
from workflowjobs.v1 import job_pb2

from .._connection import ConnectionSettings
from .arguments import STATUSES, int32, parse_duration
from .completion import completion_script
from .exit_codes import (
    EXIT_BY_CODE,
    EXIT_ERROR,
    EXIT_JOB_FAILED,
    EXIT_NOT_CONFIRMED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WAIT_ENDED,
)
from .output import (
    Output,
    cell,
    duration_text,
    enum_name,
    job_json,
    limit_kind_text,
    limit_value_text,
    message_dict,
    payload_text,
    raw_dict,
    scope_text,
    time_text,
)
from .parsers import build_parser


class UsageError(Exception):
    """Arguments that make no sense together; exit code 2."""


# -- argument helpers ----------------------------------------------------------------------


def _attempt_text(job: JobView) -> str:
    released = job.released_attempts
    note = f" ({released} released, not counted)" if released else ""
    return f"{job.attempt} of {job.max_attempts}{note}"


def _statuses(values: Sequence[str] | None) -> list[str]:
    out: list[str] = []
    for value in values or ():
        for part in value.split(","):
            # grpcurl's names (JOB_STATUS_PENDING) are accepted too.
            name = part.strip().lower().removeprefix("job_status_")
            if not name:
                continue
            if name not in STATUSES:
                raise UsageError(f"unknown status {part!r}; expected one of: {', '.join(STATUSES)}")
            out.append(name)
    return out


def _filter(args: argparse.Namespace) -> JobFilter:
    return JobFilter(
        statuses=_statuses(args.status),
        tenant_id=args.tenant,
        job_types=_job_types(args.job_type),
        definition_id=args.definition,
        instance_id=args.instance,
        correlation_id=args.correlation,
        category=args.category,
        parent_job_id=args.parent,
        group_id=args.group,
    )


def _group_json(group: GroupView) -> dict[str, Any]:
    data = {f.name: getattr(group, f.name) for f in dataclasses.fields(group)}
    for key in ("create_time", "close_time", "complete_time"):
        data[key] = data[key].isoformat() if data[key] else None
    return data


def _job_types(values: Sequence[str] | None) -> list[str]:
    return [t for value in values or () for t in (p.strip() for p in value.split(",")) if t]


def _has_filter(args: argparse.Namespace) -> bool:
    return bool(
        args.status
        or args.tenant
        or args.job_type
        or args.definition
        or args.instance
        or args.correlation
        or args.category
        or args.parent
        or args.group
    )


# -- commands ------------------------------------------------------------------------------


class Commands:
    """One method per command; each returns an exit code."""

    def __init__(
        self, args: argparse.Namespace, out: Output, connection: ConnectionSettings
    ) -> None:
        self.args = args
        self.out = out
        self.connection = connection
        self.target = connection.target
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.target, **self.connection.client_options())
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()

    def dashboard(self) -> int:
        # The dashboard is a package of its own (the `dashboard` extra); only
        # this subcommand reaches it.
        from wfjobs_dashboard import command

        return command.run(self.args, self.connection)

    # events -------------------------------------------------------------------------------

    def events_watch(self) -> int:
        a = self.args
        flt = JobEventFilter(
            tenant_id=a.tenant,
            definition_id=a.definition,
            instance_id=a.instance,
            correlation_id=a.correlation,
            job_type=a.job_type,
            kinds=list(a.kind or ()),
            job_id=a.job,
            group_id=a.group,
        )
        options = self.connection.client_options()
        options["timeout"] = None
        received = 0
        with SchedulerClient(self.target, **options) as scheduler:
            events = scheduler.watch_events(flt, after=a.after or None, from_oldest=a.from_oldest)
            for event in events:
                self._print_event(event)
                received += 1
                if a.count and received >= a.count:
                    break
        return EXIT_OK

    def _print_event(self, event: JobEvent) -> None:
        if self.out.as_json:
            self.out.line(json.dumps(message_dict(event.raw), separators=(",", ":")))
        else:
            when = time_text(event.time, milliseconds=True) if event.time else ""
            detail = event.error or (
                payload_text(event.result, event.result_content_type)
                if event.result is not None
                else ""
            )
            group = (f"group={event.group_id}",) if event.group_id else ()
            self.out.line(
                "  ".join(
                    (
                        event.cursor,
                        when,
                        event.kind.value,
                        event.job_id,
                        event.tenant_id,
                        event.job_type,
                        f"attempt={event.attempt}",
                        *group,
                        detail,
                    )
                ).rstrip()
            )
        self.out.flush()

    # jobs ---------------------------------------------------------------------------------

    def jobs_list(self) -> int:
        a = self.args
        flt = _filter(a)
        jobs: list[JobView] = []
        token = a.page_token
        while True:
            page = self.admin.list_jobs(
                flt, page_size=a.limit, page_token=token, newest_first=a.sort == "newest"
            )
            jobs.extend(page.jobs)
            token = page.next_page_token
            if not a.all or not token:
                break
        if self.out.as_json:
            self.out.json({"jobs": [job_json(j) for j in jobs], "next_page_token": token})
            return EXIT_OK
        self.out.table(
            ["ID", "TYPE", "TENANT", "STATUS", "ATTEMPT", "CREATED", "DUE", "LAST ERROR"],
            [
                (
                    j.id,
                    j.job_type,
                    j.tenant_id,
                    enum_name(j.status),
                    f"{j.attempt}/{j.max_attempts}",
                    j.create_time,
                    j.due_time,
                    j.last_error or None,
                )
                for j in jobs
            ],
        )
        if token:
            self.out.line(f"(more: --page-token {token}, or --all)")
        return EXIT_OK

    def jobs_count(self) -> int:
        page = self.admin.list_jobs(_filter(self.args), page_size=1, include_total=True)
        if self.out.as_json:
            self.out.json({"count": page.total_count})
        else:
            self.out.line(str(page.total_count))
        return EXIT_OK

    def jobs_show(self) -> int:
        job = self.admin.get_job(self.args.job_id)
        if self.out.as_json:
            self.out.json(job_json(job))
            return EXIT_OK
        self._show(job)
        return EXIT_OK

    def _fields(self, fields: Sequence[tuple[str, Any]]) -> None:
        """``key  value`` lines, keys aligned; None values are left out."""
        width = max(len(k) for k, _ in fields)
        for key, value in fields:
            if value is not None:
                self.out.line(
                    f"{key:<{width}}  {cell(value) if not isinstance(value, str) else value}"
                )

    def _show(self, job: JobView) -> None:
        wf = job.workflow
        running = job.status.name == "RUNNING"
        fields = [
            ("id", job.id),
            ("type", job.job_type),
            ("tenant", job.tenant_id),
            (
                "status",
                # Once it ended, the cancel is its status (and its reason below).
                enum_name(job.status)
                + (" (cancel requested)" if job.cancel_requested and running else ""),
            ),
            ("attempt", _attempt_text(job)),
            ("priority", job.priority),
            ("category", enum_name(job.category)),
            (
                "definition",
                # Version 0 is "none given", not a version.
                (
                    f"{wf.definition_id} v{wf.definition_version}"
                    if wf.definition_version
                    else wf.definition_id
                )
                if wf.definition_id
                else None,
            ),
            ("instance", wf.instance_id or None),
            ("activity", wf.activity_id or None),
            ("correlation", wf.correlation_id or None),
            ("created", job.create_time),
            ("due", job.due_time),
            ("finished", job.finish_time),
            # A lease describes a running attempt; an ended job's last owner is in attempts.
            ("lease owner", (job.lease_owner or None) if running else None),
            ("lease expires", job.lease_expire_time if running else None),
            ("last error", job.last_error or None),
            ("cancel reason", job.cancel_reason or None),
            ("replay of", job.replay_of or None),
            ("parent", job.parent_job_id or None),
            ("ordering key", job.ordering_key or None),
            ("group", job.group_id or None),
            ("payload", payload_text(job.payload, job.payload_content_type)),
            # A job cancelled while running keeps the result its attempt returned.
            (
                "result",
                payload_text(job.result, job.result_content_type)
                if job.status.name == "COMPLETED" or job.result
                else None,
            ),
        ]
        self._fields(fields)
        if job.attempts:
            self.out.line()
            self.out.table(
                ["#", "WORKER", "STARTED", "ENDED", "DURATION", "OUTCOME", "ERROR"],
                [
                    (
                        a.number,
                        a.worker_id or None,
                        a.start_time,
                        a.end_time,
                        duration_text(a.start_time, a.end_time),
                        enum_name(a.outcome),
                        a.error or None,
                    )
                    for a in job.attempts
                ],
            )
        self._last_traceback(job)

    def _last_traceback(self, job: JobView) -> None:
        failed = [a for a in job.attempts if a.traceback]
        if failed:
            last = failed[-1]
            self.out.line()
            self.out.line(
                f"traceback of attempt {last.number} ({last.worker_id or 'unknown worker'}):"
            )
            for line in last.traceback.rstrip("\n").splitlines():
                self.out.line(f"  {line}")

    def jobs_retry(self) -> int:
        a = self.args
        if a.job_ids:
            return self._each(
                a.job_ids,
                lambda j: self.admin.retry_job(j, keep_attempts=a.keep_attempts),
                "retried",
                # Retrying runs the job again now; a due time it waited for is not kept.
                note=", due now",
            )
        self._need_filter("retry")

        def run(dry_run: bool) -> Any:
            return self.admin.bulk_retry_jobs(
                _filter(a), dry_run=dry_run, keep_attempts=a.keep_attempts
            )

        if not self._confirmed(run, "retry"):
            return EXIT_NOT_CONFIRMED
        return self._bulk(run(a.dry_run), "retry", note=", each due now")

    def jobs_cancel(self) -> int:
        a = self.args
        if a.job_ids:
            return self._each(
                a.job_ids, lambda j: self.admin.cancel_job(j, reason=a.reason), "cancelled"
            )
        self._need_filter("cancel")

        def run(dry_run: bool) -> Any:
            return self.admin.bulk_cancel_jobs(_filter(a), dry_run=dry_run, reason=a.reason)

        if not self._confirmed(run, "cancel"):
            return EXIT_NOT_CONFIRMED
        return self._bulk(run(a.dry_run), "cancel")

    def jobs_run_now(self) -> int:
        return self._each(self.args.job_ids, self.admin.run_job_now, "made due now")

    def jobs_purge(self) -> int:
        a = self.args
        self._need_filter("purge")

        def run(dry_run: bool) -> Any:
            return self.admin.purge_jobs(_filter(a), dry_run=dry_run)

        if not self._confirmed(run, "purge"):
            return EXIT_NOT_CONFIRMED
        result = run(a.dry_run)
        if self.out.as_json:
            self.out.json({**dataclasses.asdict(result), "dry_run": a.dry_run})
            return EXIT_OK
        kept = (
            f"; {result.kept} kept (FAULTED jobs holding their ordering key: cancel one to set "
            "it aside; members of groups not completed)"
            if result.kept
            else ""
        )
        if a.dry_run:
            self.out.line(
                f"would purge {result.matched} finished job(s) (dry run; nothing deleted){kept}"
            )
        else:
            self.out.line(f"purged {result.deleted} of {result.matched} matching job(s){kept}")
        return EXIT_OK

    # groups ----------------------------------------------------------------------------------

    def groups_list(self) -> int:
        a = self.args
        statuses = [s.strip() for v in a.status or () for s in v.split(",") if s.strip()]
        groups: list[GroupView] = []
        token = a.page_token
        while True:
            try:
                page = self.admin.list_groups(
                    tenant_id=a.tenant, statuses=statuses, page_size=a.limit, page_token=token
                )
            except ValueError as e:
                raise UsageError(f"--status: {e}") from None
            groups.extend(page.groups)
            token = page.next_page_token
            if not a.all or not token:
                break
        if self.out.as_json:
            self.out.json({"groups": [_group_json(g) for g in groups], "next_page_token": token})
            return EXIT_OK
        self.out.table(
            [
                "ID",
                "TENANT",
                "STATUS",
                "DONE",
                "PENDING",
                "RUNNING",
                "FAULTED",
                "CREATED",
                "COMPLETION JOB",
            ],
            [
                (
                    g.id,
                    g.tenant_id,
                    g.status.lower(),
                    f"{g.completed + g.faulted + g.cancelled}/{g.total}",
                    g.pending,
                    g.running,
                    g.faulted,
                    g.create_time,
                    g.completion_job_id or "-",
                )
                for g in groups
            ],
        )
        if token:
            self.out.line(f"(more: --page-token {token}, or --all)")
        return EXIT_OK

    def groups_create(self) -> int:
        a = self.args
        payload = _json_payload(a.payload)
        with SchedulerClient(self.target, **self.connection.client_options()) as scheduler:
            group, _ = scheduler.create_group(
                JobRequest(a.job_type, payload, tenant_id=a.tenant),
                tenant_id=a.tenant,
                close=a.close,
            )
        return self._group_out(group)

    def groups_show(self) -> int:
        with SchedulerClient(self.target, **self.connection.client_options()) as scheduler:
            return self._group_out(scheduler.get_group(self.args.group_id))

    def groups_close(self) -> int:
        with SchedulerClient(self.target, **self.connection.client_options()) as scheduler:
            return self._group_out(scheduler.close_group(self.args.group_id))

    def groups_cancel(self) -> int:
        group, cancelled = self.admin.cancel_group(self.args.group_id, reason=self.args.reason)
        if not self.out.as_json:
            self.out.line(f"cancelled {len(cancelled)} pending member(s)")
        return self._group_out(group, {"cancelled_job_ids": cancelled})

    def _group_out(self, group: GroupView, more: dict[str, Any] | None = None) -> int:
        if self.out.as_json:
            self.out.json({**_group_json(group), **(more or {})})
            return EXIT_OK
        fields = [
            ("id", group.id),
            ("tenant", group.tenant_id),
            ("status", group.status.lower()),
            (
                "members",
                f"{group.total} ({group.pending} pending, {group.running} running, "
                f"{group.completed} completed, {group.faulted} faulted, "
                f"{group.cancelled} cancelled)",
            ),
            ("completion job", group.completion_job_id or None),
            ("created", group.create_time),
            ("closed", group.close_time),
            ("completed", group.complete_time),
        ]
        self._fields(fields)
        return EXIT_OK

    def jobs_unlock(self) -> int:
        return self._each([self.args.job_id], self.admin.unlock_job, "unlocked")

    def jobs_replay(self) -> int:
        job = self.admin.replay_job(self.args.job_id)
        if self.out.as_json:
            self.out.json(job_json(job))
        else:
            self.out.line(f"replayed {self.args.job_id} as {job.id} ({enum_name(job.status)})")
        return EXIT_OK

    def jobs_explain(self) -> int:
        explanation = self.admin.explain_job(self.args.job_id)
        raw = explanation.raw
        if self.out.as_json:
            self.out.json(
                {
                    "job": job_json(explanation.job),
                    "reasons": [message_dict(r) for r in raw.reasons] if raw is not None else [],
                    **(
                        {"last_failure": message_dict(raw.last_failure)}
                        if raw is not None and raw.HasField("last_failure")
                        else {}
                    ),
                    **(
                        {"unique_key": message_dict(raw.unique_key)}
                        if raw is not None and raw.HasField("unique_key")
                        else {}
                    ),
                }
            )
            return EXIT_OK
        job = explanation.job
        self.out.line(
            f"job {job.id} ({job.job_type}, tenant {job.tenant_id}) is {enum_name(job.status)}"
        )
        if not explanation.reasons:
            self.out.line("nothing holds it back: it runs as soon as a worker has a free slot")
        for reason in explanation.reasons:
            kind = apb.WaitReason.Kind.Name(reason.kind).removeprefix("KIND_").lower()
            self.out.line(f"- {kind}: {reason.message}")
        if explanation.unique_key is not None:
            self.out.line(str(explanation.unique_key))
        failure = explanation.last_failure
        if failure is not None:
            self.out.line(
                f"attempt {failure.number} {failure.outcome.lower()}"
                + (f" on {failure.worker_id}" if failure.worker_id else "")
                + f": {failure.error or '(no error text)'}"
            )
            if failure.traceback:
                self.out.line(failure.traceback.rstrip("\n"))
        return EXIT_OK

    def _each(
        self,
        job_ids: Sequence[str],
        action: Callable[[str], JobView],
        verb: str,
        *,
        note: str = "",
    ) -> int:
        """Act on each job; ``note`` follows the state of each PENDING job in the text."""
        code = EXIT_OK
        results = []
        for job_id in job_ids:
            try:
                job = action(job_id)
            except WorkflowJobsError as e:
                if e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                code = code or EXIT_BY_CODE.get(e.code, EXIT_ERROR)
                if self.out.as_json:
                    results.append({"job_id": job_id, "error": e.message, "code": e.code.name})
                else:
                    sys.stderr.write(f"wfjobs: {job_id}: {e.message}\n")
                continue
            if self.out.as_json:
                results.append(job_json(job))
            else:
                state = enum_name(job.status)
                if job.cancel_requested and job.status.name == "RUNNING":
                    state = "running, cancel requested (the handler is told at its next heartbeat)"
                elif job.status.name == "PENDING":
                    state += note
                self.out.line(f"{verb} {job.id}: now {state}")
        if self.out.as_json:
            self.out.json(results[0] if len(job_ids) == 1 and code == EXIT_OK else results)
        return code

    def _need_filter(self, verb: str) -> None:
        if not _has_filter(self.args) and not self.args.all_jobs:
            raise UsageError(
                f"give job ids, or a filter (--status, --tenant, --job-type, ...) to {verb} "
                f"in bulk (--all-jobs: every job it applies to)"
            )

    def _confirmed(self, run: Callable[[bool], Any], verb: str) -> bool:
        """A bulk action over every tenant goes ahead only with --yes or a typed "y".

        The dry-run count is printed first; without a terminal to ask on,
        --yes is required.
        """
        a = self.args
        if a.dry_run or a.tenant or a.yes:
            return True
        matched = run(True).matched
        if matched == 0:
            return True
        sys.stderr.write(f"wfjobs: this would {verb} {matched} job(s) across every tenant\n")
        if not sys.stdin.isatty():
            sys.stderr.write(
                f"wfjobs: not confirmed; pass --yes to {verb} them (or --tenant to limit "
                "the action to one tenant)\n"
            )
            return False
        sys.stderr.write(f"{verb.capitalize()} {matched} job(s)? [y/N] ")
        sys.stderr.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer in ("y", "yes"):
            return True
        sys.stderr.write("wfjobs: not confirmed; nothing changed\n")
        return False

    def _bulk(self, result: Any, verb: str, *, note: str = "") -> int:
        dry = self.args.dry_run
        if self.out.as_json:
            self.out.json({"matched": result.matched, "changed": result.changed, "dry_run": dry})
        elif dry:
            note = note if result.matched else ""
            self.out.line(f"would {verb} {result.matched} job(s){note} (dry run; nothing changed)")
        else:
            note = note if result.changed else ""
            self.out.line(
                f"{verb}: {result.changed} of {result.matched} matching job(s) changed{note}"
            )
        return EXIT_OK

    # pauses -------------------------------------------------------------------------------

    def _scope(self) -> tuple[str, str, str]:
        a = self.args
        kind = a.kind.replace("-", "_")
        if kind == "tenant":
            if a.tenant and a.value and a.tenant != a.value:
                raise UsageError("for a tenant pause give the tenant once")
            tenant = a.value or a.tenant
            if not tenant:
                raise UsageError(f"name the tenant: wfjobs {a.command} tenant TENANT_ID")
            return kind, "", tenant
        if not a.value:
            raise UsageError(f"name the {a.kind}: wfjobs {a.command} {a.kind} VALUE")
        return kind, a.value, a.tenant

    def pause(self) -> int:
        a = self.args
        kind, value, tenant = self._scope()
        expire = datetime.now(UTC) + a.duration if a.duration else None
        record = self.admin.pause(
            kind, value, tenant_id=tenant, actor=a.actor, reason=a.reason, expire_time=expire
        )
        if self.out.as_json:
            self.out.json(raw_dict(record))
        else:
            until = f" until {time_text(record.expire_time)}" if record.expire_time else ""
            self.out.line(f"paused {scope_text(record.scope)}{until} (pause {record.id})")
        if kind == "job_type" and not self._job_type_known(value, tenant):
            sys.stderr.write(
                f"wfjobs: warning: no job{f' of tenant {tenant}' if tenant else ''} and no "
                f"connected worker has job type {value!r}; check its spelling (the pause "
                "holds jobs of that type enqueued from now on)\n"
            )
        return EXIT_OK

    def _job_type_known(self, job_type: str, tenant: str) -> bool:
        """Whether a stored job (of ``tenant``, if given) or a connected worker has the type.

        True when the credential may not read jobs or workers: no warning it cannot back.
        """
        try:
            if any(job_type in w.job_types for w in self.admin.list_workers()):
                return True
            flt = JobFilter(tenant_id=tenant, job_types=[job_type])
            return bool(self.admin.list_jobs(flt, page_size=1).jobs)
        except (PermissionDeniedError, UnauthenticatedError):
            return True

    def unpause(self) -> int:
        kind, value, tenant = self._scope()
        lifted = self.admin.unpause(kind, value, tenant_id=tenant, actor=self.args.actor)
        if self.out.as_json:
            self.out.json([raw_dict(r) for r in lifted])
        else:
            for record in lifted:
                self.out.line(f"unpaused {scope_text(record.scope)} (pause {record.id})")
        return EXIT_OK

    def whoami(self) -> int:
        me = self.admin.who_am_i()
        if self.out.as_json:
            self.out.json(raw_dict(me))
            return EXIT_OK
        if not me.authenticated:
            self.out.line("the coordinator authenticates no one: every caller may do anything")
            return EXIT_OK
        self.out.line(f"name:      {me.name}")
        self.out.line(f"roles:     {', '.join(me.roles)}")
        tenants = list(me.tenants)
        self.out.line(f"tenants:   {'every tenant' if tenants == ['*'] else ', '.join(tenants)}")
        self.out.line(f"job types: {', '.join(me.job_types) or 'every type'}")
        return EXIT_OK

    def pauses(self) -> int:
        records = self.admin.list_pauses(include_lifted=self.args.all, tenant_id=self.args.tenant)
        if self.out.as_json:
            self.out.json({"pauses": [raw_dict(r) for r in records]})
            return EXIT_OK
        now = datetime.now(UTC)
        ended = [r.ended(now) for r in records]
        self.out.table(
            ["ID", "SCOPE", "BY", "REASON", "SINCE", "EXPIRES", "LIFTED", "LIFTED BY"],
            [
                (
                    r.id,
                    scope_text(r.scope),
                    # Only a coordinator without authentication records no name.
                    r.actor or "unauthenticated",
                    r.reason or None,
                    r.create_time,
                    r.expire_time,
                    end[0] if end else None,
                    end[1] if end else None,
                )
                for r, end in zip(records, ended, strict=True)
            ],
        )
        return EXIT_OK

    # concurrency limits ------------------------------------------------------------------------

    def limits_list(self) -> int:
        limits = self.admin.list_concurrency_limits()
        if self.out.as_json:
            self.out.json({"limits": [message_dict(x.raw) for x in limits if x.raw]})
            return EXIT_OK
        self.out.table(
            ["KIND", "VALUE", "MAX RUNNING", "RUNNING"],
            [
                (
                    limit_kind_text(x.kind),
                    limit_value_text(x.kind, x.value),
                    x.max_running,
                    x.running,
                )
                for x in limits
            ],
        )
        return EXIT_OK

    def limits_set(self) -> int:
        a = self.args
        if a.max_running < 0:
            raise UsageError("MAX_RUNNING must be 0 (remove the limit) or more")
        kind = a.kind.replace("-", "_")
        self.admin.set_concurrency_limit(kind, a.value, a.max_running)
        if self.out.as_json:
            self.out.json({"kind": kind, "value": a.value, "max_running": a.max_running})
        elif a.max_running:
            self.out.line(f"at most {a.max_running} running for {a.kind} {a.value}")
        else:
            self.out.line(f"removed the concurrency limit of {a.kind} {a.value}")
        return EXIT_OK

    # tenant weights ----------------------------------------------------------------------------

    def tenants_weights(self) -> int:
        answer = self.admin.list_tenant_weights(tenant_id=self.args.tenant)
        if self.out.as_json and answer.raw is not None:
            self.out.json(message_dict(answer.raw))
            return EXIT_OK
        self.out.table(["TENANT", "WEIGHT"], [(w.tenant_id, w.weight) for w in answer.weights])
        self.out.line(f"every other tenant: weight {answer.default_weight}")
        return EXIT_OK

    def tenants_set_weight(self) -> int:
        a = self.args
        self.admin.set_tenant_weight(a.tenant, a.weight)
        if self.out.as_json:
            self.out.json({"tenant_id": a.tenant, "weight": a.weight})
        else:
            self.out.line(f"tenant {a.tenant} now has weight {a.weight}")
        return EXIT_OK

    def tenants_category_weights(self) -> int:
        answer = self.admin.list_category_weights(tenant_id=self.args.tenant)
        if self.out.as_json and answer.raw is not None:
            self.out.json(message_dict(answer.raw))
            return EXIT_OK
        self.out.table(
            ["TENANT", "CATEGORY", "WEIGHT"],
            [(w.tenant_id, w.category.lower(), w.weight) for w in answer.weights],
        )
        self.out.line("every other category: weight 1")
        return EXIT_OK

    def tenants_set_category_weight(self) -> int:
        a = self.args
        self.admin.set_category_weight(a.tenant, a.category, a.weight)
        if self.out.as_json:
            self.out.json({"tenant_id": a.tenant, "category": a.category, "weight": a.weight})
        else:
            self.out.line(f"category {a.category} of tenant {a.tenant} now has weight {a.weight}")
        return EXIT_OK

    def tenants_remove_category_weight(self) -> int:
        a = self.args
        removed = self.admin.remove_category_weight(a.tenant, a.category)
        if self.out.as_json:
            self.out.json({"tenant_id": a.tenant, "category": a.category, "removed": removed})
        elif removed:
            self.out.line(f"category {a.category} of tenant {a.tenant} is back to weight 1")
        else:
            self.out.line(f"no weight was set for category {a.category} of tenant {a.tenant}")
        return EXIT_OK

    # rate limits -------------------------------------------------------------------------------

    def rate_limits_list(self) -> int:
        limits = self.admin.list_rate_limits()
        if self.out.as_json:
            self.out.json({"limits": [message_dict(x.raw) for x in limits if x.raw]})
            return EXIT_OK
        self.out.table(
            ["KIND", "VALUE", "STARTS", "PERIOD", "BURST", "THROTTLED UNTIL", "SLOWDOWN"],
            [
                (
                    limit_kind_text(x.kind),
                    limit_value_text(x.kind, x.value),
                    x.starts,
                    f"{x.period.total_seconds():g}s",
                    x.burst,
                    time_text(x.throttled_until),
                    f"1/{2**x.slow_level}" if x.slow_level else "-",
                )
                for x in limits
            ],
        )
        return EXIT_OK

    def rate_limits_set(self) -> int:
        a = self.args
        if a.starts <= 0:
            raise UsageError("STARTS must be 1 or more (rate-limits remove removes a limit)")
        if a.period <= 0:
            raise UsageError("--period must be positive (seconds)")
        if a.burst < 0:
            raise UsageError("--burst must be 0 (= STARTS) or more")
        kind = a.kind.replace("-", "_")
        self.admin.set_rate_limit(kind, a.value, a.starts, a.period, burst=a.burst)
        burst = a.burst or a.starts
        if self.out.as_json:
            self.out.json(
                {
                    "kind": kind,
                    "value": a.value,
                    "starts": a.starts,
                    "period_s": a.period,
                    "burst": burst,
                }
            )
        else:
            self.out.line(
                f"at most {a.starts} starts per {a.period:g}s (burst {burst}) "
                f"for {a.kind} {a.value}"
            )
        return EXIT_OK

    def rate_limits_remove(self) -> int:
        a = self.args
        kind = a.kind.replace("-", "_")
        removed = self.admin.remove_rate_limit(kind, a.value)
        if self.out.as_json:
            self.out.json({"kind": kind, "value": a.value, "removed": removed})
        elif removed:
            self.out.line(f"removed the rate limit of {a.kind} {a.value}")
        else:
            self.out.line(f"no rate limit was set for {a.kind} {a.value}")
        return EXIT_OK

    # drain, stats, workers ---------------------------------------------------------------------

    def _drain_subject(self) -> str:
        """What ``drain``/``undrain`` act on, in words: a worker, the cluster or this coordinator."""
        a = self.args
        if a.worker:
            return f"worker {a.worker}"
        return "the cluster" if a.cluster else f"coordinator {self.target}"

    def drain(self) -> int:
        a = self.args
        self.admin.drain(cluster=a.cluster, worker_id=a.worker or "")
        what = self._drain_subject()
        if self.out.as_json:
            self.out.json({"drained": what})
        else:
            self.out.line(f"drained {what}: no new jobs are handed out; running jobs finish")
        return EXIT_OK

    def undrain(self) -> int:
        a = self.args
        self.admin.undrain(cluster=a.cluster, worker_id=a.worker or "")
        what = self._drain_subject()
        if self.out.as_json:
            self.out.json({"undrained": what})
        else:
            self.out.line(f"undrained {what}")
        return EXIT_OK

    def stats(self) -> int:
        s = self.admin.get_stats(
            tenant_id=self.args.tenant, window=self.args.window, category=self.args.category
        )
        if self.out.as_json:
            self.out.json(raw_dict(s))
            return EXIT_OK
        age = s.oldest_pending_age.total_seconds() if s.oldest_pending_age else 0.0
        window = self.args.window.total_seconds() if self.args.window else 300
        self.out.line(
            f"pending {s.pending}  running {s.running}  completed {s.completed}  "
            f"faulted {s.faulted} (dead letter)  cancelled {s.cancelled}"
        )
        b = s.backlog
        self.out.line(
            f"of the pending, {b.ready} ready (runnable now), {b.held} held and "
            f"{b.scheduled} scheduled (not due yet)"
        )
        held = [
            (n, what)
            for n, what in (
                (b.paused, "paused"),
                (b.limit, "over a concurrency limit"),
                (b.rate, "rate limited"),
                (b.ordering, "behind an earlier job of their ordering key"),
                (b.no_worker, "with no worker serving them"),
                (b.drained, "whose workers are all drained"),
            )
            if n
        ]
        if held:
            self.out.line("held: " + ", ".join(f"{n} {what}" for n, what in held))
        self.out.line(f"oldest pending job waits {age:.1f}s")
        self.out.line(
            f"last {window:g}s: {s.completions_in_window} completed, "
            f"{s.failures_in_window} attempts failed, {s.retries_in_window} of them retried"
        )
        self.out.line(f"workers connected {s.connected_workers}  draining {_draining(s)}")
        waiting = [t for t in s.backlog_by_type if t.held or t.ready or t.scheduled]
        if waiting:
            self.out.line()
            self.out.table(
                [
                    "TENANT",
                    "TYPE",
                    "READY",
                    "SCHEDULED",
                    "PAUSED",
                    "LIMIT",
                    "RATE",
                    "ORDERING",
                    "NO WORKER",
                    "DRAINED",
                ],
                [
                    (
                        t.tenant_id,
                        t.job_type,
                        t.ready,
                        t.scheduled,
                        t.paused,
                        t.limit,
                        t.rate,
                        t.ordering,
                        t.no_worker,
                        t.drained,
                    )
                    for t in waiting
                ],
            )
        if s.counts:
            self.out.line()
            self.out.table(
                ["TENANT", "TYPE", "STATUS", "COUNT"],
                [
                    (
                        c.tenant_id,
                        c.job_type,
                        c.status.lower(),
                        c.count,
                    )
                    for c in s.counts
                ],
            )
        return EXIT_OK

    def workers(self) -> int:
        workers = self.admin.list_workers()
        if self.out.as_json:
            self.out.json({"workers": [raw_dict(w) for w in workers]})
            return EXIT_OK
        self.out.table(
            [
                "WORKER",
                "HOST",
                "PID",
                "TYPES",
                "SLOTS",
                "IN FLIGHT",
                "CONNECTED",
                "LAST SEEN",
                "COORDINATOR",
                "DRAINING",
                "STALE",
            ],
            [
                (
                    w.worker_id,
                    w.hostname or None,
                    w.pid or None,
                    ",".join(w.job_types),
                    w.slots,
                    len(w.in_flight_job_ids),
                    w.connect_time,
                    w.last_heartbeat_time,
                    w.coordinator_id[:8],
                    w.draining,
                    w.stale,
                )
                for w in workers
            ],
        )
        return EXIT_OK

    # completion ------------------------------------------------------------------------------

    def completion(self) -> int:
        self.out.line(completion_script(build_parser(), self.args.shell).rstrip("\n"))
        return EXIT_OK

    # enqueue ---------------------------------------------------------------------------------

    def enqueue(self) -> int:
        a = self.args
        if a.from_file is not None:
            return self._enqueue_lines()
        if a.job_type is None:
            raise UsageError(
                "give the job type: wfjobs enqueue TYPE [PAYLOAD] (or --from-file PATH)"
            )
        payload = _json_payload(a.payload)
        workflow = _workflow(a)
        with SchedulerClient(self.target, **self.connection.client_options()) as scheduler:
            if a.schedule_id is not None:
                return self._enqueue_tick(scheduler, payload, workflow)
            if a.tick_time or a.misfire or a.misfire_grace:
                raise UsageError("--tick-time, --misfire and --misfire-grace need --schedule-id")
            job = scheduler.enqueue(a.job_type, payload, **_job_options(a))
            if a.wait is None:
                return self._enqueued(job)
            if not self.out.as_json:
                # The id before the wait: a user who gives up still knows the job.
                self._enqueued(job)
                self.out.flush()
            wait_s = a.wait.total_seconds() or None
            try:
                job = scheduler.wait_for_job(job.id, timeout=wait_s)
            except DeadlineExceededError:
                return self._still_waiting(scheduler, job.id, a.wait)
            if job.status.name != "COMPLETED":
                job = scheduler.get_job(job.id, include_attempts=True)
        if self.out.as_json:
            self._enqueued(job)
        else:
            self.out.line(f"{job.id} {enum_name(job.status)}")
        if job.status.name == "COMPLETED":
            if not self.out.as_json:
                self.out.line(f"result: {payload_text(job.result, job.result_content_type)}")
            return EXIT_OK
        if not self.out.as_json:
            self.out.line(f"error: {job.last_error or '(none recorded)'}")
            self._last_traceback(job)
        return EXIT_JOB_FAILED

    def _still_waiting(self, scheduler: SchedulerClient, job_id: str, wait: timedelta) -> int:
        """``--wait`` ran out: the job is still there; say where it stands and why."""
        # The coordinator answers this (else exit 5 as any call): it is the job that waits.
        job = scheduler.get_job(job_id)
        why = self._first_reason(job_id)
        if self.out.as_json:
            self.out.json(job_json(job))
        sys.stderr.write(
            f"wfjobs: job {job_id} is still {enum_name(job.status)} after "
            f"{wait.total_seconds():g}s (--wait){': ' + why if why else ''}\n"
            f"  It stays enqueued: `wfjobs jobs explain {job_id}` says why it waits, "
            f"`wfjobs jobs show {job_id}` how it ends.\n"
        )
        return EXIT_WAIT_ENDED

    def _first_reason(self, job_id: str) -> str:
        """ExplainJob's first reason, as the CLI prints it; empty when it is not allowed."""
        try:
            explanation = self.admin.explain_job(job_id)
        except (PermissionDeniedError, UnauthenticatedError):
            return ""  # a scheduler-only token may enqueue but not explain
        if not explanation.reasons:
            return "nothing holds it back: it runs as soon as a worker has a free slot"
        reason = explanation.reasons[0]
        kind = apb.WaitReason.Kind.Name(reason.kind).removeprefix("KIND_").lower()
        return f"{kind}: {reason.message}"

    def _enqueue_tick(
        self, scheduler: SchedulerClient, payload: Any, workflow: SdkWorkflowRef | None
    ) -> int:
        a = self.args
        if a.tick_time is None:
            raise UsageError("--schedule-id needs --tick-time (the time the tick was due, UTC)")
        if a.idempotency_key or a.delay or a.unique_key or a.wait is not None:
            raise UsageError(
                "a schedule tick's key is its schedule and time: leave out --idempotency-key, "
                "--delay, --unique-key and --wait"
            )
        job = scheduler.enqueue_tick(
            a.schedule_id,
            a.tick_time,
            a.job_type,
            payload,
            misfire=(a.misfire or "fire-once-late").replace("-", "_"),
            misfire_grace=a.misfire_grace,
            tenant_id=a.tenant,
            workflow=workflow,
            priority=a.priority,
            max_attempts=a.max_attempts,
            execution_timeout=a.execution_timeout,
            heartbeat_timeout=a.heartbeat_timeout,
            category=a.category,
        )
        if job is None:
            if self.out.as_json:
                self.out.json({"skipped": True})
            else:
                self.out.line("skipped: the tick misfired and its policy skips it")
            return EXIT_OK
        return self._enqueued(job)

    def _enqueued(self, job: JobView) -> int:
        if self.out.as_json:
            # As EnqueueResponse says them (the job itself does not).
            self.out.json(
                {**job_json(job), "deduplicated": job.deduplicated, "debounced": job.debounced}
            )
        else:
            note = (
                " (debounced: the existing job took this payload)"
                if job.debounced
                else " (already existed)"
                if job.deduplicated
                else ""
            )
            self.out.line(f"{job.id} {enum_name(job.status)}{note}")
        return EXIT_OK

    # enqueue --from-file -----------------------------------------------------------------

    def _enqueue_lines(self) -> int:
        """``enqueue --from-file``: check every line, then enqueue them in batches.

        A line is enqueued or reported with its number, never dropped: a bad line
        stops the file before anything is sent; a batch the coordinator refuses
        (one EnqueueBatch is all or none) is sent again line by line, so the
        refused lines are named and the others enqueued; a failure that is not
        the input's (unreachable, not allowed) stops and says which lines were
        enqueued before it.
        """
        a = self.args
        source = "standard input" if a.from_file == "-" else a.from_file
        given = [
            flag
            for flag, value in (
                ("PAYLOAD", a.payload),
                ("--wait", a.wait),
                ("--schedule-id", a.schedule_id),
                ("--tick-time", a.tick_time),
                ("--misfire", a.misfire),
                ("--misfire-grace", a.misfire_grace),
                ("--idempotency-key", a.idempotency_key),
                ("--unique-key", a.unique_key),
            )
            if value is not None
        ]
        if given:
            raise UsageError(
                f"--from-file takes each job's payload and keys from its line: leave out "
                f"{', '.join(given)} (a line may give payload, idempotency_key, unique_key)"
            )
        specs: list[tuple[int, job_pb2.JobSpec]] = []
        refused: list[tuple[int, str, str]] = []
        for number, text in self._lines(a.from_file):
            try:
                specs.append((number, _line_spec(a, text)))
            except (UsageError, ValueError, TypeError) as e:
                refused.append((number, str(e), "INVALID_ARGUMENT"))
        if refused:
            self._line_report([], refused)
            sys.stderr.write(
                f"wfjobs: {len(refused)} line(s) of {source} are not valid; nothing was enqueued\n"
            )
            return EXIT_USAGE
        enqueued: list[tuple[int, EnqueueResult]] = []
        with SchedulerClient(self.target, **self.connection.client_options()) as scheduler:
            for batch in _batches(specs):
                try:
                    self._send_lines(scheduler, batch, enqueued, refused)
                except WorkflowJobsError as e:
                    self._line_report(enqueued, refused)
                    self._stopped(source, specs, batch, enqueued, refused, e)
                    raise
        self._line_report(enqueued, refused)
        if not self.out.as_json:
            self.out.line(
                f"enqueued {len(enqueued)} of {len(specs)} line(s) of {source}"
                + (f"; refused: line {_line_ranges([n for n, _, _ in refused])}" if refused else "")
            )
        if not refused:
            return EXIT_OK
        return min(EXIT_BY_CODE.get(grpc.StatusCode[code], EXIT_ERROR) for _, _, code in refused)

    def _stopped(
        self,
        source: str,
        specs: list[tuple[int, job_pb2.JobSpec]],
        batch: list[tuple[int, job_pb2.JobSpec]],
        enqueued: list[tuple[int, EnqueueResult]],
        refused: list[tuple[int, str, str]],
        error: WorkflowJobsError,
    ) -> None:
        """Say which lines were enqueued before a failure that is not the input's."""
        done = {n for n, _ in enqueued} | {n for n, _, _ in refused}
        left = [n for n, _ in specs if n not in done]
        # A call that timed out or broke may have committed before its answer was lost.
        doubt = (
            [n for n, _ in batch if n not in done]
            if error.code
            in (
                grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.UNKNOWN,
                grpc.StatusCode.INTERNAL,
            )
            else []
        )
        sys.stderr.write(
            f"wfjobs: stopped at line {batch[0][0]} of {source}: {len(enqueued)} line(s) "
            f"enqueued ({_line_ranges(sorted(n for n, _ in enqueued)) or 'none'}), "
            f"{len(left)} not ({_line_ranges(left)})"
            + (f", of which {_line_ranges(doubt)} may have been (no answer came)" if doubt else "")
            + "; a line with an idempotency_key is safe to send again\n"
        )

    def _lines(self, path: str) -> list[tuple[int, str]]:
        """The numbered lines of ``path`` ('-': standard input) that are not blank."""
        try:
            if path == "-":
                text = sys.stdin.read()
            else:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
        except OSError as e:
            raise UsageError(f"--from-file {path}: {e.strerror or e}") from None
        except UnicodeDecodeError as e:
            raise UsageError(f"--from-file {path}: not UTF-8 text ({e.reason})") from None
        return [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]

    def _send_lines(
        self,
        scheduler: SchedulerClient,
        batch: list[tuple[int, job_pb2.JobSpec]],
        enqueued: list[tuple[int, EnqueueResult]],
        refused: list[tuple[int, str, str]],
    ) -> None:
        """Enqueue one batch; when the coordinator refuses it, each of its lines alone."""
        try:
            results = scheduler.enqueue_batch([spec for _, spec in batch])
        except WorkflowJobsError as e:
            if e.code not in _LINE_REFUSALS:
                raise
            # Nothing of the batch was enqueued (all or none): find the line(s) it refuses.
            for number, spec in batch:
                try:
                    [result] = scheduler.enqueue_batch([spec])
                except WorkflowJobsError as one:
                    if one.code not in _LINE_REFUSALS:
                        raise
                    refused.append((number, one.message.removeprefix("jobs[0]: "), one.code.name))
                    continue
                enqueued.append((number, result))
            return
        enqueued.extend((number, r) for (number, _), r in zip(batch, results, strict=True))

    def _line_report(
        self, enqueued: list[tuple[int, EnqueueResult]], refused: list[tuple[int, str, str]]
    ) -> None:
        """Each enqueued line (stdout) and each refused one (stderr; in --json, stdout)."""
        if self.out.as_json:
            self.out.json(
                {
                    "enqueued": [
                        {
                            "line": n,
                            "job_id": r.job_id,
                            "status": enum_name(r.status),
                            "deduplicated": r.deduplicated,
                            "debounced": r.debounced,
                        }
                        for n, r in enqueued
                    ],
                    "refused": [
                        {"line": n, "error": message, "code": code} for n, message, code in refused
                    ],
                }
            )
            return
        for n, r in enqueued:
            note = (
                " (debounced: the existing job took this payload)"
                if r.debounced
                else " (already existed)"
                if r.deduplicated
                else ""
            )
            self.out.line(f"line {n}: {r.job_id} {enum_name(r.status)}{note}")
        for n, message, _ in sorted(refused):
            sys.stderr.write(f"wfjobs: line {n}: {message}\n")


def _workflow(a: argparse.Namespace) -> SdkWorkflowRef | None:
    if a.definition or a.instance or a.correlation:
        return SdkWorkflowRef(
            definition_id=a.definition, instance_id=a.instance, correlation_id=a.correlation
        )
    return None


def _job_options(a: argparse.Namespace) -> dict[str, Any]:
    """The options of ``wfjobs enqueue`` as ``SchedulerClient.enqueue``/``JobRequest`` take them."""
    return {
        "tenant_id": a.tenant,
        "workflow": _workflow(a),
        "priority": a.priority,
        "delay": a.delay,
        "max_attempts": a.max_attempts,
        "execution_timeout": a.execution_timeout,
        "heartbeat_timeout": a.heartbeat_timeout,
        "idempotency_key": a.idempotency_key,
        "category": a.category,
        "ordering_key": a.ordering_key,
        "uniqueness": _uniqueness(a),
        "group_id": a.group,
    }


# Refusals of a batch that name something in its lines (the rest is not the
# input's: unreachable, not allowed, too slow), so each line is tried alone.
_LINE_REFUSALS = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
# One EnqueueBatch call: at most this many lines, and about this many bytes
# (well under the 64 MiB a message may have; a line's payload is at most 1 MiB).
_BATCH_LINES = 500
_BATCH_BYTES = 4 * 1024 * 1024


def _batches(
    specs: list[tuple[int, job_pb2.JobSpec]],
) -> Iterator[list[tuple[int, job_pb2.JobSpec]]]:
    batch: list[tuple[int, job_pb2.JobSpec]] = []
    size = 0
    for number, spec in specs:
        spec_size = spec.ByteSize()
        if batch and (len(batch) >= _BATCH_LINES or size + spec_size > _BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append((number, spec))
        size += spec_size
    if batch:
        yield batch


def _line_ranges(numbers: Sequence[int]) -> str:
    """``1-3, 7`` for lines 1, 2, 3 and 7."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)


def _line_text(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{key} must be a string, not {json.dumps(value)}")
    return value


def _line_int32(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{key} must be an integer, not {json.dumps(value)}")
    try:
        return int32(str(value))
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"{key}: {e}") from None


def _line_duration(key: str, value: Any) -> timedelta:
    """A duration as the command line writes it ("5m"), or a number of seconds."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UsageError(f'{key} must be a duration ("5m") or seconds, not {json.dumps(value)}')
    try:
        return parse_duration(str(value))
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"{key}: {e}") from None


def _line_statuses(key: str, value: Any) -> str:
    """``unique_while``: "pending,running" or ["pending", "running"]."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return _line_text(key, value)


def _line_payload(key: str, value: Any) -> Any:
    return value


# The keys a line of ``enqueue --from-file`` takes: the command's options by
# their JSON names, each read as the command line reads it.
_LINE_KEYS: dict[str, Callable[[str, Any], Any]] = {
    "job_type": _line_text,
    "payload": _line_payload,
    "tenant": _line_text,
    "definition": _line_text,
    "instance": _line_text,
    "correlation": _line_text,
    "priority": _line_int32,
    "delay": _line_duration,
    "max_attempts": _line_int32,
    "execution_timeout": _line_duration,
    "heartbeat_timeout": _line_duration,
    "idempotency_key": _line_text,
    "category": _line_text,
    "ordering_key": _line_text,
    "unique_key": _line_text,
    "unique_while": _line_statuses,
    "unique_for": _line_duration,
    "debounce": _line_duration,
    "max_wait": _line_duration,
    "group": _line_text,
}


def _line_spec(defaults: argparse.Namespace, text: str) -> job_pb2.JobSpec:
    """One line of ``enqueue --from-file`` as the job it asks for, checked as the SDK checks.

    Raises:
        UsageError, ValueError, TypeError: What is wrong with the line.
    """
    try:
        line = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"not JSON: {e}") from None
    if not isinstance(line, dict):
        raise UsageError(
            'a line is a JSON object of enqueue options, e.g. {"job_type": "mail", '
            '"payload": {"to": "a@example.com"}}'
        )
    unknown = sorted(set(line) - set(_LINE_KEYS))
    if unknown:
        raise UsageError(
            f"unknown key(s) {', '.join(map(repr, unknown))}; a line takes: {', '.join(_LINE_KEYS)}"
        )
    options = argparse.Namespace(**vars(defaults))
    options.payload = None
    for key, value in line.items():
        setattr(options, key, _LINE_KEYS[key](key, value))
    if not options.job_type:
        raise UsageError("no job_type: give it on the line, or TYPE for every line")
    return JobRequest(options.job_type, options.payload, **_job_options(options)).to_proto()


def _draining(s: JobStats) -> str:
    """The drain line's answer: the coordinator's drain, else the job types
    whose every worker is drained while their jobs wait."""
    if s.draining:
        return "yes (this coordinator hands out no jobs)"
    drained = sorted({t.job_type for t in s.backlog_by_type if t.drained})
    if drained:
        jobs = s.backlog.drained
        return (
            f"no, but every worker of job type(s) {', '.join(drained)} is drained "
            f"({jobs} job(s) wait for them; `wfjobs workers`, `wfjobs undrain --worker ID`)"
        )
    return "no"


def _json_payload(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"payload is not JSON: {e}") from None


def _uniqueness(a: argparse.Namespace) -> Uniqueness | None:
    """The uniqueness rule of ``wfjobs enqueue``'s options (None: none asked for)."""
    if a.unique_key is None:
        if a.unique_while or a.unique_for or a.debounce or a.max_wait:
            raise UsageError("--unique-while, --unique-for and --debounce need --unique-key")
        return None
    if sum(x is not None for x in (a.unique_while, a.unique_for, a.debounce)) > 1:
        raise UsageError("give one of --unique-while, --unique-for and --debounce")
    if a.max_wait is not None and a.debounce is None:
        raise UsageError("--max-wait goes with --debounce")
    if a.debounce is not None:
        return Uniqueness.debounce(a.unique_key, a.debounce, a.max_wait)
    if a.unique_for is not None:
        return Uniqueness.for_period(a.unique_key, a.unique_for)
    names = [n.strip() for n in (a.unique_while or "").split(",") if n.strip()]
    try:
        statuses = [JobStatus[n.upper()] for n in names]
    except KeyError as e:
        raise UsageError(
            f"--unique-while: {e.args[0]!r} is not a status (pending, running, completed, "
            "faulted, cancelled)"
        ) from None
    return Uniqueness.unique_while(a.unique_key, *statuses)
