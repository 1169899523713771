"""A stream the coordinator ends with an error sends nothing more, not even
batches already queued for it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from coordinator.api.worker import WorkerServicer
from coordinator.errors import Unauthenticated
from coordinator.store import open_store
from coordinator.store.migrate import upgrade
from wfj_engine import Harness
from wfj_testing import make_job
from workflowjobs.v1 import worker_service_pb2 as wpb


def test_an_ended_stream_sends_no_queued_batch(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'stream.db'}"
    store = open_store(url)
    upgrade(store)
    store.dispose()

    async def main() -> None:
        h = Harness(url)
        servicer = WorkerServicer(h.engine)
        hold = asyncio.Event()

        async def requests():
            yield wpb.AcquireJobsRequest(
                hello=wpb.WorkerHello(worker_id="w", job_types=["noop"], slots=5)
            )
            await hold.wait()

        stream = servicer.AcquireJobs(requests(), None)  # type: ignore[arg-type]
        try:
            first = await anext(stream)
            assert first.WhichOneof("kind") == "accepted"
            session = h.engine.dispatcher.sessions["w"]
            await h.engine.enqueue([make_job() for _ in range(2)])
            h.engine.grant(session, 5)
            await h.engine.dispatcher.run_pass()
            assert session.outbox.qsize() == 1  # a batch queued, not yet sent
            session.close(Unauthenticated("the credential 'w' was revoked"))
            with pytest.raises(Unauthenticated, match="was revoked"):
                await anext(stream)
        finally:
            hold.set()
            await stream.aclose()
            await h.engine.stop()

    asyncio.run(main())
