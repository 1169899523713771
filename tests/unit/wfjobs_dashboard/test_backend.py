"""The overview's calls to the coordinator go out at once, not one after another."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

from wfjobs_dashboard.backend import BUCKETS, THREADS, Backend


class CountingClient:
    """Stands in for AdminClient: each call waits (up to 5 s) until THREADS are in flight."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.in_flight = self.most = self.calls = 0

    def _enter(self) -> None:
        with self.lock:
            self.calls += 1
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.in_flight >= THREADS or self.most >= THREADS, 5)
        with self.lock:
            self.in_flight -= 1

    def get_stats(self, **kwargs: Any) -> Any:
        self._enter()
        windows = [SimpleNamespace(completions=0, failures=0, retries=0)] * len(
            kwargs.get("windows", ())
        )
        return SimpleNamespace(windows=windows)

    def list_pauses(self, **kwargs: Any) -> list[Any]:
        self._enter()
        return []

    def list_jobs(self, *args: Any, **kwargs: Any) -> Any:
        self._enter()
        return SimpleNamespace(jobs=[])


def test_the_overview_asks_for_everything_at_once() -> None:
    backend = Backend(None)  # type: ignore[arg-type]
    client = CountingClient()
    backend.client = lambda token, action=False: client  # type: ignore[method-assign]
    try:
        view = asyncio.run(backend.overview("", ""))
    finally:
        backend.close()
    # One GetStats (with the charts' windows), ListPauses, a sample per bucket.
    assert client.calls == 2 + BUCKETS
    assert client.most == THREADS  # as many in flight as the dashboard has threads
    assert len(view.history) == BUCKETS and not view.stale
