"""Ingress adapters against real brokers and a real coordinator (SPEC §10).

Every scenario runs on RabbitMQ and on NATS JetStream (the ``broker`` fixture).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from ingress.harness import Ingress, envelope

from wfj_testing import wait_until
from worker_sdk import AdminClient, JobCategory, JobStatus, UniqueKeyRule

pytestmark = pytest.mark.e2e

CRASH_BEFORE_ACK = Path(__file__).resolve().parent / "crash_before_ack.py"


def test_a_message_becomes_one_job_with_its_fields(ingress: Ingress) -> None:
    ingress.coordinator()
    adapter = ingress.adapter()
    ingress.broker.publish(
        envelope(
            job_type="invoice.charge",
            tenant_id="acme",
            payload={"invoice": "inv-1", "amount_cents": 1200},
            workflow={
                "definition_id": "billing",
                "definition_version": 3,
                "instance_id": "wf-9",
                "correlation_id": "order-77",
            },
            priority=5,
            max_attempts=4,
            ordering_key="wf-9/ledger",
            parent_job_id="01a235a5-9d98-7012-9fc1-4f6184ecedff",
        ),
        message_id="msg-1",
    )
    (job,) = wait_until(lambda: ingress.jobs(job_type="invoice.charge"), 30, "the job")
    assert job.tenant_id == "acme"
    assert job.payload_value() == {"invoice": "inv-1", "amount_cents": 1200}
    assert job.workflow.definition_id == "billing"
    assert job.workflow.definition_version == 3
    assert job.workflow.instance_id == "wf-9"
    assert job.workflow.correlation_id == "order-77"
    assert job.priority == 5
    assert job.max_attempts == 4
    assert job.ordering_key == "wf-9/ledger"
    assert job.parent_job_id == "01a235a5-9d98-7012-9fc1-4f6184ecedff"
    assert job.category is JobCategory.INTEGRATION
    assert job.status is JobStatus.PENDING
    assert job.idempotency_key.endswith(":id:msg-1")
    adapter.stop()
    assert ingress.broker.unsettled() == 0
    assert ingress.broker.dead_letters() == []


def test_fixed_job_type_takes_the_body_as_payload(ingress: Ingress) -> None:
    ingress.coordinator()
    adapter = ingress.adapter("--job-type", "webhook.received", "--tenant", "hooks")
    ingress.broker.publish(b'{"event": "push"}', message_id="hook-1")
    ingress.broker.publish(b"\x00raw bytes", message_id="hook-2")
    jobs = wait_until(
        lambda: (j := ingress.jobs(job_type="webhook.received")) and len(j) == 2 and j,
        30,
        "two jobs",
    )
    by_key = {j.idempotency_key.rsplit(":", 1)[1]: j for j in jobs}
    assert by_key["hook-1"].payload_value() == {"event": "push"}
    assert by_key["hook-1"].payload_content_type == "application/json"
    assert by_key["hook-2"].payload == b"\x00raw bytes"
    assert by_key["hook-2"].payload_content_type == "application/octet-stream"
    assert {j.tenant_id for j in jobs} == {"hooks"}
    adapter.stop()
    assert ingress.broker.unsettled() == 0


def test_the_same_message_twice_is_one_job(ingress: Ingress) -> None:
    ingress.coordinator()
    adapter = ingress.adapter()
    body = envelope(job_type="order.placed", payload={"order": 1})
    ingress.broker.publish(body, message_id="order-1")
    ingress.broker.publish(body, message_id="order-1")
    # Different broker ids, one key chosen by the publisher: still one job.
    keyed = envelope(job_type="order.placed", payload={"order": 2}, idempotency_key="order-2")
    ingress.broker.publish(keyed, message_id="a")
    ingress.broker.publish(keyed, message_id="b")
    # A marker published last: once its job exists, every earlier message was handled.
    ingress.broker.publish(envelope(job_type="marker"), message_id="marker")
    wait_until(lambda: ingress.jobs(job_type="marker"), 30, "the marker job")
    adapter.stop()
    jobs = ingress.jobs(job_type="order.placed")
    assert sorted(j.payload_value()["order"] for j in jobs) == [1, 2]
    assert ingress.broker.unsettled() == 0


def test_an_adapter_killed_between_enqueue_and_ack_makes_no_duplicate(ingress: Ingress) -> None:
    ingress.coordinator()
    crashing = ingress.adapter(script=CRASH_BEFORE_ACK)
    ingress.broker.publish(envelope(job_type="report.build", payload={"n": 1}), message_id="r-1")
    wait_until(lambda: not crashing.alive(), 30, "the adapter to die before acking")
    (job,) = ingress.jobs(job_type="report.build")
    assert ingress.broker.unsettled() == 1, "the message was acked although the adapter died"

    adapter = ingress.adapter("--log-level", "DEBUG")
    wait_until(
        lambda: adapter.count(f"→ job {job.id} (already enqueued)"),
        30,
        "the redelivered message to find its job",
    )
    adapter.stop()
    assert [j.id for j in ingress.jobs(job_type="report.build")] == [job.id]
    assert ingress.broker.unsettled() == 0


def test_one_job_per_uniqueness_key_while_it_is_pending(ingress: Ingress) -> None:
    ingress.coordinator()
    adapter = ingress.adapter("--log-level", "DEBUG")
    while_pending = {"key": "acct-42", "unique_while": ["PENDING", "RUNNING"]}

    def sync(n: int, *, key: str = "acct-42", idempotency_key: str | None = None) -> bytes:
        fields = {"idempotency_key": idempotency_key} if idempotency_key else {}
        return envelope(
            job_type="account.sync",
            payload={"n": n},
            uniqueness={**while_pending, "key": key},
            **fields,
        )

    ingress.broker.publish(sync(1, idempotency_key="evt-1"), message_id="sync-1")
    (first,) = wait_until(lambda: ingress.jobs(job_type="account.sync"), 30, "the first job")
    # While that job is pending: another message of the key, a redelivery of the
    # first (its idempotency key, another broker id) and a message of another key.
    ingress.broker.publish(sync(2), message_id="sync-2")
    ingress.broker.publish(sync(1, idempotency_key="evt-1"), message_id="sync-1-again")
    ingress.broker.publish(sync(3, key="acct-7"), message_id="sync-3")
    ingress.broker.publish(envelope(job_type="marker"), message_id="marker")
    wait_until(lambda: ingress.jobs(job_type="marker"), 30, "the marker job")

    jobs = {j.payload_value()["n"]: j for j in ingress.jobs(job_type="account.sync")}
    assert sorted(jobs) == [1, 3], "the second message of acct-42 made a job"
    assert jobs[1].id == first.id and jobs[1].status is JobStatus.PENDING
    assert jobs[1].idempotency_key == "evt-1"
    # The adapter acked both as answered by that job, and told the two apart.
    assert adapter.count(f"→ job {first.id} (its uniqueness key's job)") == 1
    assert adapter.count(f"→ job {first.id} (already enqueued)") == 1

    # Once the key's job is no longer pending or running, the key admits a new one.
    with AdminClient(ingress.target) as admin:
        admin.cancel_job(first.id, reason="test: free the key")
    ingress.broker.publish(sync(4), message_id="sync-4")
    wait_until(
        lambda: any(j.payload_value()["n"] == 4 for j in ingress.jobs(job_type="account.sync")),
        30,
        "a new job of the freed key",
    )
    adapter.stop()
    assert adapter.count(
        "IngressStats(enqueued=4, deduplicated=1, unique_hits=1, dead_lettered=0, retried=0)"
    ), adapter.log()[-2000:]
    assert ingress.broker.unsettled() == 0
    assert ingress.broker.dead_letters() == []


def test_a_debounce_key_puts_its_job_off_with_the_latest_payload(ingress: Ingress) -> None:
    ingress.coordinator()
    adapter = ingress.adapter("--log-level", "DEBUG")
    # An hour's debounce: nothing here depends on the clock reaching the due time.
    rule = {"key": "entity-7", "debounce_seconds": 3600, "max_wait_seconds": 7200}
    ingress.broker.publish(
        envelope(job_type="entity.reindex", payload={"change": 1}, uniqueness=rule),
        message_id="change-1",
    )
    (job,) = wait_until(lambda: ingress.jobs(job_type="entity.reindex"), 30, "the job")
    assert job.status is JobStatus.PENDING
    assert job.create_time is not None and job.due_time == job.create_time + timedelta(hours=1)

    ingress.broker.publish(
        envelope(job_type="entity.reindex", payload={"change": 2}, uniqueness=rule),
        message_id="change-2",
    )
    (debounced,) = wait_until(
        lambda: (
            (j := ingress.jobs(job_type="entity.reindex"))
            and j[0].payload_value()["change"] == 2
            and j
        ),
        30,
        "the job to take the second message's payload",
    )
    with AdminClient(ingress.target) as admin:
        key = admin.explain_job(job.id).unique_key
    assert debounced.id == job.id
    assert key is not None and key.key == "entity-7" and key.rule == UniqueKeyRule.DEBOUNCE
    assert key.debounced == 1 and key.last_debounced is not None
    # Put off to the second message's enqueue + the delay, bounded by the first + max wait.
    assert debounced.due_time == key.last_debounced + timedelta(hours=1)
    assert key.max_due == job.create_time + timedelta(hours=2)
    assert debounced.idempotency_key == job.idempotency_key  # the first message's job
    adapter.stop()
    assert adapter.count(f"→ job {job.id} (debounced: its uniqueness key's pending job")
    assert adapter.count("IngressStats(enqueued=1, deduplicated=0, unique_hits=1,")
    assert ingress.broker.unsettled() == 0
    assert ingress.broker.dead_letters() == []


def test_malformed_messages_are_dead_lettered_with_a_reason(ingress: Ingress) -> None:
    ingress.coordinator()
    adapter = ingress.adapter()
    bad = {
        b"not json {": "not JSON",
        envelope(payload={"x": 1}): "no 'job_type'",
        envelope(job_type="ok", priorty=3): "unknown envelope field(s) 'priorty'",
        b"[1, 2]": "not an object",
        envelope(job_type="ok", uniqueness={"key": "k"}): "'uniqueness' takes exactly one rule",
        envelope(
            job_type="ok", delay_seconds=5, uniqueness={"key": "k", "debounce_seconds": 5}
        ): "malformed message: 'uniqueness.debounce_seconds' sets the job's due time",
        # JSON's Infinity, and a delay the job's due time cannot hold: refused
        # before the coordinator, never left unsettled.
        b'{"job_type": "ok", "delay_seconds": Infinity}': "'delay_seconds' must be a finite",
        envelope(job_type="ok", delay_seconds=1e12): "reaches past the year 9999",
        # Valid JSON, rejected by the coordinator (INVALID_ARGUMENT: job type too long).
        envelope(job_type="x" * 600): "rejected by the coordinator: INVALID_ARGUMENT",
    }
    for n, body in enumerate(bad):
        ingress.broker.publish(body, message_id=f"bad-{n}")
    ingress.broker.publish(envelope(job_type="marker"), message_id="marker")
    wait_until(lambda: ingress.jobs(job_type="marker"), 30, "the marker job")
    dead = wait_until(
        lambda: (d := ingress.broker.dead_letters()) and len(d) >= len(bad) and d,
        30,
        "the dead letters",
    )
    adapter.stop()
    assert sorted(d.body for d in dead) == sorted(bad)
    for letter in dead:
        assert bad[letter.body] in letter.reason, letter
    assert [j.job_type for j in ingress.jobs()] == ["marker"]
    assert ingress.broker.unsettled() == 0


def test_coordinator_down_leaves_the_message_unacked_until_it_is_back(ingress: Ingress) -> None:
    adapter = ingress.adapter()  # no coordinator yet
    ingress.broker.publish(envelope(job_type="late.job", payload={"n": 1}), message_id="late-1")
    retry_line = "not enqueued ("
    wait_until(lambda: adapter.count(retry_line) >= 3, 30, "three failed enqueue attempts")
    assert ingress.broker.dead_letters() == []

    ingress.coordinator()
    (job,) = wait_until(
        lambda: ingress.jobs(job_type="late.job"), 30, "the job once the coordinator is up"
    )
    assert job.payload_value() == {"n": 1}
    adapter.stop()
    assert ingress.broker.unsettled() == 0
    assert len(ingress.jobs(job_type="late.job")) == 1
