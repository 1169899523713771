"""Optional sampling profiles of the coordinator while a figure runs (py-spy).

`python -m bench --profile DIR figure` (or BENCH_PROFILE=DIR) attaches
`py-spy record` to every coordinator the bench starts and writes one
collapsed-stack file per coordinator into DIR (plus, with `--idle`, the
GIL-free wait time too). `python -m bench.profiling FILE...` summarises such
files: the functions with the most samples, self and inclusive, so the next
bottleneck is named by a measurement. Profiling slows the coordinator down a
little; do not quote figures from a profiled run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench.processes import ManagedProcess

ENV = "BENCH_PROFILE"


def profile_dir() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value) if value else None


def py_spy() -> str | None:
    """The py-spy executable (on PATH or beside this Python), or None."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else None


def attach(pid: int, label: str) -> ManagedProcess | None:
    """Start py-spy on `pid` if profiling is on; it stops when the process exits."""
    directory = profile_dir()
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    py_spy_path = py_spy() or "py-spy"
    output = directory / f"{label}-{time.strftime('%H%M%S')}-{pid}.txt"
    return ManagedProcess(
        f"py-spy-{label}",
        [
            py_spy_path,
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "200",
            *os.environ.get("BENCH_PROFILE_FLAGS", "--gil").split(),
            "--output",
            str(output),
            "--nonblocking",
            "--full-filenames",
        ],
        deadline_s=3600,
    )


def summarise(paths: list[Path], top: int = 25) -> str:
    """Top functions by self and inclusive samples over collapsed-stack files."""
    self_samples: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = stack.split(";")
            total += count
            self_samples[frames[-1]] += count
            for frame in set(frames):
                inclusive[frame] += count
    if total == 0:
        return "no samples"
    lines = [f"{total} samples", "", "self:"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in self_samples.most_common(top)]
    lines += ["", "inclusive:"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(top)]
    return "\n".join(lines)


# Layers of the coordinator, by where a sample's innermost frame is (first match wins).
_INTERCEPTOR_FILES = (
    "auth.py",
    "decoding.py",
    "errors.py",
    "request_limits.py",
    "handlers.py",
    "pipeline.py",
)
GROUPS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    (
        "gRPC (grpc.aio callbacks, protobuf)",
        lambda f: "/grpc/" in f or "/protobuf/" in f or f.startswith("Handle._run ("),
    ),
    ("driver (psycopg)", lambda f: "psycopg" in f),
    ("SQL layer (SQLAlchemy)", lambda f: "sqlalchemy/" in f),
    (
        "interceptors",
        lambda f: (
            "coordinator/api/" in f and any(f.endswith("/" + n + ")") for n in _INTERCEPTOR_FILES)
        ),
    ),
    ("engine (coordinator's own code)", lambda f: "coordinator/" in f),
    ("asyncio, threads and the rest", lambda f: True),
)
_LINE = re.compile(r":\d+\)$")
# Where a frame's file is shown from (py-spy records full file names): after
# site-packages/, or relative to the repository or the standard library.
_ROOTS = (str(Path(__file__).resolve().parents[1]), sysconfig.get_paths()["stdlib"])


def short_frame(frame: str) -> str:
    """`name (file)` with the file from its package on."""
    name, _, path = frame.partition(" (")
    _, installed, package_path = path.rpartition("/site-packages/")
    if installed:
        return f"{name} ({package_path}"
    for root in _ROOTS:
        if path.startswith(root + "/"):
            return f"{name} ({path[len(root) + 1 :]}"
    return frame


def group_of(frame: str) -> str:
    """The layer a (line-less) frame belongs to."""
    return next(name for name, matches in GROUPS if matches(frame))


def _frames(paths: list[Path]) -> tuple[Counter[str], int]:
    """Self samples by innermost frame (line numbers dropped), and the total."""
    leaves: Counter[str] = Counter()
    total = 0
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            leaf = _LINE.sub(")", stack.split(";")[-1])
            leaves[leaf] += int(count_text)
            total += int(count_text)
    return leaves, total


def render_grouped(paths: list[Path], title: str, top: int = 20) -> str:
    """Markdown: the share of each layer, then the `top` innermost frames with their layer."""
    leaves, total = _frames(paths)
    if total == 0:
        return f"### {title}\n\nno samples (py-spy could not attach, or the run failed)"
    by_group: Counter[str] = Counter()
    for frame, n in leaves.items():
        by_group[group_of(frame)] += n
    lines = [f"### {title}", "", f"{total:,} samples (GIL held, 200/s).", ""]
    lines += ["| share | layer |", "|---|---|"]
    lines += [f"| {by_group[name] / total:.1%} | {name} |" for name, _ in GROUPS]
    lines += ["", "| share | innermost frame | layer |", "|---|---|---|"]
    lines += [
        f"| {n / total:.1%} | `{short_frame(frame)}` | {group_of(frame)} |"
        for frame, n in leaves.most_common(top)
    ]
    lines += [
        "",
        "Each sample counts once, for its innermost frame; `_run (asyncio/events.py)` as the "
        "innermost frame is grpc.aio's callbacks in its C extension. The profiled run's "
        "figures are not quoted.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="summarise py-spy collapsed stacks")
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--grouped", action="store_true", help="by layer, as the bench writes it")
    args = parser.parse_args()
    if args.grouped:
        print(render_grouped(args.files, "coordinator profile", args.top))
    else:
        print(summarise(args.files, args.top))


if __name__ == "__main__":
    main()
