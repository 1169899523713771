"""Handler start records: written by worker processes, read by the figures.

A handler that records appends one line per job start to an in-memory list;
a daemon thread flushes it to the process's record file every 100 ms, so the
orchestrator can follow progress (line counts) and a killed worker still
leaves what it flushed. A line is `start_ns tenant enqueued_ns job_id` (wall clock,
nanoseconds; `enqueued_ns` is 0 when the payload carries none). All
processes share one machine clock, so starts from several workers sort.
"""

from __future__ import annotations

import atexit
import json
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FLUSH_INTERVAL_S = 0.1


@dataclass(frozen=True, slots=True)
class StartRecord:
    """One handler start.

    Attributes:
        start_ns: Wall-clock time the handler began, ns since the epoch.
        tenant: The job's tenant.
        enqueued_ns: Wall-clock time the enqueuer stamped into the payload (0 if none).
        job_id: The job's id ("-" when the recorder was given none).
    """

    start_ns: int
    tenant: str
    enqueued_ns: int
    job_id: str = "-"


def enqueued_ns_from_payload(data: bytes) -> int:
    """The `enqueued_ns` stamp of a bench payload (see `payload_with_stamp`), or 0."""
    if b"enqueued_ns" not in data:
        return 0
    return int(json.loads(data)["enqueued_ns"])


def payload_with_stamp(enqueued_ns: int | None = None) -> bytes:
    return json.dumps({"enqueued_ns": enqueued_ns or time.time_ns()}).encode()


class StartRecorder:
    """Collects handler starts in a worker process and flushes them to `path`."""

    def __init__(self, path: str | Path) -> None:
        self._path = Path(path)
        self._pending: deque[str] = deque()  # append/popleft are thread-safe
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._path.write_text("")
        self._thread = threading.Thread(target=self._flush_loop, daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def record(self, tenant: str, payload: bytes = b"", job_id: str = "") -> None:
        """Record a handler start now (call first thing in the handler)."""
        start_ns = time.time_ns()
        line = f"{start_ns} {tenant or '-'} {enqueued_ns_from_payload(payload)} {job_id or '-'}\n"
        self._pending.append(line)

    def _flush(self) -> None:
        with self._lock:
            lines = [self._pending.popleft() for _ in range(len(self._pending))]
            if lines:
                with self._path.open("a") as out:
                    out.writelines(lines)

    def _flush_loop(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL_S):
            self._flush()

    def close(self) -> None:
        self._stop.set()
        self._flush()


def count_records(paths: Iterable[Path]) -> int:
    """Lines flushed so far over several record files (cheap progress check)."""
    total = 0
    for path in paths:
        try:
            with path.open("rb") as handle:
                total += sum(
                    chunk.count(b"\n") for chunk in iter(lambda h=handle: h.read(1 << 20), b"")
                )
        except FileNotFoundError:
            pass
    return total


def read_records(paths: Iterable[Path]) -> list[StartRecord]:
    """All records of several files, sorted by start time."""
    records = []
    for path in paths:
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 4:
                records.append(StartRecord(int(parts[0]), parts[1], int(parts[2]), parts[3]))
    records.sort(key=lambda r: r.start_ns)
    return records
