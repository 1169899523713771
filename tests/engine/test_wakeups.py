"""The dispatcher sleeps until something can change what is eligible, and
wakes at once for each such event.

Every test runs the real dispatcher loop (engine started, system clock) with
the 15 s safety-net poll left at its default, and waits on deliveries with a
bound well below it: a missed wake-up shows as a timeout, not as a slow pass.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

import pytest

from coordinator.chores import Chores
from coordinator.chores.lease_reaper import LeaseReaper, LeaseReaperConfig, ReaperResult
from coordinator.clock import SystemClock
from coordinator.engine import Engine, EngineConfig, LeaseBatch, WorkerSession
from coordinator.model import (
    AttemptOutcome,
    Completion,
    ConcurrencyLimit,
    Failure,
    JobRow,
    JobStatus,
    LimitKind,
    Release,
    Uniqueness,
    UniqueOutcome,
    UniqueRule,
)
from coordinator.store import open_store
from coordinator.telemetry.hooks import NO_TELEMETRY
from wfj_testing import make_job as _make_job

# Far below the 15 s idle poll, far above any honest wake-up.
PROMPT_S = 10.0
US = 1_000_000


def make_job(**fields: object):
    """A job due now (on the system clock) unless told otherwise."""
    return _make_job(**{"due_at": 0, **fields})


async def _next_leased(session: WorkerSession) -> list[tuple[JobRow, str]]:
    while True:
        item = await asyncio.wait_for(session.outbox.get(), PROMPT_S)
        if isinstance(item, LeaseBatch):
            return [(row, item.lease_token) for row in item.jobs]


def _engine(url: str, **config: object) -> Engine:
    engine = Engine(open_store(url), EngineConfig(**config))  # type: ignore[arg-type]
    assert engine.config.idle_poll_s >= 15.0
    return engine


def _run(url: str, scenario: Callable[[Engine], Awaitable[None]], **config: object) -> None:
    async def main() -> None:
        engine = _engine(url, **config)
        chores = Chores(engine)
        await engine.start()
        await chores.start()
        try:
            await scenario(engine)
        finally:
            await chores.stop()
            await engine.stop()

    asyncio.run(main())


def _worker(engine: Engine, name: str, credits: int) -> WorkerSession:
    session = WorkerSession(name, frozenset({"noop"}), max_batch_size=100)
    engine.open_session(session)
    engine.grant(session, credits)
    return session


async def _limited_pair(engine: Engine, **job: object) -> tuple[WorkerSession, JobRow, str]:
    """A job-type limit of 1, two jobs, a worker with spare credit: one runs."""
    await engine.set_limit(ConcurrencyLimit(LimitKind.JOB_TYPE, "noop", 1))
    await engine.enqueue([make_job(**job), make_job(**job)])
    session = _worker(engine, "w1", 5)
    [(row, token)] = await _next_leased(session)
    assert session.credits == 4
    return session, row, token


@pytest.mark.parametrize(
    "event", ["complete", "fail", "cancel", "release", "unlock", "unlock-cancelled"]
)
def test_a_freed_limit_slot_is_refilled_at_once(store_url: str, event: str) -> None:
    async def scenario(engine: Engine) -> None:
        session, row, token = await _limited_pair(engine)
        if event == "complete":
            await engine.report([Completion(row.id, token, b"{}")])
        elif event == "fail":
            await engine.report([Failure(row.id, token, "boom", "IOError", non_retryable=True)])
        elif event == "cancel":
            await engine.ops.cancel_job(row.id, "stop")
            await engine.report([Completion(row.id, token, b"{}")])
        elif event == "release":
            # Handed back: the job itself (or its sibling) takes the slot again.
            await engine.report([Release(row.id, token, "busy")])
        elif event == "unlock":
            await engine.ops.unlock_job(row.id)
        else:
            # A cancel was requested: the unlock ends the job, and frees its slot.
            await engine.ops.cancel_job(row.id, "stop")
            assert (await engine.ops.unlock_job(row.id)).status == JobStatus.CANCELLED
        [(nxt, _)] = await _next_leased(session)
        if event != "release":
            assert nxt.id != row.id

    _run(store_url, scenario)


def test_an_unlocked_job_is_leased_again_at_once(store_url: str) -> None:
    async def scenario(engine: Engine) -> None:
        await engine.enqueue([make_job()])
        session = _worker(engine, "w1", 2)
        [(row, _)] = await _next_leased(session)
        assert (await engine.ops.unlock_job(row.id)).status == JobStatus.PENDING
        [(again, _)] = await _next_leased(session)
        assert (again.id, again.attempt) == (row.id, row.attempt + 1)

    _run(store_url, scenario)


@pytest.mark.parametrize("event", ["complete", "cancel"])
def test_the_next_job_of_an_ordering_key_starts_when_its_head_ends(
    store_url: str, event: str
) -> None:
    async def scenario(engine: Engine) -> None:
        await engine.enqueue([make_job(ordering_key="k") for _ in range(2)])
        session = _worker(engine, "w", 10)
        [(head, token)] = await _next_leased(session)
        # The worker still holds credit: no grant follows the outcome.
        if event == "complete":
            await engine.report([Completion(head.id, token, b"{}")])
        else:
            await engine.ops.cancel_job(head.id, "stop")
            await engine.report([Completion(head.id, token, b"{}")])
        [(nxt, _)] = await _next_leased(session)
        assert nxt.id != head.id and nxt.ordering_key == "k"

    _run(store_url, scenario)


def test_a_slot_freed_by_lease_expiry_is_refilled_at_once(store_url: str) -> None:
    async def scenario(engine: Engine) -> None:
        session, row, _ = await _limited_pair(engine, heartbeat_timeout_ms=300)
        assert row.lease_expires_at is not None
        # Nobody heartbeats: the reaper reclaims the lease, the slot is refilled.
        [(nxt, _)] = await _next_leased(session)
        # On the engine's own clock: the first attempt ended by expiry, not
        # before its lease ran out, and the slot went to the next lease only then.
        _, attempts = await engine.get_job(row.id, with_attempts=True)
        first = next(a for a in attempts if a.number == row.attempt)
        assert first.outcome == AttemptOutcome.LEASE_EXPIRED
        assert first.ended_at is not None and first.ended_at >= row.lease_expires_at
        assert nxt.lease_expires_at is not None
        granted = nxt.lease_expires_at - 300_000
        assert granted >= row.lease_expires_at

    _run(store_url, scenario)


def test_every_due_time_of_a_batch_gets_its_wake_up(store_url: str) -> None:
    async def scenario(engine: Engine) -> None:
        session = _worker(engine, "w1", 10)
        now = engine.clock.now_us()
        offsets = (0.4, 0.8, 1.2)
        jobs = [make_job(due_at=now + int(s * US)) for s in offsets]
        await engine.enqueue(jobs)
        got: list[str] = []
        while len(got) < len(jobs):
            got.extend(r.id for r, _ in await _next_leased(session))
        assert sorted(got) == sorted(j.id for j in jobs)

    _run(store_url, scenario)


def test_every_retry_of_one_report_gets_its_wake_up(store_url: str) -> None:
    async def scenario(engine: Engine) -> None:
        await engine.enqueue([make_job() for _ in range(3)])
        session = _worker(engine, "w1", 3)
        leased: list[tuple[JobRow, str]] = []
        while len(leased) < 3:
            leased.extend(await _next_leased(session))
        now = engine.clock.now_us()
        failures = [
            Failure(row.id, token, "later", "Busy", retry_at=now + int((0.4 + 0.4 * i) * US))
            for i, (row, token) in enumerate(leased)
        ]
        await engine.report(failures)
        engine.grant(session, 3)
        again: list[str] = []
        while len(again) < 3:
            again.extend(r.id for r, _ in await _next_leased(session))
        assert sorted(again) == sorted(r.id for r, _ in leased)

    _run(store_url, scenario)


def test_a_freed_slot_wakes_the_other_replica(pg_database: str, store_url: str) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("replicas share a PostgreSQL database")

    async def main() -> None:
        a, b = _engine(store_url), _engine(store_url)
        await a.start()
        await b.start()
        try:
            await a.set_limit(ConcurrencyLimit(LimitKind.JOB_TYPE, "noop", 1))
            await asyncio.wait_for(_until(lambda: bool(b.limits)), PROMPT_S)
            await a.enqueue([make_job(), make_job()])
            on_a = _worker(a, "wa", 1)
            [(row, token)] = await _next_leased(on_a)
            on_b = _worker(b, "wb", 1)
            # b's worker waits with credit while the slot is taken.
            await b.dispatcher.run_pass()
            assert on_b.outbox.empty() and on_b.credits == 1
            await a.report([Completion(row.id, token, b"{}")])
            [(nxt, _)] = await _next_leased(on_b)
            assert nxt.id != row.id
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(main())


def test_weights_set_on_one_replica_apply_on_the_other(pg_database: str, store_url: str) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("replicas share a PostgreSQL database")

    async def main() -> None:
        a, b = _engine(store_url), _engine(store_url)
        await a.start()
        await b.start()
        try:
            await a.set_tenant_weight("acme", 3)
            await asyncio.wait_for(_until(lambda: b.fair.weight("acme") == 3), PROMPT_S)
            await a.set_category_weight("acme", 3, 4)
            await asyncio.wait_for(_until(lambda: b.fair.category_weight("acme", 3) == 4), PROMPT_S)
            await a.remove_category_weight("acme", 3)
            await asyncio.wait_for(_until(lambda: b.fair.category_weight("acme", 3) == 1), PROMPT_S)
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(main())


async def _until(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await asyncio.sleep(0.02)


def test_reaper_sees_a_lease_granted_while_it_runs() -> None:
    async def main() -> None:
        clock = SystemClock()
        runs: list[int] = []
        reclaimed = asyncio.Event()
        expires = clock.now_us() + int(0.3 * US)

        class Reaper(LeaseReaper):
            async def reap(self, now: int) -> ReaperResult:
                runs.append(now)
                if len(runs) == 1:
                    # A lease is granted while this run reads the store: the run's
                    # answer (read before the grant) does not know it.
                    self.note_expiry(expires)
                    return ReaperResult(0, None)
                if now > expires:
                    reclaimed.set()
                return ReaperResult(0, None)

        # ``reap`` is replaced: the reaper reads neither the store nor attempts.
        unused = SimpleNamespace()
        reaper = Reaper(
            LeaseReaperConfig(max_interval_s=15.0),
            clock=clock,
            store=unused,  # type: ignore[arg-type]
            run_store=unused,  # type: ignore[arg-type]
            attempts=unused,  # type: ignore[arg-type]
            set_aside=unused,  # type: ignore[arg-type]
            rng=random.Random(),
            telemetry=lambda: NO_TELEMETRY,
        )
        reaper.start()
        try:
            await asyncio.wait_for(reclaimed.wait(), PROMPT_S)
        finally:
            await reaper.stop()

    asyncio.run(main())


def _debounced(key: str) -> tuple[object, Uniqueness]:
    return make_job(), Uniqueness(key, UniqueRule.DEBOUNCE, delay_us=US)


def test_a_debounced_job_is_leased_at_its_moved_due_time(store_url: str) -> None:
    async def scenario(engine: Engine) -> None:
        session = _worker(engine, "w1", 1)
        job, rule = _debounced("account-1")
        [(job_id, created, _)] = await engine.enqueue_unique([job], [rule])
        await asyncio.sleep(0.5)
        again, rule = _debounced("account-1")
        [(same, debounced, _)] = await engine.enqueue_unique([again], [rule])
        assert (same, created, debounced) == (
            job_id,
            UniqueOutcome.CREATED,
            UniqueOutcome.DEBOUNCED,
        )
        [(row, _)] = await _next_leased(session)  # due 1.5 s after the first enqueue
        assert row.id == job_id and row.due_at == again.due_at

    _run(store_url, scenario)


def test_a_debounce_on_one_replica_wakes_the_other(pg_database: str, store_url: str) -> None:
    if not store_url.startswith("postgres"):
        pytest.skip("replicas share a PostgreSQL database")

    async def main() -> None:
        a, b = _engine(store_url), _engine(store_url)
        await a.start()
        await b.start()
        try:
            on_b = _worker(b, "wb", 1)
            job, rule = _debounced("account-2")
            [(job_id, _, _)] = await a.enqueue_unique([job], [rule])
            await asyncio.sleep(0.5)
            again, rule = _debounced("account-2")
            [(same, outcome, _)] = await a.enqueue_unique([again], [rule])
            assert (same, outcome) == (job_id, UniqueOutcome.DEBOUNCED)
            [(row, _)] = await _next_leased(on_b)
            assert row.id == job_id
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(main())
