"""The result table: one row per measured quantity, rendered as Markdown.

A figure module returns `Row`s. Each row holds the per-run samples of our
value and, where there is one, of the comparison value (a peer queue such as
PgQueuer, or the baseline of a ratio figure such as "with no paused jobs").
The table shows the median of the samples, the ratio, the SPEC §11 target and
whether the median meets it. A missed target is reported, never raised: the
bench does not fail on a figure.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

RESULTS_DIR = Path(__file__).parent / "results"

# Markdown sections the figures add under the table (anatomy, statement costs), in order.
SECTIONS: list[str] = []


def add_section(markdown: str) -> None:
    """Print `markdown` now and put it under the table of this run's report."""
    if markdown:
        print(markdown, flush=True)
        SECTIONS.append(markdown)


@dataclass(frozen=True)
class Target:
    """A SPEC §11 bar: a description for the table and the check behind it.

    Attributes:
        text: How the target reads in the table (e.g. "≤ 5 ms").
        check: Given (ours, comparison, ratio), whether the target is met.
            Any argument may be None when unmeasured; the check then returns None.
        judged: False for a figure the specification only asks to report
            (no pass/miss verdict).
    """

    text: str
    check: Callable[[float | None, float | None, float | None], bool | None]
    judged: bool = True

    @staticmethod
    def reported(text: str) -> Target:
        return Target(text, lambda _o, _c, _r: None, judged=False)

    @staticmethod
    def at_most(limit: float, text: str) -> Target:
        return Target(text, lambda ours, _c, _r: None if ours is None else ours <= limit)

    @staticmethod
    def at_least(limit: float, text: str) -> Target:
        return Target(text, lambda ours, _c, _r: None if ours is None else ours >= limit)

    @staticmethod
    def all_of(text: str, *targets: Target) -> Target:
        """Met when every one of `targets` is (not measured when any is not)."""

        def check(ours: float | None, comparison: float | None, ratio: float | None) -> bool | None:
            verdicts = [t.check(ours, comparison, ratio) for t in targets]
            return None if None in verdicts else all(verdicts)

        return Target(text, check)

    @staticmethod
    def ratio_at_most(limit: float, text: str) -> Target:
        return Target(text, lambda _o, _c, ratio: None if ratio is None else ratio <= limit)

    @staticmethod
    def ratio_at_least(limit: float, text: str) -> Target:
        return Target(text, lambda _o, _c, ratio: None if ratio is None else ratio >= limit)


@dataclass
class Row:
    """One line of the table.

    Attributes:
        figure: What is measured, e.g. "end-to-end throughput, 50k jobs, 2 worker processes".
        unit: Unit of `ours` and `comparison` ("jobs/s", "ms", "MB", ...).
        ours: workflow-jobs' value, one sample per run.
        comparison: The peer's or baseline's value, one sample per run (empty if none).
        comparison_name: Who `comparison` is ("PgQueuer batch 100", "no paused jobs", ...).
        target: The SPEC §11 target, if this row carries one.
        note: Anything a reader needs to interpret the row (sizes, caveats, errors).
        higher_is_better: Direction used only for the ratio's wording.
    """

    figure: str
    unit: str
    ours: list[float] = field(default_factory=list)
    comparison: list[float] = field(default_factory=list)
    comparison_name: str = ""
    target: Target | None = None
    note: str = ""
    higher_is_better: bool = True

    @property
    def ours_median(self) -> float | None:
        return statistics.median(self.ours) if self.ours else None

    @property
    def comparison_median(self) -> float | None:
        return statistics.median(self.comparison) if self.comparison else None

    @property
    def ratio(self) -> float | None:
        ours, other = self.ours_median, self.comparison_median
        if ours is None or other is None or other == 0:
            return None
        return ours / other

    @property
    def verdict(self) -> str:
        if self.target is None or not self.target.judged:
            return ""
        met = self.target.check(self.ours_median, self.comparison_median, self.ratio)
        if met is None:
            return "not measured"
        return "pass" if met else "**miss**"


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "":
        return f"{value:.4f}"
    if abs(value) >= 1000:
        return f"{value:,.0f} {unit}"
    if abs(value) >= 100:
        return f"{value:.0f} {unit}"
    if abs(value) >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def _bare(value: float, unit: str) -> str:
    if unit == "":
        return f"{value:.4f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _samples(values: list[float], unit: str) -> str:
    if len(values) <= 1:
        return ""
    return " (runs: " + ", ".join(_bare(v, unit) for v in values) + ")"


def render_table(rows: list[Row]) -> str:
    """The Markdown table of all rows (medians, ratio, target, verdict, notes)."""
    lines = [
        "| figure | workflow-jobs | peer / baseline | ratio | target (SPEC §11) | result | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        comparison = ""
        if row.comparison_name:
            comparison = f"{row.comparison_name}: {format_value(row.comparison_median, row.unit)}"
            comparison += _samples(row.comparison, row.unit)
        ratio = row.ratio
        cells = [
            row.figure,
            format_value(row.ours_median, row.unit) + _samples(row.ours, row.unit),
            comparison,
            "" if ratio is None else f"{ratio:.2f}×",
            row.target.text if row.target else "",
            row.verdict,
            row.note.replace("|", "/"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine_description(postgres_version: str) -> str:
    """One line describing where the numbers were taken."""
    try:
        import psutil

        memory = f"{psutil.virtual_memory().total / 2**30:.0f} GiB"
    except ImportError:  # pragma: no cover - psutil is a bench requirement
        memory = "unknown memory"
    return (
        f"{os.cpu_count()} cores, {memory}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, {postgres_version}"
    )


def render_report(
    rows: list[Row],
    *,
    machine: str,
    runs: int,
    quick: bool,
    figures: list[str],
    elapsed_s: float,
    load: str = "",
    still_to_run: Sequence[str] = (),
) -> str:
    """The whole Markdown document written to `bench/results/latest.md`.

    `still_to_run` names the figures not run yet when the document is written
    while the run goes on; the header then says the table is incomplete.
    """
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    mode = "quick (reduced sizes, smoke check only)" if quick else "full"
    return "\n".join(
        [
            "# workflow-jobs benchmark",
            "",
            f"- date: {now}",
            f"- machine: {machine}",
            f"- mode: {mode}; median of {runs} run(s) per figure; figures: {', '.join(figures)}",
            f"- wall time: {elapsed_s:.0f} s",
            *(
                [
                    "- **incomplete**: written while the run went on; not run yet: "
                    + ", ".join(still_to_run)
                ]
                if still_to_run
                else []
            ),
            *(
                [
                    f"- load average (1 min) {load}; the machine is shared, so other "
                    "work may have run beside the bench"
                ]
                if load
                else []
            ),
            "- all processes on one machine over loopback; no-op handlers; "
            "workers are separate processes",
            "",
            render_table(rows),
            "",
            "Ratio = workflow-jobs ÷ peer (or ÷ baseline for the acquisition ratios). "
            "A *miss* is reported, never fatal.",
            "",
            *(f"{section}\n" for section in SECTIONS),
        ]
    )
