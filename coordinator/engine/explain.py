"""Why is this job still waiting? Every reason a job is not running right now.

The answer is assembled from the same rules acquisition applies (due time,
pauses, concurrency and rate limits, drain, who serves the job type) plus the job's
place in its tenant's queue, so it cannot disagree with what acquisition does
except for races with changes made while it is being computed.

Workers are judged from the cluster view (``Operations.list_workers``: this
coordinator's streams plus the worker registry every replica writes), so the
answer is the same whichever replica is asked: a worker connected to another
replica serves the job type, and a drained worker anywhere is named. A worker
serves a job only if its credential's tenant scope covers the job's tenant.

The answer names other tenants only to a caller that may see them
(``visible_tenants``): a tenant-scoped caller's fair-share reason counts only
the competing tenants in its scope, and workers scoped to other tenants are
named without their tenants.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from coordinator import tenancy
from coordinator.clock import Clock
from coordinator.engine.acquisition import Acquisition
from coordinator.engine.concurrency_limits import limit_scope_text
from coordinator.engine.fairness import FairScheduler
from coordinator.engine.limit_settings import LimitSettings
from coordinator.engine.operations import Operations
from coordinator.engine.pauses import pause_scope_text
from coordinator.engine.rate_limits import RateBucket, next_start_at, rate_limit_text, when_precise
from coordinator.engine.reads import Reads
from coordinator.engine.runner import StoreRunner
from coordinator.model import (
    FAILED_OUTCOMES,
    AttemptRow,
    JobRow,
    JobStatus,
    PauseKind,
    UniqueKeyRow,
    candidate_of,
)
from coordinator.store import Store
from coordinator.tenancy import TenantScope


@dataclass(frozen=True, slots=True)
class WaitReason:
    """One reason; ``kind`` names a ``WaitReason.Kind`` of the API without its prefix."""

    kind: str
    message: str
    until: int | None = None
    pause_id: str = ""
    count: int = 0
    limit: int = 0


def _when(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1e6, dt.UTC).isoformat(timespec="seconds")


def _debounced(key: UniqueKeyRow) -> WaitReason:
    """Later enqueues of the job's uniqueness key moved its due time."""
    bound = (
        f"; it cannot be moved past {_when(key.max_due_at)} (the debounce's max wait)"
        if key.max_due_at is not None
        else "; its debounce has no max wait"
    )
    last = _when(key.debounced_at) if key.debounced_at is not None else "?"
    return WaitReason(
        "DEBOUNCED",
        f"debounced: {key.debounced} later enqueue(s) of uniqueness key {key.unique_key!r} "
        f"replaced its payload and moved its due time (last at {last}){bound}",
        until=key.max_due_at,
        count=key.debounced,
    )


class JobExplainer:
    """Answers ExplainJob from the rules acquisition applies."""

    def __init__(
        self,
        *,
        store: Store,
        run_store: StoreRunner,
        clock: Clock,
        reads: Reads,
        settings: LimitSettings,
        acquisition: Acquisition,
        operations: Operations,
        fair: FairScheduler,
    ) -> None:
        self._store = store
        self._run = run_store
        self._clock = clock
        self._reads = reads
        # Limits as this replica loaded them; the exclusions as acquisition reads them.
        self._settings = settings
        self._acquisition = acquisition
        # The drain state and the cluster's workers.
        self._operations = operations
        self._fair = fair

    async def explain(
        self, job_id: str, visible_tenants: TenantScope = None
    ) -> tuple[JobRow, list[WaitReason]]:
        """The job and every reason it is not running now (empty: it is eligible).

        ``visible_tenants``: the tenants the caller may see (None: every tenant).
        """
        row, _ = await self._reads.get_job(job_id)
        now = self._clock.now_us()
        status = JobStatus(row.status)
        if status == JobStatus.RUNNING:
            return row, [await self._leased(row, now)]
        if status != JobStatus.PENDING:
            return row, [
                WaitReason("NOT_PENDING", f"the job is {status.name} and will not run again")
            ]
        reasons: list[WaitReason] = []
        drained_by = self._operations.drained_by
        if drained_by == "cluster":
            reasons.append(
                WaitReason("DRAINING", "the cluster is drained: no coordinator hands out jobs")
            )
        elif drained_by is not None:
            reasons.append(
                WaitReason("DRAINING", "this coordinator is draining: it hands out no jobs")
            )
        if row.due_at > now:
            reasons.append(
                WaitReason(
                    "NOT_DUE",
                    f"not due until {_when(row.due_at)} (`wfjobs jobs run-now {row.id}` makes "
                    "it due now)",
                    until=row.due_at,
                )
            )
            unique_key = await self._run(self._store.unique_key_of_job, row.id)
            if unique_key is not None and unique_key.debounced:
                reasons.append(_debounced(unique_key))
        pauses = await self._run(self._store.pauses_covering, row, now)
        for p in pauses:
            kind = PauseKind(p.kind)
            who = f"by {p.actor or 'an operator'} since {_when(p.created_at)}"
            why = f": {p.reason}" if p.reason else ""
            lifts = f", lifts at {_when(p.expires_at)}" if p.expires_at else ""
            scope = pause_scope_text(p.scope, with_tenant=False)
            if kind == PauseKind.TENANT:
                text = f"{scope} is disabled {who}{why}{lifts}"
                reasons.append(
                    WaitReason("TENANT_DISABLED", text, until=p.expires_at, pause_id=p.id)
                )
            else:
                text = f"{scope} is paused {who}{why}{lifts} (pause {p.id})"
                reasons.append(WaitReason("PAUSED", text, until=p.expires_at, pause_id=p.id))
        if row.ordering_key is not None:
            blocker = await self._run(
                self._store.job_ordering_blocker, row.tenant_id, row.ordering_key, row.id
            )
            if blocker is not None:
                state = JobStatus(blocker.status)
                how = {
                    JobStatus.RUNNING: "it is running",
                    JobStatus.PENDING: "it has not run yet",
                    # Cancelling the FAULTED head sets it aside without running
                    # it (a retry would run it again, with a worker connected).
                    JobStatus.FAULTED: (
                        "it FAULTED and holds the key until it is cancelled, which sets it "
                        f"aside without running it and lets the next job run (`wfjobs jobs "
                        f"cancel {blocker.id}`), or retried and completes (`wfjobs jobs retry "
                        f"{blocker.id}`, which runs it again)"
                    ),
                }.get(state, state.name)
                reasons.append(
                    WaitReason(
                        "ORDERING",
                        f"behind job {blocker.id} in ordering key {row.ordering_key}: {how}",
                    )
                )
        job = candidate_of(row)
        if self._settings.rates:
            buckets = await self._run(self._store.rate_bucket_list, self._settings.rates.kinds)
            for key, rate in self._settings.rates.scopes_of(job):
                until = next_start_at(rate, RateBucket(*buckets.get(key, (0, 0, 0))), now)
                if until > now:
                    reasons.append(
                        WaitReason(
                            "RATE_LIMIT",
                            f"rate limited by {rate_limit_text(key, rate)} until {when_precise(until)}",
                            until=until,
                            limit=rate.starts,
                        )
                    )
        if self._settings.limits:
            running = await self._run(self._store.job_running_counts, self._settings.limits.kinds)
            for (limit_kind, value), limit in self._settings.limits.scopes_of(job):
                count = running.get((limit_kind, value), 0)
                if count >= limit:
                    reasons.append(
                        WaitReason(
                            "CONCURRENCY_LIMIT",
                            f"concurrency limit of {limit_scope_text(limit_kind, value)} is full: "
                            f"{count}/{limit} running",
                            count=count,
                            limit=limit,
                        )
                    )
        workers = await self._operations.list_workers()
        of_type = [w for w in workers if row.job_type in w.job_types]
        # A worker whose credential is scoped to other tenants never gets this job.
        serving = [w for w in of_type if w.takes(row.job_type, row.tenant_id)]
        if not serving and of_type:
            names = ", ".join(
                w.worker_id
                if not tenancy.every_tenant(visible_tenants)
                else f"{w.worker_id} (tenants {', '.join(w.tenants or ())})"
                for w in of_type
            )
            reasons.append(
                WaitReason(
                    "NO_WORKER",
                    f"no connected worker on any coordinator serves job type {row.job_type!r} "
                    f"for tenant {row.tenant_id!r}: the workers serving the type are scoped to "
                    f"other tenants ({names}); start one whose credential covers tenant "
                    f"{row.tenant_id!r}",
                )
            )
        elif not serving:
            reasons.append(
                WaitReason(
                    "NO_WORKER",
                    f"no connected worker on any coordinator serves job type {row.job_type!r}; "
                    "start one with a handler for it",
                )
            )
        elif all(w.draining for w in serving) and drained_by != "cluster":
            names = ", ".join(f"{w.worker_id} (coordinator {w.coordinator_id})" for w in serving)
            undrain = " ".join(f"wfjobs undrain --worker {w.worker_id};" for w in serving)
            reasons.append(
                WaitReason(
                    "DRAINING",
                    f"every worker serving job type {row.job_type!r} is drained: {names}; "
                    f"undrain one ({undrain.rstrip(';')}) or start another worker",
                    count=len(serving),
                )
            )
        # Only jobs acquisition would take before this one: unpaused, of a job type
        # a worker (not drained) serves for the tenant, outside full concurrency
        # limits and throttled rate limits (held ordering keys are never candidates).
        served = sorted(
            {t for w in workers if not w.draining for t in w.job_types if w.takes(t, row.tenant_id)}
        )
        exclude, _ = await self._acquisition.exclusions(now)
        ahead = await self._run(
            self._store.job_count_ahead,
            row.tenant_id,
            row.priority,
            row.due_at,
            row.id,
            now,
            job_types=served,
            exclude=exclude,
        )
        if ahead:
            reasons.append(
                WaitReason(
                    "QUEUED_BEHIND",
                    f"{ahead} eligible job(s) of tenant {row.tenant_id} are ahead of it in its share",
                    count=ahead,
                )
            )
        others = await self._run(
            self._store.job_competing_tenants, row.job_type, row.tenant_id, now
        )
        others = tenancy.visible(visible_tenants, others)
        if others:
            reasons.append(await self._fair_share(row, others))
        return row, reasons

    async def _fair_share(self, row: JobRow, others: list[str]) -> WaitReason:
        """The job's tenant shares the workers of its job type with ``others``."""
        stored = await self._run(self._store.tenant_weights)
        default = self._fair.default_weight

        def weight(tenant: str) -> int:
            return max(1, stored.get(tenant, default))

        mine = weight(row.tenant_id)
        total = mine + sum(weight(t) for t in others)
        named = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        return WaitReason(
            "FAIR_SHARE",
            f"tenant {row.tenant_id} shares the workers of job type {row.job_type!r} with "
            f"{len(others)} other tenant(s) that have eligible jobs of it ({named}): while they "
            f"all do, it gets {mine} of every {total} starts (its weight; `wfjobs tenants "
            f"set-weight {row.tenant_id} N` changes it)",
            count=len(others),
        )

    async def _leased(self, row: JobRow, now: int) -> WaitReason:
        expires = row.lease_expires_at or now
        connected = {w.worker_id for w in await self._operations.list_workers()}
        if row.lease_owner in connected:
            return WaitReason(
                "LEASED",
                f"running: leased by worker {row.lease_owner} until {_when(expires)}",
                until=row.lease_expires_at,
            )
        if expires > now:
            when = f"when it expires at {_when(expires)}"
        else:
            when = f"by the next lease reaper run (it expired at {_when(expires)})"
        then = (
            "the job then ends CANCELLED (a cancel was requested)"
            if row.cancel_requested
            else "the job is then retried or faulted by its retry policy"
        )
        return WaitReason(
            "LEASED",
            f"running: leased by worker {row.lease_owner}, which is no longer connected to any "
            f"coordinator; the lease is reclaimed {when} and {then} "
            f"(`wfjobs jobs unlock {row.id}` reclaims it now)",
            until=row.lease_expires_at,
        )

    async def last_failure(self, row: JobRow) -> AttemptRow | None:
        """The job's latest attempt when it failed and nothing ran since (its retry waits).

        Read only for jobs that can have one (PENDING or FAULTED after an attempt),
        so explaining a fresh job costs no history read.
        """
        status = JobStatus(row.status)
        if status not in (JobStatus.PENDING, JobStatus.FAULTED) or row.attempt < 1:
            return None
        attempts = await self._run(self._store.job_attempts, row.id)
        if not attempts or attempts[-1].outcome not in FAILED_OUTCOMES:
            return None
        return attempts[-1]

    async def unique_key(self, row: JobRow) -> UniqueKeyRow | None:
        """The uniqueness key whose stored row names the job, if any (a later
        job the key admitted takes the row over)."""
        return await self._run(self._store.unique_key_of_job, row.id)


class Explaining(Protocol):
    """What owns a ``JobExplainer`` (the engine)."""

    @property
    def explainer(self) -> JobExplainer: ...


async def explain(
    engine: Explaining, job_id: str, visible_tenants: TenantScope = None
) -> tuple[JobRow, list[WaitReason]]:
    """The job and every reason it is not running now (``JobExplainer.explain``)."""
    return await engine.explainer.explain(job_id, visible_tenants)


async def last_failure(engine: Explaining, row: JobRow) -> AttemptRow | None:
    """The job's latest failed attempt its retry waits on (``JobExplainer.last_failure``)."""
    return await engine.explainer.last_failure(row)


async def unique_key(engine: Explaining, row: JobRow) -> UniqueKeyRow | None:
    """The uniqueness key that names the job (``JobExplainer.unique_key``)."""
    return await engine.explainer.unique_key(row)
