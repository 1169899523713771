"""The bench's report: a run written while it goes on says which figures are missing."""

from __future__ import annotations

from bench.results import Row, render_report


def _report(still_to_run: list[str]) -> str:
    return render_report(
        [Row(figure="idle queries per second", unit="q/s", ours=[1.0, 2.0, 3.0])],
        machine="2 cores",
        runs=3,
        quick=False,
        figures=["idle", "memory", "snapshot"],
        elapsed_s=12.0,
        still_to_run=still_to_run,
    )


def test_a_report_written_mid_run_names_the_figures_not_run_yet() -> None:
    text = _report(["memory", "snapshot"])
    assert "**incomplete**" in text
    assert "not run yet: memory, snapshot" in text
    assert "| idle queries per second | 2.00 q/s" in text


def test_the_final_report_carries_no_incomplete_mark() -> None:
    text = _report([])
    assert "incomplete" not in text
    assert "idle queries per second" in text
