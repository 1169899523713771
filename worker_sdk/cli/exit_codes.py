"""The exit codes of ``wfjobs``: stable, for scripts, and printed by ``wfjobs --help``."""

from __future__ import annotations

import grpc

EXIT_CODES_HELP = """\
Exit codes (stable, for scripts):
    0  success
    1  unexpected error
    2  bad usage, or the coordinator rejected the input (INVALID_ARGUMENT)
    3  not found (job, pause, worker)
    4  wrong state (FAILED_PRECONDITION, ALREADY_EXISTS), e.g. retrying a running job
    5  coordinator unreachable or too slow (UNAVAILABLE, DEADLINE_EXCEEDED)
    6  the coordinator does not implement the call (UNIMPLEMENTED)
    7  not allowed (UNAUTHENTICATED, PERMISSION_DENIED)
    8  enqueue --wait: the job faulted or was cancelled
    9  a bulk action across every tenant was not confirmed (see --yes)
   10  enqueue --wait: the wait ended first; the job is still pending or running
  141  the reader of the output went away (e.g. `| head`); nothing is printed
"""

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_WRONG_STATE = 4
EXIT_UNAVAILABLE = 5
EXIT_UNIMPLEMENTED = 6
EXIT_DENIED = 7
EXIT_JOB_FAILED = 8
EXIT_NOT_CONFIRMED = 9
EXIT_WAIT_ENDED = 10

EXIT_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: EXIT_USAGE,
    grpc.StatusCode.OUT_OF_RANGE: EXIT_USAGE,
    grpc.StatusCode.NOT_FOUND: EXIT_NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION: EXIT_WRONG_STATE,
    grpc.StatusCode.ALREADY_EXISTS: EXIT_WRONG_STATE,
    grpc.StatusCode.UNAVAILABLE: EXIT_UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: EXIT_UNAVAILABLE,
    grpc.StatusCode.UNIMPLEMENTED: EXIT_UNIMPLEMENTED,
    grpc.StatusCode.UNAUTHENTICATED: EXIT_DENIED,
    grpc.StatusCode.PERMISSION_DENIED: EXIT_DENIED,
}
