"""The bench's report: written after every figure, and while the run goes on it
says which figures are missing."""

from __future__ import annotations

import pytest

from bench.__main__ import run_figures
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


def test_a_run_stopped_part_way_keeps_the_figures_it_ran() -> None:
    written: list[tuple[list[str], list[str]]] = []

    def run_one(name: str) -> list[Row]:
        if name == "snapshot":
            raise KeyboardInterrupt  # the run is stopped during its third figure
        return [Row(figure=name, unit="q/s", ours=[1.0])]

    def write(rows: list[Row], still_to_run: list[str]) -> None:
        written.append(([r.figure for r in rows], list(still_to_run)))

    with pytest.raises(KeyboardInterrupt):
        run_figures(["idle", "memory", "snapshot"], run_one, write)
    assert written == [(["idle"], ["memory", "snapshot"]), (["idle", "memory"], ["snapshot"])]


def test_the_last_figure_writes_the_finished_table() -> None:
    written: list[list[str]] = []
    rows = run_figures(
        ["idle", "memory"],
        lambda name: [Row(figure=name, unit="q/s", ours=[1.0])],
        lambda rows, still_to_run: written.append(list(still_to_run)),
    )
    assert [r.figure for r in rows] == ["idle", "memory"]
    assert written == [["memory"], []]
