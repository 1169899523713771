"""A pass holds the credit it acquires for while it awaits the store.

Enqueue's direct path leases a job at insert to a session with credit; if the
pass left that credit on the session while its claim ran, both could spend
it and the worker would be pushed more jobs than it granted.
"""

from __future__ import annotations

import asyncio

from coordinator.clock import ManualClock
from coordinator.engine.dispatch import AcquisitionBatch, Dispatcher
from coordinator.engine.enqueue import record_of_new
from coordinator.engine.sessions import LeaseBatch, WorkerSession
from coordinator.model import JobRow
from wfj_testing import make_job


def test_credit_spent_by_a_pass_cannot_be_spent_at_insert_meanwhile() -> None:
    asyncio.run(_scenario())


async def _scenario() -> None:
    session = WorkerSession(worker_id="w", job_types=frozenset({"noop"}), slots=3)
    direct_offers: list[int] = []

    class Acquisition:
        async def lease(self, job_types, tenants, owners, token, now):  # noqa: ANN001
            # While the claim awaits the store, an enqueue offers its job directly
            # to a session with credit no pass holds (Enqueue's direct path).
            await asyncio.sleep(0)
            if session.credits > session.reserved:
                session.credits -= 1
                direct_offers.append(1)
            rows: list[JobRow] = []
            for owner in owners:
                row = record_of_new(make_job())
                row.lease_owner = owner
                rows.append(row)
            return AcquisitionBatch(rows)

        async def hand_back(self, refs):  # noqa: ANN001
            return None

    dispatcher = Dispatcher(clock=ManualClock(1_000_000_000_000), acquisition=Acquisition())
    dispatcher.add_session(session)
    dispatcher.grant(session, 3)
    await dispatcher.run_pass()
    pushed = 0
    while not session.outbox.empty():
        item = session.outbox.get_nowait()
        if isinstance(item, LeaseBatch):
            pushed += len(item.jobs)
    assert direct_offers == [], "the pass held all three credits"
    assert pushed == 3
    assert (session.credits, session.reserved) == (0, 0)
