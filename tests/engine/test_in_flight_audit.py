"""Outcomes reported through another replica are forgotten by the replica that
delivered the job (both stores; two engines over one store)."""

from __future__ import annotations

import asyncio

from coordinator.engine import LeaseBatch, WorkerSession
from coordinator.model import Completion
from wfj_engine import Harness
from wfj_testing import make_job


def _take(session: WorkerSession) -> list:
    out = []
    while not session.outbox.empty():
        item = session.outbox.get_nowait()
        if isinstance(item, LeaseBatch):
            out.extend((row, item.lease_token) for row in item.jobs)
    return out


def test_outcomes_through_another_replica_are_forgotten_by_the_leasing_one(
    store_url: str,
) -> None:
    async def main() -> None:
        leasing, other = Harness(store_url), Harness(store_url)
        try:
            session = WorkerSession("w", frozenset({"noop"}), slots=5)
            leasing.engine.open_session(session)
            woken: list[int] = []
            audit = leasing.chores.in_flight_audit
            audit.config.floor = 8
            audit.wake = lambda: woken.append(len(session.in_flight))  # type: ignore[method-assign]
            for _ in range(6):
                await leasing.engine.enqueue([make_job() for _ in range(5)])
                leasing.engine.grant(session, 5)
                await leasing.engine.dispatcher.run_pass()
                delivered = _take(session)
                assert len(delivered) == 5
                # The worker reports through the other replica.
                results = await other.engine.report(
                    [Completion(row.id, token, b"", "") for row, token in delivered]
                )
                assert all(r.accepted for r in results)
            # The leasing replica could not know: its entries grew, and it asked for an audit.
            assert len(session.in_flight) == 30 and woken and woken[0] == 10
            # One still running stays; the finished ones go.
            await leasing.engine.enqueue([make_job()])
            leasing.engine.grant(session, 1)
            await leasing.engine.dispatcher.run_pass()
            [(running, token)] = _take(session)
            result = await audit.run_once()
            assert (result.checked, result.forgotten) == (31, 30)
            assert session.in_flight == {running.id: token}
            assert leasing.engine.dispatcher.in_flight_refs() == [(running.id, token)]
            # What the audit left sets the next threshold: twice that, at least the floor.
            assert session.in_flight_audited == 1
        finally:
            await leasing.engine.stop()
            await other.engine.stop()

    asyncio.run(main())
