"""The bench's stage log (``WFJOBS_STAGE_LOG``): every stage of a single enqueue,
in order, from a real coordinator and worker."""

from __future__ import annotations

from pathlib import Path

from wfj_testing import read_records, wait_until
from worker_sdk import AdminClient, SchedulerClient

COORDINATOR_STAGES = ["received", "flush", "store_thread", "committed", "resumed", "stream_write"]


def _stages(prefix: Path, job_id: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for path in prefix.parent.glob(prefix.name + ".*"):
        for line in path.read_text().splitlines():
            job, stage, at = line.split()
            if job == job_id:
                found.setdefault(stage, int(at))
    return found


def test_stage_log_times_each_stage_of_a_single_enqueue_in_order(
    e2e_database, processes, tmp_path, monkeypatch
) -> None:
    prefix = tmp_path / "stages" / "run"
    prefix.parent.mkdir()
    monkeypatch.setenv("WFJOBS_STAGE_LOG", str(prefix))
    coordinator = processes["coordinator"](e2e_database)
    worker = processes["worker"](coordinator.target)
    with SchedulerClient(coordinator.target) as scheduler, AdminClient(coordinator.target) as admin:
        wait_until(
            lambda: any(w.credits > 0 for w in admin.list_workers()),
            60,
            "the worker to grant credit",
        )
        job = scheduler.enqueue("noop", {"n": 1})
        wait_until(lambda: read_records(worker.record), 30, "the handler to start")
    wanted = [*COORDINATOR_STAGES, "received_by_worker"]
    stages = wait_until(
        lambda: (s := _stages(prefix, job.id)).keys() >= set(wanted) and s,
        10,
        "every stage to be written",
    )
    times = [stages[name] for name in wanted]
    assert times == sorted(times), dict(zip(wanted, times, strict=True))
    # Each process writes its own file; the coordinator's and the worker's both exist.
    names = sorted(p.name.split(".")[1] for p in prefix.parent.iterdir())
    assert set(names) == {"coordinator", "worker"}
