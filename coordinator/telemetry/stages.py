"""Per-stage timestamps of single enqueues, for the bench's latency anatomy.

Off unless ``WFJOBS_STAGE_LOG`` names a file prefix when the coordinator
starts; off, every hook is one module-level boolean test. On, each stage of a
job's way through this process appends ``job_id stage wall_clock_ns`` to
``<prefix>.coordinator.<pid>`` (the bench joins it with the client's send time
and the worker's own stages by job id). Lines are kept in memory and written by
a daemon thread every 100 ms (and at exit). A bench instrument, not a
production one: nothing bounds the memory between two writes.

Stages, in order:

* ``received``: the servicer began the single enqueue (interceptors and
  request decoding are behind it);
* ``flush``: its group commit began (the wait before it is the queue of
  enqueues behind the insert in flight);
* ``store_thread``: a store thread began the insert (the hand-off to the pool);
* ``committed``: the insert statement returned in that thread (committed);
* ``resumed``: the event loop resumed the enqueue after the insert;
* ``stream_write``: the job was handed to a worker's ``AcquireJobs`` stream.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

ENV = "WFJOBS_STAGE_LOG"
ENABLED = bool(os.environ.get(ENV))
FLUSH_INTERVAL_S = 0.1

_pending: deque[str] = deque()  # append and popleft are thread-safe
_writer: threading.Thread | None = None
_lock = threading.Lock()


def _flush() -> None:
    with _lock:
        lines = [_pending.popleft() for _ in range(len(_pending))]
        if lines:
            with open(f"{os.environ[ENV]}.coordinator.{os.getpid()}", "a") as out:
                out.writelines(lines)


def _flush_loop() -> None:
    while True:
        time.sleep(FLUSH_INTERVAL_S)
        _flush()


def mark(stage: str, job_ids: Iterable[str], at_ns: int | None = None) -> None:
    """Note that ``job_ids`` reached ``stage`` now (or at ``at_ns``). Call only when ENABLED."""
    global _writer
    at = time.time_ns() if at_ns is None else at_ns
    _pending.append("".join(f"{job_id} {stage} {at}\n" for job_id in job_ids))
    if _writer is None:
        with _lock:
            if _writer is None:
                _writer = threading.Thread(target=_flush_loop, name="wfj-stages", daemon=True)
                _writer.start()
                atexit.register(_flush)


def timed_in_thread(fn: Callable[..., T], job_ids: list[str]) -> Callable[..., T]:
    """``fn`` marking ``store_thread`` before it runs and ``committed`` after it returns."""

    def run(*args: Any, **kwargs: Any) -> T:
        mark("store_thread", job_ids)
        result = fn(*args, **kwargs)
        mark("committed", job_ids)
        return result

    return run


__all__ = ["ENABLED", "ENV", "mark", "timed_in_thread"]
