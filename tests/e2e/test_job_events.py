"""WatchJobEvents end to end, with real coordinator and worker processes: a
watcher resumed across a coordinator kill receives every event of the log with
no gap and no reordering; a purged cursor answers OUT_OF_RANGE; a tenant token
sees only its tenant's events."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faults.harness import free_port

from coordinator.api.auth import hash_token
from coordinator.model import EventFilter
from coordinator.store import open_store
from wfj_testing import Coordinator, WorkerProcess, wait_until
from worker_sdk import (
    JobEvent,
    JobEventFilter,
    OutOfRangeError,
    SchedulerClient,
    UnavailableError,
    WorkflowJobsError,
)


class Watcher:
    """A blocking ``watch_events`` in a thread, collecting what it receives."""

    def __init__(self, target: str, **watch: Any) -> None:
        self.events: list[JobEvent] = []
        self.error: BaseException | None = None
        self._closing = False
        self._client = SchedulerClient(target, **watch.pop("client", {}))
        self._watch = watch
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._client.watch_events(**self._watch):
                self.events.append(event)
        except WorkflowJobsError as e:
            if not self._closing:
                self.error = e

    def close(self) -> None:
        self._closing = True
        self._client.close()
        self._thread.join(10)


def _stored_log(url: str) -> list[str]:
    """Every cursor of the event log, once all committed events are released."""
    store = open_store(url)
    try:

        def released() -> list[str] | None:
            page = store.event_read(EventFilter(), None, 100_000)
            return None if page.held_back else [str(e.cursor) for e in page.events]

        return wait_until(released, 30, "the event log to be released")
    finally:
        store.dispose()


def _restartable(url: str, port: int, log: Path) -> Coordinator:
    return Coordinator(url, log, listen=f"127.0.0.1:{port}", args=("--drain-timeout", "2"))


def test_a_watch_resumed_across_a_coordinator_kill_misses_nothing(
    e2e_database: str, tmp_path: Path
) -> None:
    port = free_port()
    postgres = e2e_database.startswith("postgresql")
    started: list[Coordinator | WorkerProcess] = []

    def start(proc: Any) -> Any:
        started.append(proc)
        return proc

    try:
        watched = start(_restartable(e2e_database, port, tmp_path / "c1.log"))
        # On PostgreSQL the jobs run through a second replica, so the watcher's
        # coordinator learns of them from the other replica's notifications.
        other = start(Coordinator(e2e_database, tmp_path / "c2.log")) if postgres else watched
        start(
            WorkerProcess(
                other.target, tmp_path / "record.txt", tmp_path / "worker.log", "--concurrency", "8"
            )
        )
        watcher = Watcher(watched.target, from_oldest=True)
        jobs: list[str] = []
        with SchedulerClient(other.target) as scheduler:
            for i in range(20):
                jobs.append(scheduler.enqueue("noop", {"i": i}).id)
            for _ in range(5):
                jobs.append(scheduler.enqueue("flaky", {"succeed_on": 2}).id)
        wait_until(
            lambda: sum(e.kind == "COMPLETED" for e in watcher.events) >= 10,
            60,
            "the watcher to see completions",
        )
        watched.kill()
        watched = start(_restartable(e2e_database, port, tmp_path / "c1-again.log"))
        if not postgres:
            other = watched
        with SchedulerClient(other.target) as scheduler:
            for i in range(20):
                jobs.append(_enqueue_when_reachable(scheduler, {"i": 100 + i}))
        wait_until(
            lambda: {e.job_id for e in watcher.events if e.kind == "COMPLETED"} >= set(jobs),
            90,
            "every job's completion to reach the watcher",
        )
        watcher.close()
        assert watcher.error is None, watcher.error
        received = [e.cursor for e in watcher.events]
        log = _stored_log(e2e_database)
        # Every event exactly once, in the log's order (so each job's in commit order).
        assert received == log[: len(received)]
        assert set(log[len(received) :]).isdisjoint(received)
        per_job: dict[str, list[str]] = {}
        for e in watcher.events:
            per_job.setdefault(e.job_id, []).append(e.kind)
        for job_id in jobs:
            kinds = per_job[job_id]
            assert kinds[0] == "ENQUEUED" and kinds[-1] == "COMPLETED", kinds
            assert kinds.count("COMPLETED") == 1, kinds
        for job_id in jobs[20:25]:
            assert per_job[job_id][:6] == [
                "ENQUEUED",
                "STARTED",
                "ATTEMPT_FAILED",
                "RETRY_SCHEDULED",
                "STARTED",
                "COMPLETED",
            ]
    finally:
        for proc in reversed(started):
            proc.stop()


def test_a_cursor_older_than_retention_is_out_of_range(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    coordinator = processes["coordinator"](e2e_database)
    with SchedulerClient(coordinator.target) as scheduler:
        for _ in range(3):
            scheduler.enqueue("noop", {})
        [first, *_] = list(_take(scheduler.watch_events(from_oldest=True), 3))
    store = open_store(e2e_database)
    try:
        _stored_log(e2e_database)
        assert store.event_purge(2**62, 2) == 2
        purged = str(store.event_purged_through())
    finally:
        store.dispose()
    with SchedulerClient(coordinator.target) as scheduler:
        with pytest.raises(OutOfRangeError) as refused:
            next(iter(scheduler.watch_events(after=first.cursor)))
        assert purged in str(refused.value)
        # The cursor the message names is accepted: the event after it arrives.
        [kept] = _take(scheduler.watch_events(after=purged), 1)
        assert kept.kind == "ENQUEUED"
        with pytest.raises(WorkflowJobsError, match="not an event cursor"):
            next(iter(scheduler.watch_events(after="yesterday")))


def _open_watch(target: str, after: str) -> tuple[Any, str]:
    """The status a watch from ``after`` ends with, over raw gRPC, and its details;
    OK and the first cursor when it opens."""
    import grpc

    from workflowjobs.v1 import scheduler_service_pb2 as spb
    from workflowjobs.v1 import scheduler_service_pb2_grpc as spb_grpc

    with grpc.insecure_channel(target) as channel:
        call = spb_grpc.JobSchedulerServiceStub(channel).WatchJobEvents(
            spb.WatchJobEventsRequest(after=after), timeout=10
        )
        try:
            first = next(iter(call))
        except grpc.RpcError as e:
            return e.code(), e.details()
        call.cancel()
        return grpc.StatusCode.OK, first.cursor


def test_only_cursors_of_this_log_are_resumed(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    """docs/events.md: only the exact forms the coordinator hands out parse
    (INVALID_ARGUMENT otherwise, the value echoed at most in part); a
    well-formed cursor ahead of the log, or of another database history, is
    OUT_OF_RANGE saying what to do."""
    import grpc

    coordinator = processes["coordinator"](e2e_database)
    with SchedulerClient(coordinator.target) as scheduler:
        scheduler.enqueue("noop", {})
        [event] = _take(scheduler.watch_events(from_oldest=True), 1)
    code, opened = _open_watch(coordinator.target, event.cursor)
    assert code == grpc.StatusCode.OK, opened
    position = event.cursor.split(".")[0]
    postgres = e2e_database.startswith("postgresql")
    # PostgreSQL cursors name their history; SQLite's have none.
    assert ("." in event.cursor) == postgres, event.cursor
    for bad in (
        f" {position}",
        f"{position} ",
        f"{position}\n",
        "\uff11-\uff12",  # fullwidth digits
        "\u0661-\u0662",  # Arabic-Indic digits
        f"0{position}",
        "1-2-0",
        f"{position}.XYZ",
        "7" * 16_384,
        "x" * 16_384,
    ):
        code, details = _open_watch(coordinator.target, bad)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (bad[:40], code, details)
        # A value longer than any string field may be is refused for that first.
        expected = "the limit is 512" if len(bad) > 512 else "is not an event cursor"
        assert expected in details, details
        assert len(details) < 400, len(details)
    # Ahead of every cursor this log handed out (a database recreated under a
    # client that kept its cursor): refused, not an empty stream.
    code, details = _open_watch(coordinator.target, "9000000000000000000-1")
    assert code == grpc.StatusCode.OUT_OF_RANGE, (code, details)
    assert "ahead of this event log" in details and "from_oldest" in details, details
    # Of another history (a failover to a standby that missed transactions).
    code, details = _open_watch(coordinator.target, f"{position}.0123abcd")
    assert code == grpc.StatusCode.OUT_OF_RANGE, (code, details)
    assert "belongs to database history 0123abcd" in details, details
    assert "from_oldest" in details, details
    # The cursor handed out, and the position alone (cursors of before), resume.
    for good in (event.cursor, position):
        code, opened = _open_watch(coordinator.target, good)
        assert code == grpc.StatusCode.OK, (good, opened)


def test_a_tenant_token_sees_only_its_tenant_s_events(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.jsonl"
    tokens.write_text(
        "\n".join(
            json.dumps(entry)
            for entry in (
                {
                    "name": "ops",
                    "sha256": hash_token("ops"),
                    "roles": ["scheduler"],
                    "tenants": ["*"],
                },
                {
                    "name": "acme",
                    "sha256": hash_token("acme"),
                    "roles": ["scheduler"],
                    "tenants": ["acme"],
                },
                {"name": "w", "sha256": hash_token("w"), "roles": ["worker"], "tenants": ["*"]},
            )
        )
    )
    coordinator = Coordinator(
        f"sqlite:///{tmp_path / 'auth.db'}",
        tmp_path / "c.log",
        args=("--drain-timeout", "2", "--tokens-file", str(tokens)),
    )
    try:
        with SchedulerClient(coordinator.target, token="ops") as ops:
            ops.enqueue("noop", {}, tenant_id="acme")
            ops.enqueue("noop", {}, tenant_id="globex")
            ops.enqueue("noop", {}, tenant_id="acme")
        with SchedulerClient(coordinator.target, token="acme") as acme:
            seen = _take(acme.watch_events(from_oldest=True), 2)
            assert {e.tenant_id for e in seen} == {"acme"}
            with pytest.raises(WorkflowJobsError) as refused:
                next(iter(acme.watch_events(JobEventFilter(tenant_id="globex"))))
            assert refused.value.code.name == "PERMISSION_DENIED"
        with SchedulerClient(coordinator.target, token="w") as worker_token:
            with pytest.raises(WorkflowJobsError) as refused:
                next(iter(worker_token.watch_events()))
            assert refused.value.code.name == "PERMISSION_DENIED"
        with SchedulerClient(coordinator.target, token="ops") as ops:
            everything = _take(ops.watch_events(from_oldest=True), 3)
            assert [e.tenant_id for e in everything] == ["acme", "globex", "acme"]
    finally:
        coordinator.stop()


def _enqueue_when_reachable(scheduler: SchedulerClient, payload: dict[str, int]) -> str:
    """Enqueue, retrying while the channel still reports the restarted coordinator down."""

    def attempt() -> str | None:
        try:
            return scheduler.enqueue("noop", payload).id
        except UnavailableError:
            return None

    return wait_until(attempt, 30, "the restarted coordinator to accept an enqueue")


def _take(events: Any, n: int, timeout: float = 30) -> list[JobEvent]:
    """The first ``n`` events of a watch (then the watch is closed)."""
    out: list[JobEvent] = []
    deadline = time.monotonic() + timeout
    for event in events:
        out.append(event)
        if len(out) >= n or time.monotonic() > deadline:
            break
    events.close()
    return out


def test_the_cli_prints_events_and_resumes_after_a_cursor(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    import subprocess
    import sys

    from wfj_testing import subprocess_env

    coordinator = processes["coordinator"](e2e_database)
    wfjobs = str(Path(sys.executable).parent / "wfjobs")
    env = subprocess_env({"WFJOBS_TARGET": coordinator.target})

    def watch(*args: str) -> list[dict[str, Any]]:
        done = subprocess.run(
            [wfjobs, "--json", "events", "watch", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    with SchedulerClient(coordinator.target) as scheduler:
        first = scheduler.enqueue("noop", {}, tenant_id="acme").id
        second = scheduler.enqueue("noop", {}, tenant_id="acme").id
    events = watch("--from-oldest", "--count", "2", "--tenant", "acme", "--kind", "enqueued")
    assert [(e["job_id"], e["kind"]) for e in events] == [
        (first, "JOB_EVENT_KIND_ENQUEUED"),
        (second, "JOB_EVENT_KIND_ENQUEUED"),
    ]
    [after] = watch("--after", events[0]["cursor"], "--count", "1")
    assert after["job_id"] == second
    bad = subprocess.run(
        [wfjobs, "events", "watch", "--kind", "finished"], env=env, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "not an event kind" in bad.stderr


def test_a_coordinator_shutting_down_ends_its_watches_with_unavailable(tmp_path: Path) -> None:
    coordinator = Coordinator(
        f"sqlite:///{tmp_path / 'stop.db'}", tmp_path / "c.log", args=("--drain-timeout", "120")
    )
    try:
        watcher = Watcher(coordinator.target, from_oldest=True, reconnect=False)
        with SchedulerClient(coordinator.target) as scheduler:
            scheduler.enqueue("noop", {})
        wait_until(lambda: watcher.events, 30, "the watcher to see the enqueue")
        coordinator.proc.terminate()
        # The watch does not hold the 120 s drain grace: it ends, and so does the process.
        wait_until(lambda: watcher.error is not None, 60, "the watch to end")
        assert isinstance(watcher.error, UnavailableError), watcher.error
        assert "shutting down" in str(watcher.error)
        wait_until(lambda: not coordinator.alive(), 60, "the coordinator to exit")
    finally:
        coordinator.stop()


def test_start_places_the_watch_before_the_batch_is_enqueued_and_events_carry_results(
    e2e_database: str, processes: dict[str, Callable[..., Any]]
) -> None:
    """The batch-wait pattern of docs/events.md: start the watch (its cursor
    comes back once the coordinator has placed it), enqueue, then read each
    job's final event, result decoded, with no ``from_oldest`` and no race."""
    from worker_sdk import JobRequest, WorkflowRef

    coordinator = processes["coordinator"](e2e_database)
    processes["worker"](coordinator.target, "--concurrency", "8")
    final = ["COMPLETED", "FAULTED", "CANCELLED"]
    with SchedulerClient(coordinator.target) as scheduler:
        scheduler.enqueue("noop", {"before": True})  # before the watch: not delivered
        with scheduler.watch_events(
            JobEventFilter(correlation_id="batch-7", kinds=final)
        ) as events:
            start = events.start()
            assert start and events.cursor == start
            batch = [
                JobRequest("noop", {"n": i}, workflow=WorkflowRef(correlation_id="batch-7"))
                for i in range(20)
            ]
            ids = {r.job_id for r in scheduler.enqueue_batch(batch)}
            results: dict[str, Any] = {}
            for event in events:
                assert event.job_id in ids, event
                results[event.job_id] = (event.kind, event.result_value())
                if len(results) == len(ids):
                    break
            last = events.cursor
        # Resuming after the start cursor gives the same events again.
        with scheduler.watch_events(
            JobEventFilter(correlation_id="batch-7", kinds=final), after=start
        ) as again:
            replayed = [next(again) for _ in range(len(ids))]
    assert set(results) == ids
    assert {kind for kind, _ in results.values()} == {"COMPLETED"}
    assert {json.dumps(value, sort_keys=True) for _, value in results.values()} == {
        json.dumps({"ok": True})
    }
    assert {e.job_id for e in replayed} == ids
    assert replayed[-1].cursor == last
