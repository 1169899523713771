"""`python -m bench [figure ...] [--runs N] [--quick]`: run figures, print and save the table.

Figures run on the server at BENCH_PGHOST:BENCH_PGPORT (default
127.0.0.1:5432), or with `--private-cluster` on the bench's own cluster
(`bench.cluster`, with pg_stat_statements): the per-statement cost tables
under the table appear only where pg_stat_statements is loaded.

Figures (in table order): throughput, events, replicas, latency, unary, paused, backlog,
ordering, fairness, rate_limits, idle, memory, snapshot, typescript. With no figure named, all run. Output:

- all figures, full sizes → `bench/results/latest.md` (the committed table);
- `--quick` → `bench/results/quick.md` (a smoke check; numbers not quotable);
- a subset → `bench/results/partial.md`;
- `--output PATH` overrides the destination.

The destination is rewritten after every figure, its header marked
incomplete and naming the figures still to run, so a run stopped part way
keeps what it measured; the last figure's write is the finished table.

A figure that fails is reported as a row with the error; the exit status is 0
whatever the figures show (CI never fails on a figure), 2 for bad
command-line usage, and 3 when another bench run holds the same PostgreSQL
server (the runs would drop each other's databases).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench import profiling
from bench.cluster import DATA_DIR, private_cluster
from bench.config import QUICK_SIZES, BenchConfig, Sizes
from bench.database import ServerBusy
from bench.processes import LOG_DIR
from bench.results import RESULTS_DIR, Row, machine_description, render_report, render_table

FIGURES = {
    "throughput": "bench.throughput",
    "events": "bench.events",
    "replicas": "bench.replicas",
    "latency": "bench.latency",
    "unary": "bench.unary",
    "paused": "bench.paused",
    "backlog": "bench.backlog",
    "ordering": "bench.ordering",
    "fairness": "bench.fairness",
    "rate_limits": "bench.rate_limits",
    "idle": "bench.idle",
    "memory": "bench.memory",
    "snapshot": "bench.snapshot",
    "typescript": "bench.typescript",
}
# Figures run only when named (not part of a full run's table).
ON_REQUEST = {"ab": "bench.ab"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "figures",
        nargs="*",
        metavar="figure",
        help=f"figures to run (default: all): {', '.join(FIGURES)}",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="runs per figure; the table shows the median (default 3, quick 1)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="reduced sizes: every figure in a few minutes in all"
    )
    parser.add_argument("--output", type=Path, default=None, help="where to write the table")
    parser.add_argument(
        "--private-cluster",
        action="store_true",
        help="run on the bench's own PostgreSQL cluster with pg_stat_statements "
        "(bench.cluster) instead of BENCH_PGHOST:BENCH_PGPORT: the "
        "per-statement cost tables need it",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="py-spy every coordinator into DIR (see bench.profiling); "
        "profiled figures are not for quoting",
    )
    args = parser.parse_args(argv)
    unknown = [f for f in args.figures if f not in FIGURES and f not in ON_REQUEST]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def run_figure(name: str, config: BenchConfig) -> list[Row]:
    """Run one figure; a failure becomes a row carrying the error."""
    try:
        module = importlib.import_module({**FIGURES, **ON_REQUEST}[name])
        return module.run(config)
    except Exception as exc:  # reported in the table, never fatal
        traceback.print_exc()
        first_line = (str(exc).splitlines() or [""])[0][:200]
        return [Row(figure=name, unit="", note=f"failed: {type(exc).__name__}: {first_line}")]


def run_figures(
    figures: list[str],
    run_one: Callable[[str], list[Row]],
    write: Callable[[list[Row], list[str]], None],
) -> list[Row]:
    """Run the figures in order; after each, ``write`` gets the rows so far and
    the figures still to run, so a run stopped part way keeps what it measured."""
    rows: list[Row] = []
    for index, name in enumerate(figures):
        figure_started = time.monotonic()
        print(f"== {name}", flush=True)
        rows.extend(run_one(name))
        print(f"== {name} done in {time.monotonic() - figure_started:.0f} s", flush=True)
        write(rows, figures[index + 1 :])
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.private_cluster:
        return run(args)
    with private_cluster() as port:
        os.environ["BENCH_PGHOST"], os.environ["BENCH_PGPORT"] = "127.0.0.1", str(port)
        os.environ["BENCH_PGUSER"] = "root"
        print(f"bench: private cluster {DATA_DIR} on 127.0.0.1:{port}", flush=True)
        return run(args)


def run(args: argparse.Namespace) -> int:
    figures = args.figures or list(FIGURES)
    sizes: Sizes = QUICK_SIZES if args.quick else Sizes()
    runs = args.runs or (1 if args.quick else 3)
    config = replace(BenchConfig(), runs=runs, quick=args.quick, sizes=sizes)
    if args.profile is not None:
        os.environ[profiling.ENV] = str(args.profile.resolve())

    machine = machine_description(config.server.version())
    if args.output is not None:
        destination = args.output
        destination.parent.mkdir(parents=True, exist_ok=True)
    elif args.quick:
        destination = RESULTS_DIR / "quick.md"
    elif set(figures) == set(FIGURES):
        destination = RESULTS_DIR / "latest.md"
    else:
        destination = RESULTS_DIR / "partial.md"

    try:
        with config.server.exclusive():
            print(
                f"bench: {', '.join(figures)}; {runs} run(s) each; "
                f"{'quick' if args.quick else 'full'} sizes; logs in {LOG_DIR}",
                flush=True,
            )
            print(f"machine: {machine}", flush=True)
            started = time.monotonic()
            load_before = os.getloadavg()[0]

            def write(rows: list[Row], still_to_run: list[str]) -> None:
                when = "now" if still_to_run else "at end"
                load = (
                    f"at start {load_before:.1f}, {when} {os.getloadavg()[0]:.1f} "
                    f"on {os.cpu_count()} cores"
                )
                report = render_report(
                    rows,
                    machine=machine,
                    runs=runs,
                    quick=args.quick,
                    figures=figures,
                    elapsed_s=time.monotonic() - started,
                    load=load,
                    still_to_run=still_to_run,
                )
                destination.write_text(report)

            rows = run_figures(figures, lambda name: run_figure(name, config), write)
    except ServerBusy as busy:
        print(f"bench: {busy}", file=sys.stderr)
        return 3

    print()
    print(render_table(rows))
    print()
    print(f"written to {destination}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
