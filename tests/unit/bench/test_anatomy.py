"""The bench's latency anatomy: stage logs joined by job id into per-step
percentiles, and the unary figure's combined target."""

from __future__ import annotations

from pathlib import Path

from bench import anatomy
from bench.recording import StartRecord
from bench.results import Row, Target

MS = 1_000_000


def test_stage_logs_and_starts_are_joined_by_job_id_into_step_percentiles(tmp_path: Path) -> None:
    prefix = tmp_path / "run-stages"
    # Two processes' logs; job "b" was written twice at one stage (its first time counts).
    Path(f"{prefix}.coordinator.1").write_text(
        f"a received {1 * MS}\na committed {3 * MS}\nb received {10 * MS}\n"
        f"b committed {16 * MS}\nb committed {99 * MS}\n"
    )
    Path(f"{prefix}.worker.2").write_text(f"a received_by_worker {4 * MS}\n")
    Path(tmp_path / "other.coordinator.1").write_text(f"a received {50 * MS}\n")  # not this run
    clock = anatomy.StageClock()
    clock.stamps["a"]["client_send"] = 0
    clock.stamps["b"]["client_send"] = 9 * MS
    logged = anatomy.read_stage_files(prefix)
    assert logged["b"]["committed"] == 16 * MS
    jobs = anatomy.merge(
        clock, logged, [StartRecord(5 * MS, "t", 0, "a"), StartRecord(7 * MS, "t", 0, "-")]
    )
    steps = anatomy.step_percentiles(jobs)
    assert steps["client_send→received"] == (1.0, 1.0, 2)
    assert steps["received_by_worker→handler_start"] == (1.0, 1.0, 1)
    assert steps["client_send→handler_start"] == (5.0, 5.0, 1)
    # Steps whose stages no job has are absent; the table says so with a dash.
    assert "received→flush" not in steps
    table = anatomy.render([steps], "t")
    assert "| received→flush | wait: group commit queue" in table and "| — | — | 0 |" in table


def test_the_unary_target_needs_both_the_bound_and_the_ratio() -> None:
    target = Target.all_of(
        "p50 ≤ 1.5 ms and ≤ 2× the plain insert",
        Target.at_most(1.5, ""),
        Target.ratio_at_most(2.0, ""),
    )

    def verdict(ours: list[float], plain: list[float]) -> str:
        return Row("unary", "ms", ours=ours, comparison=plain, target=target).verdict

    assert verdict([1.2], [0.7]) == "pass"
    assert verdict([1.2], [0.5]) == "**miss**"  # 2.4× the plain insert
    assert verdict([1.6], [1.0]) == "**miss**"  # over 1.5 ms
    assert verdict([1.2], []) == "not measured"
