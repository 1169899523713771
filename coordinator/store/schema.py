"""Table definitions used by the store's queries.

Times are integer microseconds since the Unix epoch (UTC) on every dialect, so
SQLite and PostgreSQL compare and order them identically. Status and other
enums are small integers equal to the protobuf enum numbers.

Acquisition reads jobs through ``ix_jobs_ready``: a partial index over
PENDING rows not held behind their ordering key (``READY_JOB``) keyed by
*lane* (tenant, job type, definition), then by category and then by the
in-category order (priority, due time, id). Acquisition walks lanes and, in
each, the categories (one probe per lane and category), never the whole
table, so a paused definition's jobs are skipped with one index probe however
many there are, nothing ever rewrites a paused row, and the head of a small
category is found however large another category's backlog.
"""

from __future__ import annotations

import sqlalchemy as sa

from coordinator.model import FINISHED_STATUSES, JobStatus

SCHEMA_REVISION = "0025"

metadata = sa.MetaData()

jobs = sa.Table(
    "wfj_jobs",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("job_type", sa.Text, nullable=False),
    sa.Column("tenant_id", sa.Text, nullable=False),
    sa.Column("definition_id", sa.Text, nullable=False, server_default=""),
    sa.Column("definition_version", sa.Integer, nullable=False, server_default="0"),
    sa.Column("instance_id", sa.Text, nullable=False, server_default=""),
    sa.Column("activity_id", sa.Text, nullable=False, server_default=""),
    sa.Column("activity_node_id", sa.Text, nullable=False, server_default=""),
    sa.Column("bookmark_id", sa.Text, nullable=False, server_default=""),
    sa.Column("correlation_id", sa.Text, nullable=False, server_default=""),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("content_type", sa.Text, nullable=False, server_default=""),
    sa.Column("category", sa.SmallInteger, nullable=False, server_default="0"),
    sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    sa.Column("status", sa.SmallInteger, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
    sa.Column("max_attempts", sa.Integer, nullable=False),
    sa.Column("retry_policy", sa.Text),
    sa.Column("execution_timeout_ms", sa.BigInteger),
    sa.Column("heartbeat_timeout_ms", sa.BigInteger),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("due_at", sa.BigInteger, nullable=False),
    sa.Column("started_at", sa.BigInteger),
    sa.Column("finished_at", sa.BigInteger),
    sa.Column("lease_owner", sa.Text),
    sa.Column("lease_token", sa.Text),
    sa.Column("lease_expires_at", sa.BigInteger),
    sa.Column("last_error", sa.Text),
    sa.Column("last_error_kind", sa.Text),
    sa.Column("result", sa.LargeBinary),
    sa.Column("result_content_type", sa.Text),
    sa.Column("idempotency_key", sa.Text),
    sa.Column("traceparent", sa.Text, nullable=False, server_default=""),
    sa.Column("tracestate", sa.Text, nullable=False, server_default=""),
    sa.Column("concurrency_key", sa.Text),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("replay_of", sa.Text),
    # Attempts handed back by workers (RELEASED): they stay in the history but
    # do not count against max_attempts, which stays the configured budget.
    sa.Column("released_attempts", sa.Integer, nullable=False, server_default="0"),
    # The job whose handler enqueued this one (a child job); NULL otherwise.
    sa.Column("parent_job_id", sa.Text),
    # The ``ord`` of the job's last event (``job_events``): a later event of
    # the job sorts at or after it even when its transaction started earlier.
    sa.Column("event_tx", sa.BigInteger, nullable=False, server_default="0"),
    # Jobs of one tenant and ordering key run one at a time, in ``ordering_seq`` order.
    sa.Column("ordering_key", sa.Text),
    # Fixed at enqueue: a FAULTED job of the key lets the next run (else it holds the key).
    sa.Column("ordering_skip_failed", sa.Boolean, nullable=False, server_default=sa.false()),
    # PENDING behind an earlier live job of its ordering key (store/ordering.py):
    # kept out of the ready index until the key's head ends and releases it.
    sa.Column("ordering_held", sa.Boolean, nullable=False, server_default=sa.false()),
    # The database's number for the job, given as it is stored (migration
    # 0018: a sequence on PostgreSQL, a trigger on SQLite): a key's jobs run in
    # its order, whatever clock made their ids. A later SQLite migration that
    # rebuilds wfj_jobs (Alembic's batch mode) must create the trigger again.
    sa.Column("ordering_seq", sa.BigInteger),
    # The reason an operator gave for cancelling it (migration 0016), kept
    # whatever error the attempt then ends with; a retry clears it.
    sa.Column("cancel_reason", sa.Text),
    # The job group the job is a member of (store/groups.py); NULL otherwise.
    sa.Column("group_id", sa.Text),
    # W3C traceparents its spans link to, as a JSON list (a group's completion
    # job: its members'); NULL otherwise.
    sa.Column("trace_links", sa.Text),
)


# The attempt history of a job is its ``wfj_job_attempts`` rows plus, for a job
# whose first attempt completed it, that attempt: the job row describes it
# fully (number 1, worker ``lease_owner``, ``started_at``, ended at
# ``finished_at``, outcome COMPLETED, no error), so the completion writes no
# row for it. Every other ended attempt has its row: failed, expired, timed
# out, released, unlocked, cancelled, and completions of a later attempt or
# of a job whose cancel was requested (it ends CANCELLED, which an operator
# may retry, so its row must outlive the job row's attempt columns). A
# COMPLETED job is never leased again, so those columns stay as written.
def first_attempt_completed(alias: str = "") -> str:
    """SQL true for a job row whose completed first attempt has no attempt row."""
    prefix = f"{alias}." if alias else ""
    return f"({prefix}status = {JobStatus.COMPLETED:d} AND {prefix}attempt = 1)"


job_attempts = sa.Table(
    "wfj_job_attempts",
    metadata,
    sa.Column("job_id", sa.Text, primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("worker_id", sa.Text),
    sa.Column("started_at", sa.BigInteger),
    sa.Column("ended_at", sa.BigInteger),
    sa.Column("outcome", sa.SmallInteger, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("error_kind", sa.Text),
    sa.Column("traceback", sa.Text),
    # The lease token of the outcome report that ended the attempt; NULL when
    # the coordinator ended it (expiry, timeout, unlock, hand-back).
    sa.Column("reported_token", sa.Text),
)

# The job event log, in ``(ord, id)`` order (store/events.py has the design note).
# This is its SQLite layout, one event per row; on PostgreSQL (migration 0015)
# a row holds a statement's events, each event column an array of them.
job_events = sa.Table(
    "wfj_job_events",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("ord", sa.BigInteger, nullable=False),
    sa.Column("kind", sa.SmallInteger, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("tenant_id", sa.Text, nullable=False),
    sa.Column("job_type", sa.Text, nullable=False),
    sa.Column("definition_id", sa.Text, nullable=False),
    sa.Column("definition_version", sa.Integer, nullable=False),
    sa.Column("instance_id", sa.Text, nullable=False),
    sa.Column("activity_id", sa.Text, nullable=False),
    sa.Column("activity_node_id", sa.Text, nullable=False),
    sa.Column("bookmark_id", sa.Text, nullable=False),
    sa.Column("correlation_id", sa.Text, nullable=False),
    sa.Column("status", sa.SmallInteger, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("due_at", sa.BigInteger),
    sa.Column("error", sa.Text),
    sa.Column("error_kind", sa.Text),
    sa.Column("group_id", sa.Text),
)
# SQLite reads, resumes and purges the log through this index; on PostgreSQL
# ``(ord, id)`` is the primary key of its row layout (migrations 0012, 0015).
sa.Index("ix_wfj_job_events_order", job_events.c.ord, job_events.c.id, unique=True).ddl_if(
    dialect="sqlite"
)

lanes = sa.Table(
    "wfj_lanes",
    metadata,
    sa.Column("tenant_id", sa.Text, primary_key=True),
    sa.Column("job_type", sa.Text, primary_key=True),
    sa.Column("definition_id", sa.Text, primary_key=True),
)

pauses = sa.Table(
    "wfj_pauses",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("kind", sa.SmallInteger, nullable=False),
    sa.Column("tenant_id", sa.Text, nullable=False, server_default=""),
    sa.Column("value", sa.Text, nullable=False, server_default=""),
    sa.Column("actor", sa.Text, nullable=False, server_default=""),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger),
    sa.Column("lifted_at", sa.BigInteger),
    sa.Column("lifted_by", sa.Text),
)

tenants = sa.Table(
    "wfj_tenants",
    metadata,
    sa.Column("tenant_id", sa.Text, primary_key=True),
    sa.Column("weight", sa.Integer, nullable=False, server_default="1"),
)

# Fair-share weights of categories within a tenant (default 1: not stored).
category_weights = sa.Table(
    "wfj_category_weights",
    metadata,
    sa.Column("tenant_id", sa.Text, primary_key=True),
    sa.Column("category", sa.SmallInteger, primary_key=True),
    sa.Column("weight", sa.Integer, nullable=False),
)

concurrency_limits = sa.Table(
    "wfj_concurrency_limits",
    metadata,
    sa.Column("kind", sa.SmallInteger, primary_key=True),
    sa.Column("value", sa.Text, primary_key=True),
    sa.Column("max_running", sa.Integer, nullable=False),
)

# Rate limits: at most ``starts`` job starts per ``period_ms`` in a scope, with
# bursts of up to ``burst`` (GCRA; engine/rate_limits.py). ``value`` "*" applies the
# limit to each value of the kind separately.
rate_limits = sa.Table(
    "wfj_rate_limits",
    metadata,
    sa.Column("kind", sa.SmallInteger, primary_key=True),
    sa.Column("value", sa.Text, primary_key=True),
    sa.Column("starts", sa.Integer, nullable=False),
    sa.Column("period_ms", sa.BigInteger, nullable=False),
    sa.Column("burst", sa.Integer, nullable=False),
)

# The state of each rate-limited scope value, shared by every replica:
# ``tat`` is the GCRA's theoretical arrival time (µs); ``slow_level`` and
# ``slowed_at`` the adaptive slowdown a handler's push-back report set.
rate_buckets = sa.Table(
    "wfj_rate_buckets",
    metadata,
    sa.Column("kind", sa.SmallInteger, primary_key=True),
    sa.Column("value", sa.Text, primary_key=True),
    sa.Column("tat", sa.BigInteger, nullable=False),
    sa.Column("slow_level", sa.SmallInteger, nullable=False, server_default="0"),
    sa.Column("slowed_at", sa.BigInteger, nullable=False, server_default="0"),
)

# One row per (tenant, uniqueness key): the job the key admitted last, and
# what its rule decides the next enqueue by (store/uniqueness.py).
unique_keys = sa.Table(
    "wfj_unique_keys",
    metadata,
    sa.Column("tenant_id", sa.Text, primary_key=True),
    sa.Column("unique_key", sa.Text, primary_key=True),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("rule", sa.SmallInteger, nullable=False),
    sa.Column("admitted_at", sa.BigInteger, nullable=False),
    sa.Column("window_ends_at", sa.BigInteger),
    sa.Column("debounced", sa.Integer, nullable=False, server_default="0"),
    sa.Column("debounced_at", sa.BigInteger),
    sa.Column("max_due_at", sa.BigInteger),
)
sa.Index("ix_wfj_unique_keys_job", unique_keys.c.job_id)

# Job groups (store/groups.py): the completion job, as a JSON NewJob, is
# enqueued once the group is closed and every member has ended.
groups = sa.Table(
    "wfj_groups",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("tenant_id", sa.Text, nullable=False),
    sa.Column("status", sa.SmallInteger, nullable=False),
    sa.Column("completion", sa.Text, nullable=False),
    sa.Column("completion_job_id", sa.Text),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("closed_at", sa.BigInteger),
    sa.Column("completed_at", sa.BigInteger),
    # CreateGroup's idempotency key (per tenant) and, for such a group, the
    # ids of the members it was created with (JSON), which a retry answers.
    sa.Column("idempotency_key", sa.Text),
    sa.Column("member_ids", sa.Text),
)
sa.Index(
    "ux_wfj_groups_idempotency",
    groups.c.tenant_id,
    groups.c.idempotency_key,
    unique=True,
    postgresql_where=groups.c.idempotency_key.isnot(None),
    sqlite_where=groups.c.idempotency_key.isnot(None),
)
# The group of a completion job: retention deletes it with that job.
sa.Index(
    "ix_wfj_groups_completion",
    groups.c.completion_job_id,
    postgresql_where=groups.c.completion_job_id.isnot(None),
    sqlite_where=groups.c.completion_job_id.isnot(None),
)

# One row per worker stream of each coordinator: keyed by (coordinator,
# worker id), since workers on different replicas may announce the same id.
workers = sa.Table(
    "wfj_workers",
    metadata,
    sa.Column("coordinator_id", sa.Text, primary_key=True),
    sa.Column("worker_id", sa.Text, primary_key=True),
    sa.Column("hostname", sa.Text, nullable=False, server_default=""),
    sa.Column("pid", sa.Integer, nullable=False, server_default="0"),
    sa.Column("sdk_version", sa.Text, nullable=False, server_default=""),
    sa.Column("job_types", sa.Text, nullable=False, server_default="[]"),
    sa.Column("slots", sa.Integer, nullable=False, server_default="0"),
    sa.Column("connected_at", sa.BigInteger, nullable=False),
    sa.Column("last_seen_at", sa.BigInteger, nullable=False),
    # Told to drain (by id, or because its coordinator or the cluster drains).
    sa.Column("draining", sa.Boolean, nullable=False, server_default=sa.false()),
    # The tenants its credential covers (a JSON list); NULL: every tenant.
    sa.Column("tenants", sa.Text),
)

job_type_defaults = sa.Table(
    "wfj_job_type_defaults",
    metadata,
    sa.Column("job_type", sa.Text, primary_key=True),
    sa.Column("retry_policy", sa.Text),
    sa.Column("execution_timeout_ms", sa.BigInteger),
    sa.Column("heartbeat_timeout_ms", sa.BigInteger),
    # OrderingFailure: 1 block (default), 2 skip; NULL: the default.
    sa.Column("ordering_failure", sa.SmallInteger),
)

cluster_flags = sa.Table(
    "wfj_cluster_flags",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)

# PENDING and not held behind an ordering key: the rows acquisition may lease.
# Queries that want ``ix_wfj_jobs_ready`` repeat these terms (``ready_job``).
READY_JOB = f"status = {JobStatus.PENDING:d} AND NOT ordering_held"


def ready_job(alias: str) -> str:
    """``READY_JOB`` over the row ``alias``, as terms both planners match to the index."""
    return f"{alias}.status = {JobStatus.PENDING:d} AND NOT {alias}.ordering_held"


sa.Index(
    "ix_wfj_jobs_ready",
    jobs.c.tenant_id,
    jobs.c.job_type,
    jobs.c.definition_id,
    jobs.c.category,
    jobs.c.priority.desc(),
    jobs.c.due_at,
    jobs.c.id,
    postgresql_where=sa.text(READY_JOB),
    sqlite_where=sa.text(READY_JOB),
)
sa.Index(
    "ix_wfj_jobs_leases",
    jobs.c.lease_expires_at,
    postgresql_where=jobs.c.status == int(JobStatus.RUNNING),
    sqlite_where=jobs.c.status == int(JobStatus.RUNNING),
)
sa.Index(
    "ux_wfj_jobs_idempotency",
    jobs.c.tenant_id,
    jobs.c.idempotency_key,
    unique=True,
    postgresql_where=jobs.c.idempotency_key.isnot(None),
    sqlite_where=jobs.c.idempotency_key.isnot(None),
)
# Finished jobs by status and finish time: what the retention purge scans.
# Queries that want this index repeat FINISHED_JOB word for word, so that
# both planners (SQLite's matches the term literally) see it applies.
FINISHED_JOB = f"status IN ({', '.join(str(int(s)) for s in FINISHED_STATUSES)})"
sa.Index(
    "ix_wfj_jobs_finished",
    jobs.c.status,
    jobs.c.finished_at,
    postgresql_where=sa.text(FINISHED_JOB),
    sqlite_where=sa.text(FINISHED_JOB),
)
sa.Index(
    "ix_wfj_jobs_parent",
    jobs.c.parent_job_id,
    jobs.c.id,
    postgresql_where=jobs.c.parent_job_id.isnot(None),
    sqlite_where=jobs.c.parent_job_id.isnot(None),
)
# RUNNING jobs of a key, and its PENDING or FAULTED jobs that are not held: a
# key's head and what could block it (store/ordering.py repeats these terms).
ORDERING_RUNNING = f"ordering_key IS NOT NULL AND status = {JobStatus.RUNNING:d}"
ORDERING_AHEAD = (
    f"ordering_key IS NOT NULL AND status IN ({JobStatus.PENDING:d}, {JobStatus.FAULTED:d}) "
    "AND NOT ordering_held"
)
sa.Index(
    "ix_wfj_jobs_ordering_running",
    jobs.c.tenant_id,
    jobs.c.ordering_key,
    postgresql_where=sa.text(ORDERING_RUNNING),
    sqlite_where=sa.text(ORDERING_RUNNING),
)
sa.Index(
    "ix_wfj_jobs_ordering_ahead",
    jobs.c.tenant_id,
    jobs.c.ordering_key,
    jobs.c.ordering_seq,
    postgresql_where=sa.text(ORDERING_AHEAD),
    sqlite_where=sa.text(ORDERING_AHEAD),
)
sa.Index(
    "ix_wfj_jobs_ordering_held",
    jobs.c.tenant_id,
    jobs.c.ordering_key,
    jobs.c.ordering_seq,
    postgresql_where=sa.text("ordering_held"),
    sqlite_where=sa.text("ordering_held"),
)
# SQLite: the highest number, which the trigger numbering a new job reads.
sa.Index(
    "ix_wfj_jobs_ordering_seq",
    jobs.c.ordering_seq,
    sqlite_where=jobs.c.ordering_seq.isnot(None),
).ddl_if(dialect="sqlite")
sa.Index(
    "ix_wfj_jobs_group",
    jobs.c.group_id,
    jobs.c.status,
    postgresql_where=jobs.c.group_id.isnot(None),
    sqlite_where=jobs.c.group_id.isnot(None),
)
sa.Index("ix_wfj_pauses_active", pauses.c.kind, pauses.c.value, pauses.c.lifted_at)


def _check_record_matches_table() -> None:
    from dataclasses import fields

    from coordinator.model import JobRecord

    names = [f.name for f in fields(JobRecord)]
    if names != [c.name for c in jobs.columns]:
        raise RuntimeError("JobRecord fields must list wfj_jobs columns in table order")


_check_record_matches_table()
