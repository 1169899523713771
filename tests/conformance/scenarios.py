"""The conformance scenarios: what a conforming worker does, checked from the
outside (docs/protocol.md states each rule; the section is named per scenario).

Each scenario runs a real coordinator on the given store and the SDK's
conformance worker as a process (the contract: README.md), and asserts on
what the coordinator recorded (job status, attempt history, events), on the
AcquireJobs stream as the coordinator saw it (a recording proxy), and on
what the worker's handlers wrote to their record file. A module per SDK
imports them with its ``sdk`` fixture (test_python_worker.py,
test_typescript_worker.py).
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance.kit import (
    TENANT,
    Api,
    Coordinator,
    RecordingProxy,
    Sdk,
    SilenceableProxy,
    WorkerUnderTest,
    max_overlap,
    outcomes,
    result,
)

from wfj_testing import wait_until
from workflowjobs.v1 import job_pb2, scheduler_service_pb2, worker_service_pb2

COMPLETED = job_pb2.JOB_STATUS_COMPLETED
FAULTED = job_pb2.JOB_STATUS_FAULTED
LEASE_STATE_CANCEL_REQUESTED = worker_service_pb2.LEASE_STATE_CANCEL_REQUESTED
CANCELLED = job_pb2.JOB_STATUS_CANCELLED
PENDING = job_pb2.JOB_STATUS_PENDING
RUNNING = job_pb2.JOB_STATUS_RUNNING

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shared_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A store of the module's own on each dialect (for the shared coordinator)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('shared') / 'wfjobs.db'}"
        return
    request.getfixturevalue("pg_database")  # skips, or fails under CI, without a server
    from conftest import new_pg_database

    url, drop = new_pg_database("wfj_conformance")
    try:
        yield url
    finally:
        drop()  # type: ignore[operator]


@pytest.fixture(scope="module")
def coordinator(
    shared_store: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Coordinator]:
    """One coordinator for the scenarios that do not restart or configure it:
    each starts its own worker, and its jobs are finished or cancelled after it."""
    c = Coordinator(shared_store, tmp_path_factory.mktemp("coordinator"))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def api(coordinator: Coordinator) -> Iterator[Api]:
    a = Api(coordinator.target)
    try:
        yield a
    finally:
        a.cancel_unfinished()
        a.close()


@pytest.fixture
def own_coordinator(store_url: str, tmp_path: Path) -> Iterator[Coordinator]:
    c = Coordinator(store_url, tmp_path)
    try:
        yield c
    finally:
        c.stop()


def start_worker(sdk: Sdk, target: str, tmp: Path, name: str, **options: object) -> WorkerUnderTest:
    worker = WorkerUnderTest(sdk, target, tmp, worker_id=f"{sdk.name}-{name}", **options)  # type: ignore[arg-type]
    worker.wait_connected()
    return worker


def lines(log: str, needle: str) -> list[str]:
    return [line for line in log.splitlines() if needle in line]


# -- protocol.md "Outcomes", "Retry and failure", "Child jobs", "Trace context", "Logs" ---------


def test_each_job_type_ends_as_its_handler_decides(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    worker = start_worker(sdk, coordinator.target, tmp_path, "types")
    enqueuer_trace, enqueuer_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    traceparent = f"00-{enqueuer_trace}-{enqueuer_span}-01"
    ids = {
        "echo": api.enqueue("echo", {"name": "Ada", "n": [1, 2]}),
        "flaky": api.enqueue("flaky", {"fail_times": 2}, max_attempts=3),
        "fatal": api.enqueue("fatal", max_attempts=3),
        "large": api.enqueue("large", {"bytes": 5 * 1024 * 1024}),
        "spawn": api.enqueue("spawn", {"child": {"from": "parent"}}, traceparent=traceparent),
        "trace": api.enqueue("trace", traceparent=traceparent),
    }
    jobs = {name: api.wait(job_id) for name, job_id in ids.items()}
    try:
        echo = jobs["echo"]
        assert (echo.status, outcomes(echo)) == (COMPLETED, ["COMPLETED"])
        assert result(echo) == {"name": "Ada", "n": [1, 2]}
        assert echo.attempts[0].worker_id == worker.worker_id

        flaky = jobs["flaky"]
        assert (flaky.status, outcomes(flaky)) == (COMPLETED, ["FAILED", "FAILED", "COMPLETED"])
        assert [a.error_kind for a in flaky.attempts[:2]] == ["FlakyError", "FlakyError"]
        assert [a.error for a in flaky.attempts[:2]] == [
            "FlakyError: attempt 1 fails",
            "FlakyError: attempt 2 fails",
        ]
        assert all(a.traceback for a in flaky.attempts[:2]), (
            "a failed attempt carries its traceback"
        )
        assert result(flaky) == {"attempt": 3}

        fatal = jobs["fatal"]
        assert (fatal.status, outcomes(fatal)) == (FAULTED, ["FAILED"]), "non-retryable: no retry"
        assert fatal.attempts[0].error_kind == "ConformanceFatal"
        assert "this job cannot succeed" in fatal.attempts[0].error

        large = jobs["large"]
        assert large.status == COMPLETED
        assert len(result(large)["data"]) == 5 * 1024 * 1024

        spawn = jobs["spawn"]
        child = api.wait(result(spawn)["child_id"])
        assert (child.status, result(child)) == (COMPLETED, {"from": "parent"})
        assert child.parent_job_id == spawn.id
        assert child.idempotency_key == f"child:{spawn.id}:#0"
        assert child.tenant_id == spawn.tenant_id == TENANT
        assert child.traceparent.split("-")[1] == enqueuer_trace, (
            "the child is in the parent's trace"
        )

        traced = result(jobs["trace"])
        assert traced["trace_id"] == enqueuer_trace
        assert traced["parent_span_id"] == enqueuer_span, (
            "the handler's span is the enqueuer's child"
        )
        assert traced["span_id"] not in ("", enqueuer_span)
    finally:
        worker.stop()
    log = worker.log()
    assert len(lines(log, f"worker {worker.worker_id} started (workflow-jobs ")) == 1
    assert len(lines(log, "connected to coordinator ")) == 1
    assert lines(log, f"at {coordinator.target} as worker {worker.worker_id}")
    failed = lines(log, f"job {flaky.id} (flaky) attempt ")
    assert [" failed after " in line for line in failed] == [True, True], failed
    assert failed[0].endswith("s: FlakyError: attempt 1 fails")
    assert lines(log, f"job {fatal.id} (fatal) attempt 1/3 failed after ")[0].endswith(
        "; not retryable"
    )
    assert echo.id not in log, "a completed attempt logs nothing at INFO"


# -- protocol.md "Credit" ---------------------------------------------------------------------


def test_credit_is_never_exceeded(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    concurrency = 3
    proxy = RecordingProxy(coordinator.target)
    worker = start_worker(sdk, proxy.target, tmp_path, "credit", concurrency=concurrency)
    try:
        ids = [api.enqueue("sleep", {"ms": 150}) for _ in range(15)]
        credits_seen = []
        for job_id in ids:
            for w in api.workers():
                if w.worker_id == worker.worker_id:
                    assert w.slots == concurrency
                    credits_seen.append(w.credits)
            assert api.wait(job_id).status == COMPLETED
    finally:
        worker.stop()
        proxy.close()
    assert all(c <= concurrency for c in credits_seen), credits_seen
    [stream] = proxy.log.streams
    assert stream.pushed == 15
    assert stream.over_pushed == 0, f"the coordinator pushed more than granted: {stream.timeline}"
    assert stream.outstanding_after_grant, "the worker granted credit"
    assert max(stream.outstanding_after_grant) <= concurrency, stream.timeline
    rows = worker.records()
    starts = {(j, a): t for e, j, a, t in rows if e == "start"}
    ends = {(j, a): t for e, j, a, t in rows if e == "end"}
    assert set(starts) == set(ends) and len(starts) == 15
    running = max_overlap((starts[k], ends[k]) for k in starts)
    assert 2 <= running <= concurrency, running


# -- protocol.md "Heartbeats" -----------------------------------------------------------------


def test_a_lease_is_extended_while_the_handler_runs_past_it(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    worker = start_worker(sdk, coordinator.target, tmp_path, "lease")
    try:
        # Runs 4 s on a 1.5 s lease: only heartbeats keep it.
        job_id = api.enqueue("long", {"ms": 4000, "heartbeat_ms": 400}, lease_s=1.5)
        running = api.wait_status(job_id, RUNNING)
        first_expiry = running.lease_expire_time.ToMilliseconds()
        job = api.wait(job_id)
    finally:
        worker.stop()
    assert (job.status, outcomes(job)) == (COMPLETED, ["COMPLETED"])
    assert job.attempt == 1
    assert job.attempts[0].end_time.ToMilliseconds() > first_expiry, "it ran past its first lease"
    assert [e for e, *_ in worker.records()] == ["start"]


def test_cancel_reaches_the_handler_within_two_heartbeats(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    # Through the proxy, which records every heartbeat and its answer: the
    # cancel must ride the first heartbeat the worker sends after it (one sent
    # before it may still be answered EXTENDED), and that answer alone must
    # stop the handler. The heartbeat interval (lease / 3) then bounds the
    # delay, whatever the machine's load.
    proxy = RecordingProxy(coordinator.target)
    worker = start_worker(sdk, proxy.target, tmp_path, "cancel")
    try:
        job_id = api.enqueue("cancel", lease_s=3.0)
        wait_until(lambda: worker.records(), 30, "the handler to start")
        api.cancel(job_id)
        proxy.mark()
        job = api.wait(job_id)
        beats = [h.states[job_id] for h in proxy.log.heartbeats if job_id in h.states]
        after = [
            h.states[job_id]
            for h in proxy.log.heartbeats
            if h.sent_after_mark and job_id in h.states
        ]
    finally:
        worker.stop()
        proxy.close()
    assert job.status == CANCELLED
    assert result(job)["cancelled"] is True, "ctx's cancel signal was set"
    # A heartbeat sent between the cancel's commit and the mark (a busy
    # machine) carries it too, unmarked; it may be the only one, since its
    # answer stops the handler and the job ends.
    assert LEASE_STATE_CANCEL_REQUESTED in beats, f"no heartbeat carried the cancel: {beats}"
    assert set(after) <= {LEASE_STATE_CANCEL_REQUESTED}, (
        f"every heartbeat after the cancel carries it: {beats}"
    )
    assert lines(worker.log(), f"cancel requested for job {job_id}")


def test_a_lost_lease_stops_the_handler_and_reports_nothing(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    proxy = RecordingProxy(coordinator.target)
    worker = start_worker(sdk, proxy.target, tmp_path, "lost")
    try:
        job_id = api.enqueue("cancel", lease_s=3)
        wait_until(lambda: worker.records(), 30, "the handler to start")
        api.unlock(job_id)  # the lease is taken away: the next heartbeat answers LOST
        wait_until(
            lambda: lines(worker.log(), "outcome not reported"), 30, "the handler to see the loss"
        )
        sent = [j for j, _ in proxy.log.outcomes_sent if j == job_id]
        job = api.job(job_id)
    finally:
        worker.stop()
        proxy.close()
    assert outcomes(job)[0] == "UNLOCKED"
    assert sent == [], "nothing is reported under a lost lease"
    log = worker.log()
    assert lines(log, f"lease of job {job_id} lost")
    assert lines(log, f"job {job_id} finished after its lease was lost; outcome not reported")


def test_an_attempt_past_its_execution_timeout_fails_and_is_retried(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    """The worker's clock starts when the job arrives: an attempt that runs past
    the job's execution timeout ends as a retryable TimeoutError failure (before
    the coordinator's own deadline, 2 s later), and the next attempt runs."""
    worker = start_worker(sdk, coordinator.target, tmp_path, "timeout")
    try:
        job_id = api.enqueue(
            "sleep", {"ms": 50, "first_attempt_ms": 10_000}, max_attempts=2, execution_timeout_s=1.0
        )
        job = api.wait(job_id)
    finally:
        worker.stop()
    assert (job.status, outcomes(job)) == (COMPLETED, ["FAILED", "COMPLETED"]), outcomes(job)
    assert job.attempts[0].error_kind == "TimeoutError", job.attempts[0]
    assert "execution timeout" in job.attempts[0].error


# -- protocol.md "Stream end and lease expiry" ------------------------------------------------


def test_a_killed_workers_jobs_come_back(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    first = start_worker(sdk, coordinator.target, tmp_path, "killed")
    ids = [
        api.enqueue("sleep", {"ms": 50, "first_attempt_ms": 60_000}, lease_s=2) for _ in range(3)
    ]
    wait_until(lambda: len(first.records()) == 3, 30, "three handlers to start")
    first.kill()
    second = start_worker(sdk, coordinator.target, tmp_path, "heir")
    try:
        jobs = [api.wait(job_id) for job_id in ids]
    finally:
        second.stop()
    for job in jobs:
        assert job.status == COMPLETED
        assert outcomes(job) == ["LEASE_EXPIRED", "COMPLETED"]
        assert [a.worker_id for a in job.attempts] == [first.worker_id, second.worker_id]


# -- protocol.md "Drain and shutdown" ---------------------------------------------------------


def test_sigterm_drains_within_the_grace(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    grace = 3.0
    worker = start_worker(sdk, coordinator.target, tmp_path, "drain", shutdown_grace=grace)
    short = api.enqueue("sleep", {"ms": 1000})
    long = api.enqueue("sleep", {"ms": 50, "first_attempt_ms": 60_000})
    wait_until(lambda: len(worker.records()) == 2, 30, "both handlers to start")
    worker.proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    worker.proc.wait(grace + 15)
    took = time.monotonic() - started
    worker.stop()  # closes its log
    assert worker.proc.returncode == 0, worker.log()[-2000:]
    assert took < grace + 10, f"the worker took {took:.1f}s to stop"
    done = api.job(short)
    assert (done.status, outcomes(done)) == (COMPLETED, ["COMPLETED"])
    handed_back = api.job(long)
    assert handed_back.status == PENDING, (handed_back, worker.log()[-3000:])
    assert outcomes(handed_back) == ["RELEASED"], "handed back at the end of the grace"
    assert handed_back.released_attempts == 1
    log = worker.log()
    assert lines(log, "SIGTERM received: draining")
    assert lines(log, "handing back 1 job(s) still running after the shutdown grace")
    assert lines(log, f"worker {worker.worker_id} stopped")


def test_a_handler_that_cannot_stop_keeps_its_job_until_the_worker_exits(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    """SIGTERM with a handler that nothing stops: its job is handed back only as
    the worker's process ends, so the waiting worker starts it only after the
    first handler's last sign of life."""
    first = start_worker(sdk, coordinator.target, tmp_path, "stubborn", shutdown_grace=2.0)
    second: WorkerUnderTest | None = None
    try:
        job_id = api.enqueue("blocking", {"ms": 200, "first_attempt_ms": 14_000})
        wait_until(lambda: first.records(), 30, "the blocking handler to start")
        second = start_worker(sdk, coordinator.target, tmp_path, "waiting")
        first.proc.send_signal(signal.SIGTERM)
        first.proc.wait(60)
        job = api.wait(job_id)
    finally:
        first.stop()  # closes its log
        if second is not None:
            second.stop()
    assert first.proc.returncode == 0, first.log()[-3000:]
    assert job.status == COMPLETED
    assert outcomes(job) == ["RELEASED", "COMPLETED"], outcomes(job)
    assert [a.worker_id for a in job.attempts] == [first.worker_id, second.worker_id]
    ran_first = first.records()
    assert [e for e, *_ in ran_first if e != "tick"] == ["start"], (
        "the first handler ran on after its job was handed back"
    )
    last_sign_of_life = max(at for *_, at in ran_first)
    [second_start] = [at for event, _, _, at in second.records() if event == "start"]
    assert second_start >= last_sign_of_life, (
        f"the second worker started the job {last_sign_of_life - second_start} ms "
        "before the first handler stopped"
    )
    log = first.log()
    assert lines(log, "handing back 1 job(s) still running after the shutdown grace")
    assert lines(log, "1 handler(s) did not stop")


def test_a_drained_worker_grants_nothing_until_undrained(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    proxy = RecordingProxy(coordinator.target)
    worker = start_worker(sdk, proxy.target, tmp_path, "drained", concurrency=2)
    try:
        running = api.enqueue("sleep", {"ms": 1000})
        wait_until(lambda: worker.records(), 30, "the handler to start")
        api.drain_worker(worker.worker_id)
        wait_until(
            lambda: lines(worker.log(), "coordinator requested drain"), 30, "the drain to arrive"
        )
        waiting = api.enqueue("echo", {"after": "drain"})
        assert api.wait(running).status == COMPLETED, "a drained worker finishes what it runs"
        assert api.job(waiting).status == PENDING
        api.drain_worker(worker.worker_id, undrain=True)
        assert api.wait(waiting).status == COMPLETED, "undrained, the worker takes work again"
    finally:
        worker.stop()
        proxy.close()
    first, second = proxy.log.streams[:2]
    after_drain = first.timeline[first.timeline.index(("drain", 0)) :]
    granted = [n for kind, n in after_drain if kind in ("grant", "outcomes+grant")]
    assert sum(granted) == 0, f"credit granted on a drained stream: {first.timeline}"
    assert second.granted > 0


# -- protocol.md "Reconnect" ------------------------------------------------------------------


def test_the_worker_reconnects_after_the_coordinator_restarts(
    sdk: Sdk, own_coordinator: Coordinator, tmp_path: Path
) -> None:
    coordinator = own_coordinator
    api = Api(coordinator.target)
    worker = start_worker(sdk, coordinator.target, tmp_path, "reconnect", concurrency=4)
    try:
        # A short lease: jobs the killed coordinator leased but never sent come back soon.
        ids = [api.enqueue("sleep", {"ms": 300}, lease_s=3) for _ in range(16)]
        wait_until(lambda: len(worker.records()) >= 4, 30, "handlers to start")
        coordinator.kill()
        time.sleep(0.5)
        coordinator.start()
        jobs = [api.wait(job_id, timeout=90) for job_id in ids]
    finally:
        worker.stop()
        api.close()
    runs = Counter((j, a) for e, j, a, _ in worker.records() if e == "start")
    for job in jobs:
        assert job.status == COMPLETED, job
        assert outcomes(job).count("COMPLETED") == 1
        assert all(o in ("COMPLETED", "LEASE_EXPIRED", "RELEASED") for o in outcomes(job))
        # At least once, and never twice under one attempt.
        attempts = [a for (j, a) in runs if j == job.id]
        assert attempts and max(attempts) <= job.attempt
        assert all(runs[(job.id, a)] == 1 for a in attempts)
    log = worker.log()
    assert lines(log, f"lost the connection to the coordinator at {coordinator.target}")
    assert lines(log, "reconnected to coordinator ")


# -- protocol.md "Outcomes" (idempotent resend) -----------------------------------------------


def test_a_silent_path_is_found_by_keepalive_and_the_worker_reconnects(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    """The path goes silent without a reset: the worker's keepalive pings go
    unanswered, it drops the dead connection, reconnects over a fresh one and
    runs the next job through it."""
    proxy = SilenceableProxy(coordinator.target)
    worker = start_worker(sdk, proxy.target, tmp_path, "silent-path")
    try:
        before = api.wait(api.enqueue("echo", {"n": 1}))
        assert proxy.silence() >= 1
        wait_until(
            lambda: lines(worker.log(), "reconnected to coordinator"),
            60,  # keepalive: a ping every 10 s, 5 s to answer
            "the worker to find the silent path and reconnect",
        )
        after = api.wait(api.enqueue("echo", {"n": 2}))
        log = worker.log()
    finally:
        worker.stop()
        proxy.close()
    assert (before.status, after.status) == (COMPLETED, COMPLETED)
    assert [a.worker_id for a in after.attempts] == [worker.worker_id]
    assert outcomes(after) == ["COMPLETED"]
    assert proxy.connections >= 2, "the job ran over a fresh connection"
    assert lines(log, "lost the connection to the coordinator")


def test_an_outcome_resent_after_a_dropped_answer_is_recorded_once(
    sdk: Sdk, coordinator: Coordinator, api: Api, tmp_path: Path
) -> None:
    proxy = RecordingProxy(coordinator.target, drop_first_answer=True)
    worker = start_worker(sdk, proxy.target, tmp_path, "resend")
    try:
        job_id = api.enqueue("echo", {"once": True})
        job = api.wait(job_id)
        wait_until(lambda: len(proxy.log.outcomes_sent) >= 2, 30, "the outcome to be sent again")
        wait_until(lambda: proxy.log.answers_forwarded >= 1, 30, "the resend to be answered")
    finally:
        worker.stop()
        proxy.close()
    assert proxy.log.answers_dropped == 1
    tokens = [token for sent, token in proxy.log.outcomes_sent if sent == job_id]
    assert len(tokens) >= 2 and len(set(tokens)) == 1, "the same outcome, sent again"
    assert (job.status, outcomes(job)) == (COMPLETED, ["COMPLETED"])
    kinds = [e.kind for e in api.events(job_id)]
    assert kinds.count(scheduler_service_pb2.JOB_EVENT_KIND_COMPLETED) == 1, kinds
    assert len(worker.records()) == 1
    log = worker.log()
    assert not lines(log, "not recorded") and not lines(log, "rejected outcome"), log[-2000:]


# -- protocol.md "Authentication and tenant scope" --------------------------------------------


def test_a_tenant_scoped_worker_receives_nothing_else(
    sdk: Sdk, store_url: str, tmp_path: Path
) -> None:
    from coordinator.api.auth import hash_token

    tokens = tmp_path / "tokens.jsonl"
    entries = [
        {
            "name": "ops",
            "sha256": hash_token("ops-token"),
            "roles": ["admin", "scheduler"],
            "tenants": ["*"],
        },
        {
            "name": "a-workers",
            "sha256": hash_token("a-token"),
            "roles": ["worker", "scheduler"],
            "tenants": ["tenant-a"],
        },
    ]
    tokens.write_text("".join(json.dumps(e) + "\n" for e in entries))
    coordinator = Coordinator(store_url, tmp_path, env={"WFJOBS_TOKENS_FILE": str(tokens)})
    api = Api(coordinator.target, token="ops-token")
    worker: WorkerUnderTest | None = None
    try:
        other = api.enqueue("echo", {"tenant": "b"}, tenant="tenant-b")
        mine = [api.enqueue("echo", {"i": i}, tenant="tenant-a") for i in range(3)]
        worker = start_worker(sdk, coordinator.target, tmp_path, "scoped", token="a-token")
        assert all(api.wait(job_id).status == COMPLETED for job_id in mine)
        # A later job of the other tenant, enqueued while the worker has credit to spare.
        later = api.enqueue("echo", {"tenant": "b", "later": True}, tenant="tenant-b")
        last = api.enqueue("echo", {"last": True}, tenant="tenant-a")
        assert api.wait(last).status == COMPLETED
        for job_id in (other, later):
            job = api.job(job_id)
            assert (job.status, job.attempt) == (PENDING, 0), job
        ran = {j for _, j, _, _ in worker.records()}
        assert ran == {*mine, last}
    finally:
        if worker is not None:
            worker.stop()
        api.close()
        coordinator.stop()
