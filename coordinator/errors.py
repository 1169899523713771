"""Domain errors.

The store and the engine raise these; one interceptor in ``coordinator.api``
maps them to gRPC status codes. Each carries a message a person can act on.
"""

from __future__ import annotations


class WorkflowJobsError(Exception):
    """Root of every error the coordinator raises on purpose."""


class InvalidArgument(WorkflowJobsError):
    """The caller sent something malformed or out of range."""


class NotFound(WorkflowJobsError):
    """The named job, pause or worker does not exist."""


class FailedPrecondition(WorkflowJobsError):
    """The request is valid but the job is not in a state that allows it."""


class LeaseLost(FailedPrecondition):
    """The lease token no longer owns the job (expired, unlocked or finished)."""

    def __init__(self, job_id: str, detail: str = "") -> None:
        message = f"lease lost for job {job_id}"
        if detail:
            message = f"{message}: {detail}"
        super().__init__(message)
        self.job_id = job_id


class OutOfRange(WorkflowJobsError):
    """The request reaches past what is kept (an event cursor older than retention)."""


class ShuttingDown(WorkflowJobsError):
    """This coordinator is shutting down; the caller reconnects (to it or another replica)."""


class AlreadyExists(WorkflowJobsError):
    """Something with the same identity already exists."""


class ResourceExhausted(WorkflowJobsError):
    """A configured limit was reached."""


class Unauthenticated(WorkflowJobsError):
    """The call carries no credential, or one the coordinator does not know."""


class PermissionDenied(WorkflowJobsError):
    """The credential is valid but may not do this (wrong role or tenant)."""


class StoreUnavailable(WorkflowJobsError):
    """The database cannot be reached right now; retrying later may work."""


class Aborted(WorkflowJobsError):
    """The database gave this call's transaction up (a deadlock, a serialization
    failure, a lock it could not take); the database is reachable and the
    call may be sent again as it was."""


class DeadlineExceeded(WorkflowJobsError):
    """A statement of this call ran past the database's statement timeout; the
    database is reachable and the call may be sent again."""


class SchemaMismatch(WorkflowJobsError):
    """The database schema is not the one this coordinator was built for."""


class DatabaseInUse(WorkflowJobsError):
    """Another coordinator holds this SQLite database file."""
