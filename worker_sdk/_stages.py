"""Job receipt timestamps for the bench's latency anatomy (off unless asked).

With ``WFJOBS_STAGE_LOG`` set to a file prefix when the worker starts, each
job batch received appends ``job_id received_by_worker wall_clock_ns`` per job
to ``<prefix>.worker.<pid>``; unset, the hook is one boolean test. Every batch
is written and flushed at once: a bench instrument, not a production one.
"""

from __future__ import annotations

import os
import time
from typing import IO

ENABLED = bool(os.environ.get("WFJOBS_STAGE_LOG"))
_out: IO[str] | None = None


def received(job_ids: list[str]) -> None:
    """Note that this worker received ``job_ids`` now. Call only when ENABLED."""
    global _out
    now = time.time_ns()
    if _out is None:
        _out = open(f"{os.environ['WFJOBS_STAGE_LOG']}.worker.{os.getpid()}", "a")  # noqa: SIM115
    _out.write("".join(f"{job_id} received_by_worker {now}\n" for job_id in job_ids))
    _out.flush()
